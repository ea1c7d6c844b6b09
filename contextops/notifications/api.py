"""Notification destinations and their deliveries. Any key of the organization reads them
(a URL shown only as far as its host: an incoming-webhook address is a credential);
adding, removing and testing take an administrator: an agent key of ``admin`` authority
or above, or a person's own key (``create_api_key --user``) whose user administers the
organization."""

from datetime import datetime
from urllib.parse import urlsplit
from uuid import UUID

from ninja import Query, Router, Schema
from ninja.responses import Status

from contextops.actors import request_actor
from contextops.auth import api_key_person
from contextops.bodies import BodyIn
from contextops.errors import AuthorityTooLow
from contextops.http import ApiRequest

from .models import Delivery, Destination
from .selectors import deliveries_of, destination_get, destinations_of
from .services import delivery_test, destination_create, destination_delete

router = Router(tags=["notifications"])
MANAGE_PERMISSION = "notifications.change_destination"
ADMIN_AUTHORITY = "admin"


class DestinationIn(BodyIn):
    name: str
    kind: str
    url: str = ""
    events: list[str] | None = None


class DestinationOut(Schema):
    id: UUID
    name: str
    kind: str
    url: str
    events: list[str]
    active: bool
    secret_hint: str
    created_at: datetime
    # The signing secret of a new webhook: in the answer that made it, and never again.
    secret: str | None = None


class DeliveryOut(Schema):
    id: UUID
    destination_id: UUID
    event: str
    status: str
    attempts: int
    response_code: int | None
    last_error: str
    created_at: datetime
    last_attempt_at: datetime | None
    delivered_at: datetime | None


class DeliveriesQuery(BodyIn):
    destination_id: UUID | None = None


def _admin(request: ApiRequest) -> None:
    """Refuse a key that may not manage the organization's notifications."""
    organization = request.organization
    if request.api_key.user_id is not None:
        user = api_key_person(request.api_key, permission=MANAGE_PERMISSION)
        if user.is_staff:
            return
    elif organization.authority_rank(request.agent.authority) <= organization.authority_rank(
        ADMIN_AUTHORITY
    ):
        return
    raise AuthorityTooLow(
        "Managing notifications takes an administrator: an agent key of admin authority "
        "or an organization administrator's own key."
    )


def _shown_url(url: str) -> str:
    """A destination's address up to its host: the rest may be its secret."""
    if not url:
        return ""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…" if parts.path not in ("", "/") else url


def _out(
    destination: Destination, secret: str | None = None, *, created: bool = False
) -> DestinationOut:
    return DestinationOut(
        id=destination.pk,
        name=destination.name,
        kind=destination.kind,
        url=destination.url if created else _shown_url(destination.url),
        events=destination.events,
        active=destination.active,
        secret_hint=destination.secret_hint,
        created_at=destination.created_at,
        secret=secret,
    )


def _delivery_out(delivery: Delivery) -> DeliveryOut:
    return DeliveryOut(
        id=delivery.pk,
        destination_id=delivery.destination_id,
        event=delivery.event,
        status=delivery.status,
        attempts=delivery.attempts,
        response_code=delivery.response_code,
        last_error=delivery.last_error,
        created_at=delivery.created_at,
        last_attempt_at=delivery.last_attempt_at,
        delivered_at=delivery.delivered_at,
    )


@router.get(
    "/notifications/destinations",
    response=list[DestinationOut],
    summary="The organization's notification destinations",
)
def destinations_list(request: ApiRequest) -> list[DestinationOut]:
    return [_out(d) for d in destinations_of(request.organization)]


@router.post(
    "/notifications/destinations",
    response={201: DestinationOut},
    summary="Add a destination (a webhook's signing secret is in this answer only)",
)
def destinations_add(request: ApiRequest, payload: DestinationIn) -> Status[DestinationOut]:
    _admin(request)
    destination, secret = destination_create(
        organization=request.organization,
        name=payload.name,
        kind=payload.kind,
        url=payload.url,
        events=payload.events,
        actor=request_actor(request),
    )
    return Status(201, _out(destination, secret or None, created=True))


@router.delete(
    "/notifications/destinations/{destination_id}",
    response={204: None},
    summary="Remove a destination and its deliveries",
)
def destinations_remove(request: ApiRequest, destination_id: UUID) -> Status[None]:
    _admin(request)
    destination_delete(
        destination=destination_get(
            organization=request.organization, destination_id=destination_id
        )
    )
    return Status(204, None)


@router.post(
    "/notifications/destinations/{destination_id}/test",
    response={202: DeliveryOut},
    summary="Send a test notification to a destination now",
)
def destinations_test(request: ApiRequest, destination_id: UUID) -> Status[DeliveryOut]:
    _admin(request)
    destination = destination_get(organization=request.organization, destination_id=destination_id)
    return Status(
        202, _delivery_out(delivery_test(destination=destination, actor=request_actor(request)))
    )


@router.get(
    "/notifications/deliveries",
    response=list[DeliveryOut],
    summary="Notifications sent, newest first, with status, attempts and the last answer",
)
def deliveries_list(request: ApiRequest, filters: Query[DeliveriesQuery]) -> list[DeliveryOut]:
    destination = None
    if filters.destination_id is not None:
        destination = destination_get(
            organization=request.organization, destination_id=filters.destination_id
        )
    return [_delivery_out(d) for d in deliveries_of(request.organization, destination=destination)]
