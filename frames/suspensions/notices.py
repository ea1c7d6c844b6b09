"""What a suspension's notification says (``approval.*`` events), and the sweep that warns
before an approval expires. The deliveries themselves: contextops.notifications."""

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from contextops.notifications.services import notify
from frames.models import Suspension, token_hash
from frames.notices import approval_data

# How long before its expiry a pending approval is announced as expiring.
EXPIRING_SECONDS = 3600


def approvals_expiring_notify(*, now: datetime | None = None) -> int:
    """``approval.expiring`` for each pending approval that expires within
    ``CONTEXTOPS_NOTIFY_EXPIRING_SECONDS``; once per suspension however often it runs."""
    now = now or timezone.now()
    lead = timedelta(
        seconds=int(getattr(settings, "CONTEXTOPS_NOTIFY_EXPIRING_SECONDS", EXPIRING_SECONDS))
    )
    pending = Suspension.objects.filter(
        requires_approval=True,
        status=Suspension.Status.PENDING,
        expires_at__gt=now,
        expires_at__lte=now + lead,
    ).select_related("frame", "session", "decided_by")
    sent = 0
    for suspension in pending:
        sent += bool(
            notify(
                organization=suspension.session.organization_id,
                event="approval.expiring",
                key=token_hash(suspension.pk),
                data=approval_data(suspension, suspension.frame, suspension.session),
            )
        )
    return sent
