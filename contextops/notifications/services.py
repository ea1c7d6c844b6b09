"""Notification destinations and deliveries: the writes, and one delivery attempt.

``notify`` is the seam the rest of the server calls where an event happens (a suspension
waiting for approval, decided, expiring, expired; a compaction that failed): inside the
caller's transaction it adds a delivery per active destination that wants the event, and
each is sent by a Celery job once that transaction commits. A job makes one attempt
(``delivery_attempt``); one that fails is tried again with exponential backoff
(``CONTEXTOPS_NOTIFY_RETRY_SECONDS`` times 2, 4, 8 ...) until it is delivered or
``CONTEXTOPS_NOTIFY_MAX_ATTEMPTS`` attempts failed. Every attempt is counted on its row
with the last response code and error (contextops.notifications.sending).
"""

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from contextops.errors import Conflict, Invalid
from contextops.jobs import job_send_on_commit
from contextops.models import Organization

from . import messages
from .models import EVENT_NAMES, Delivery, Destination
from .tasks import delivery_send


def public_url(path: str) -> str:
    """An absolute link into the dashboard (``CONTEXTOPS_PUBLIC_URL``)."""
    base = str(getattr(settings, "CONTEXTOPS_PUBLIC_URL", "http://localhost:8000")).rstrip("/")
    return f"{base}{path}"


def _url_check(kind: str, url: str) -> str:
    url = (url or "").strip()
    if kind == Destination.Kind.EMAIL:
        if url:
            raise Invalid(
                "An e-mail destination has no URL: it writes to the approvers.", field="url"
            )
        return ""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Invalid("Give the http:// or https:// address to post to.", field="url")
    return url


def _events_check(events: list[str] | None) -> list[str]:
    chosen = list(dict.fromkeys(events or ()))
    unknown = [e for e in chosen if e not in EVENT_NAMES]
    if unknown or not chosen:
        raise Invalid(
            f"Choose events among {', '.join(EVENT_NAMES)}"
            + (f"; unknown: {', '.join(unknown)}." if unknown else "."),
            field="events",
        )
    return chosen


def destination_create(
    *,
    organization: Organization,
    name: str,
    kind: str,
    url: str = "",
    events: list[str] | None = None,
    actor: str = "",
) -> tuple[Destination, str]:
    """A new destination; returns it and, for a webhook, its signing secret (shown to
    the person once: it is never shown again). Conflict ``name_taken`` for a name the
    organization uses already."""
    name = (name or "").strip()
    if not name:
        raise Invalid("Name the destination.", field="name")
    if kind not in Destination.Kind.values:
        raise Invalid(f"kind is one of {', '.join(Destination.Kind.values)}.", field="kind")
    url = _url_check(kind, url)
    chosen = _events_check(events if events is not None else list(EVENT_NAMES[:4]))
    secret = messages.secret_new() if kind == Destination.Kind.WEBHOOK else ""
    try:
        with transaction.atomic():
            destination = Destination.objects.create(
                organization=organization,
                name=name[:120],
                kind=kind,
                url=url,
                secret=secret,
                events=chosen,
                created_by=actor[:200],
            )
    except IntegrityError:
        raise Conflict("name_taken", f"A destination is named {name!r} already.") from None
    return destination, secret


def destination_delete(*, destination: Destination) -> None:
    """Remove the destination and its deliveries."""
    destination.delete()


def notify(*, organization: Any, event: str, key: str, data: dict[str, Any]) -> list[Delivery]:
    """Deliveries of ``event`` to each of the organization's active destinations that want
    it, sent once the caller's transaction commits. ``key`` names the occurrence: the same
    key notified again adds nothing (a sweep that runs twice)."""
    organization_id = getattr(organization, "pk", organization)
    created = []
    for destination in Destination.objects.filter(organization_id=organization_id, active=True):
        if event not in destination.events:
            continue
        delivery, made = Delivery.objects.get_or_create(
            destination=destination,
            event_key=f"{event}:{key}"[:200],
            defaults={"organization_id": organization_id, "event": event, "payload": data},
        )
        if made:
            created.append(delivery)
            _queue(delivery)
    return created


def delivery_test(*, destination: Destination, actor: str = "") -> Delivery:
    """A test notification to ``destination`` now, whatever events it lists."""
    with transaction.atomic():
        delivery = Delivery.objects.create(
            organization_id=destination.organization_id,
            destination=destination,
            event="test",
            event_key=f"test:{timezone.now().isoformat()}:{actor}"[:200],
            payload={
                "detail": f"A test from contextops, sent by {actor or 'an administrator'}.",
                "link": public_url("/notifications/deliveries/"),
            },
        )
        _queue(delivery)
    return delivery


def _queue(delivery: Delivery) -> None:
    job_send_on_commit(delivery_send, str(delivery.pk))
