"""Reading suspensions: by token (the agent's handle), by frame and token hash (the
dashboard's), the long poll, the inbox's pending and decided lists, and the status an
observer sees. Every read is scoped to one organization and loads the relations its
callers show (``select_related``), so no answer queries per row.
"""

import re
import secrets
import time
from datetime import datetime
from uuid import UUID

from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from contextops.errors import NotFound
from contextops.models import Organization
from frames.models import Frame, Suspension, token_hash

MAX_WAIT_SECONDS = 30
POLL_INTERVAL_SECONDS = 0.5
TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
HASH_PATTERN = re.compile(r"^[0-9a-f]{64}$")
# How many of a frame's suspensions the dashboard's lookup by token hash looks through.
FRAME_SUSPENSIONS_SEARCHED = 200


def suspension_status(suspension: Suspension, now: datetime | None = None) -> str:
    """The status an observer should see: ``expired`` once the expiry has passed, even
    before the periodic job has written it."""
    return Suspension.Status.EXPIRED if suspension.is_expired(now) else suspension.status


def suspension_get(*, organization: Organization, token: str) -> Suspension:
    """The organization's suspension with ``token``; NotFound for unknown, malformed or
    another organization's tokens alike."""
    suspension = None
    if isinstance(token, str) and TOKEN_PATTERN.match(token):
        suspension = (
            Suspension.objects.select_related("frame", "session", "decided_by")
            .filter(pk=token, session__organization=organization)
            .first()
        )
    if suspension is None:
        raise NotFound("No such suspension.")
    return suspension


def suspension_wait(
    *, organization: Organization, token: str, wait_seconds: float = 0
) -> Suspension:
    """Like ``suspension_get``, but while the suspension is pending keep looking (every
    half second, at most ``wait_seconds``, capped at 30) and return as soon as it is not."""
    deadline = time.monotonic() + max(0.0, min(float(wait_seconds), MAX_WAIT_SECONDS))
    while True:
        suspension = suspension_get(organization=organization, token=token)
        if suspension_status(suspension) != Suspension.Status.PENDING:
            return suspension
        left = deadline - time.monotonic()
        if left <= 0:
            return suspension
        time.sleep(min(POLL_INTERVAL_SECONDS, left))


def suspension_for_frame(
    *, organization: Organization, frame_id: UUID | str, hashed: str
) -> Suspension:
    """The organization's suspension of ``frame_id`` whose token hashes to ``hashed``
    (how the dashboard names one without showing its token); NotFound otherwise."""
    if not isinstance(hashed, str) or not HASH_PATTERN.match(hashed):
        raise NotFound("No such suspension.")
    candidates = (
        Suspension.objects.select_related("frame", "session", "decided_by")
        .filter(frame_id=frame_id, session__organization=organization)
        .order_by("-suspended_at")
    )
    for suspension in candidates[:FRAME_SUSPENSIONS_SEARCHED]:
        if secrets.compare_digest(token_hash(suspension.token), hashed):
            return suspension
    raise NotFound("No such suspension.")


def suspensions_pending(*, organization: Organization, limit: int = 50) -> list[Suspension]:
    """Suspensions waiting for a person's decision, oldest first; expired ones and those
    whose frame was closed meanwhile (an ended session) are left out."""
    now = timezone.now()
    rows = (
        Suspension.objects.select_related("frame", "session", "session__agent")
        .filter(
            session__organization=organization,
            status=Suspension.Status.PENDING,
            requires_approval=True,
            frame__status=Frame.Status.SUSPENDED,
        )
        .exclude(expires_at__lte=now)
        .order_by("suspended_at", "token")
    )
    return list(rows[:limit])


def suspensions_decided(*, organization: Organization, limit: int = 20) -> list[Suspension]:
    """The organization's most recently decided suspensions, those that expired before
    anyone decided (at their expiry) and approvals the work went past without a decision
    (a LangGraph thread resumed past its interrupt, at the resume), newest first."""
    rows = (
        Suspension.objects.select_related("frame", "session", "decided_by")
        .filter(session__organization=organization)
        .filter(
            Q(decided_at__isnull=False)
            | Q(status=Suspension.Status.EXPIRED)
            | Q(status=Suspension.Status.RESUMED, requires_approval=True, resumed_at__isnull=False)
        )
        .annotate(ended_at=Coalesce("decided_at", "resumed_at", "expires_at"))
        .order_by("-ended_at", "-suspended_at")
    )
    return list(rows[:limit])
