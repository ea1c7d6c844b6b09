"""Notification destinations and deliveries: the writes, and one delivery attempt.

``notify`` is the seam the rest of the server calls where an event happens (a suspension
waiting for approval, decided, expiring, expired; a compaction that failed): inside the
caller's transaction it adds a delivery per active destination that wants the event, and
each is sent by a Celery job once that transaction commits. A job makes one attempt
(``delivery_attempt``); one that fails is tried again with exponential backoff
(``CONTEXTOPS_NOTIFY_RETRY_SECONDS`` times 2, 4, 8 ...) until it is delivered or
``CONTEXTOPS_NOTIFY_MAX_ATTEMPTS`` attempts failed. Every attempt is counted on its row
with the last response code and error.
"""

import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from contextops.errors import Conflict, Invalid
from contextops.jobs import job_send_on_commit
from contextops.models import Organization

from . import messages
from .models import EVENT_NAMES, Delivery, Destination

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
RETRY_SECONDS = 30
TIMEOUT_SECONDS = 10
APPROVE_PERMISSION = ("frames", "approve_suspension")
USER_AGENT = "contextops-notifications/1"


def max_attempts() -> int:
    return int(getattr(settings, "CONTEXTOPS_NOTIFY_MAX_ATTEMPTS", MAX_ATTEMPTS))


def retry_after(attempts: int) -> float:
    """Seconds before the next attempt, after ``attempts`` failed ones."""
    base = float(getattr(settings, "CONTEXTOPS_NOTIFY_RETRY_SECONDS", RETRY_SECONDS))
    return base * 2 ** max(0, attempts - 1)


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
    from .tasks import delivery_send  # the job calls back into this module

    job_send_on_commit(delivery_send, str(delivery.pk))


@dataclass(frozen=True)
class Attempt:
    """What one attempt did: ``retry_in`` seconds when another should follow."""

    status: str
    retry_in: float | None = None


def approvers_emails(organization_id: Any) -> list[str]:
    """The e-mail addresses of the organization's active members who may approve."""
    app_label, codename = APPROVE_PERMISSION
    granted = Q(
        user_permissions__codename=codename, user_permissions__content_type__app_label=app_label
    )
    granted |= Q(
        groups__permissions__codename=codename,
        groups__permissions__content_type__app_label=app_label,
    )
    users = (
        get_user_model()
        .objects.filter(member__organization_id=organization_id, is_active=True)
        .filter(granted | Q(is_superuser=True))
        .exclude(email="")
        .distinct()
        .order_by("email")
    )
    return list(users.values_list("email", flat=True))


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 (http(s) only, checked on create)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _send(delivery: Delivery, destination: Destination) -> int | None:
    """Send once; the HTTP status (None for e-mail). Raises OSError when unreachable."""
    data = delivery.payload
    if destination.kind == Destination.Kind.EMAIL:
        recipients = approvers_emails(destination.organization_id)
        if not recipients:
            raise OSError("the organization has no approver with an e-mail address")
        subject, text = messages.email_message(delivery.event, data)
        send_mail(subject, text, None, recipients)
        return None
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    if destination.kind == Destination.Kind.SLACK:
        return _post(destination.url, messages.slack_body(delivery.event, data), headers)
    body = messages.webhook_body(
        delivery_id=str(delivery.pk),
        event=delivery.event,
        created_at=delivery.created_at.isoformat(),
        data=data,
    )
    now = int(timezone.now().timestamp())
    headers[messages.SIGNATURE_HEADER] = messages.signature(destination.secret, now, body)
    headers[messages.EVENT_HEADER] = delivery.event
    headers[messages.DELIVERY_HEADER] = str(delivery.pk)
    return _post(destination.url, body, headers)


def delivery_attempt(*, delivery_id: str) -> Attempt:
    """One attempt at a pending delivery, counted on its row whatever happens."""
    delivery = Delivery.objects.select_related("destination").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != Delivery.Status.PENDING:
        return Attempt(status="gone" if delivery is None else delivery.status)
    code: int | None = None
    error = ""
    try:
        code = _send(delivery, delivery.destination)
        if code is not None and not 200 <= code < 300:
            error = f"the destination answered {code}"
    except (OSError, ValueError) as exc:
        error = f"not delivered: {exc}"[:1000]
    attempts = delivery.attempts + 1
    now = timezone.now()
    fields: dict[str, Any] = {
        "attempts": attempts,
        "response_code": code,
        "last_error": error,
        "last_attempt_at": now,
    }
    if not error:
        fields.update(status=Delivery.Status.DELIVERED, delivered_at=now)
    elif attempts >= max_attempts():
        fields["status"] = Delivery.Status.FAILED
    Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.PENDING).update(**fields)
    if error:
        logger.warning("notification %s to %s: %s", delivery.event, delivery.destination, error)
    status = fields.get("status", Delivery.Status.PENDING)
    return Attempt(status=status, retry_in=retry_after(attempts) if status == "pending" else None)
