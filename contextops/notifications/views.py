"""The dashboard's notification settings (destinations, the test button) and the
Deliveries page: for the organization's admins."""

from typing import Any
from uuid import UUID

from django.contrib import messages as flash
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from contextops.actors import user_actor
from contextops.dashboard import organization_required
from contextops.errors import DomainError, NotFound
from contextops.http import MemberRequest

from .models import EVENTS, Destination
from .selectors import deliveries_of, destination_get, destinations_of
from .services import delivery_test, destination_create, destination_delete


def _destination(request: MemberRequest, destination_id: UUID) -> Destination:
    try:
        return destination_get(organization=request.organization, destination_id=destination_id)
    except NotFound as error:
        raise Http404(str(error)) from None


def _admin_only(request: MemberRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("Only an administrator of the organization manages notifications.")


@organization_required
def settings_page(request: MemberRequest) -> HttpResponse:
    """Destinations, and a form for a new one; a webhook's secret is shown once, here."""
    _admin_only(request)
    request.nav_section = "notifications"
    context: dict[str, Any] = {"events": EVENTS, "kinds": Destination.Kind.choices, "form": {}}
    status = 200
    if request.method == "POST":
        form = {
            "name": request.POST.get("name", ""),
            "kind": request.POST.get("kind", ""),
            "url": request.POST.get("url", ""),
            "events": request.POST.getlist("events"),
        }
        try:
            destination, secret = destination_create(
                organization=request.organization,
                name=request.POST.get("name", ""),
                kind=request.POST.get("kind", ""),
                url=request.POST.get("url", ""),
                events=request.POST.getlist("events"),
                actor=user_actor(request.user),
            )
        except DomainError as exc:
            context.update(form=form, error=exc.detail)
            status = 422
        else:
            context.update(created=destination, secret=secret)
    elif request.method != "GET":
        return HttpResponse(status=405)
    context["destinations"] = destinations_of(request.organization)
    return render(request, "notifications/settings.html", context, status=status)


@require_POST
@organization_required
def destination_test(request: MemberRequest, destination_id: UUID) -> HttpResponse:
    _admin_only(request)
    destination = _destination(request, destination_id)
    delivery_test(destination=destination, actor=user_actor(request.user))
    flash.success(request, f"A test notification is on its way to {destination.name}.")
    return redirect("notifications:deliveries")


@require_POST
@organization_required
def destination_remove(request: MemberRequest, destination_id: UUID) -> HttpResponse:
    _admin_only(request)
    destination = _destination(request, destination_id)
    destination_delete(destination=destination)
    flash.success(request, f"{destination.name} removed.")
    return redirect("notifications:settings")


@require_GET
@organization_required
def deliveries(request: MemberRequest) -> HttpResponse:
    """Every notification sent, newest first: status, attempts, the last answer."""
    _admin_only(request)
    request.nav_section = "notifications"
    return render(
        request,
        "notifications/deliveries.html",
        {"deliveries": deliveries_of(request.organization)},
    )
