"""One delivery attempt: the HTTP post (signed, for a webhook) or the e-mail, counted on
the delivery's row whatever happens, and when the next attempt is due."""

import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import F, Q
from django.utils import timezone

from . import messages
from .models import Delivery, Destination

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
    return base * 2.0 ** max(0, attempts - 1)


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
    now = timezone.now()
    pending = Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.PENDING)
    # Counted in the database, never from the row read before the attempt.
    pending.update(
        attempts=F("attempts") + 1, response_code=code, last_error=error, last_attempt_at=now
    )
    attempts = Delivery.objects.values_list("attempts", flat=True).get(pk=delivery.pk)
    fields: dict[str, Any] = {}
    if not error:
        fields.update(status=Delivery.Status.DELIVERED, delivered_at=now)
    elif attempts >= max_attempts():
        fields["status"] = Delivery.Status.FAILED
    if fields:
        pending.update(**fields)
    if error:
        logger.warning("notification %s to %s: %s", delivery.event, delivery.destination, error)
    status = fields.get("status", Delivery.Status.PENDING)
    return Attempt(status=status, retry_in=retry_after(attempts) if status == "pending" else None)
