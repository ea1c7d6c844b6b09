"""Reads: an organization's destinations and recent deliveries."""

from typing import Any

from django.db.models import QuerySet

from contextops.errors import NotFound

from .models import Delivery, Destination

DELIVERIES_SHOWN = 200


def destinations_of(organization: Any) -> QuerySet[Destination]:
    return Destination.objects.filter(organization=organization).order_by("name")


def destination_get(*, organization: Any, destination_id: Any) -> Destination:
    """One of the organization's destinations; NotFound for another's or a malformed id."""
    found = Destination.objects.filter(organization=organization, pk=destination_id).first()
    if found is None:
        raise NotFound("No such destination.")
    return found


def deliveries_of(
    organization: Any, *, destination: Destination | None = None, limit: int = DELIVERIES_SHOWN
) -> list[Delivery]:
    """The newest deliveries first, with their destinations."""
    rows = Delivery.objects.filter(organization=organization).select_related("destination")
    if destination is not None:
        rows = rows.filter(destination=destination)
    return list(rows.order_by("-created_at")[:limit])
