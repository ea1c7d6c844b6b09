"""Suspension expiry, all of it: an overdue suspension is marked expired and its frame fails.

Expiry fails the frame: nobody answered in time, so the work the frame waited for will
not happen. The suspension is marked expired (``suspension.expired``), the frame's open
descendants are cancelled, and the frame closes as ``failed`` with ``failure_reason:
"suspension_expired"`` through the same close as any pop (``frame.popped``, its budget
settled with its parent). It happens on the first of: the periodic job
(``suspensions_expire``), a read of the suspension (``GET /suspensions/{token}``, the
inbox) or of its frame (``GET /frames/{id}``, the frame's page), a decision or a resume
(``frames.suspensions.services``). The end of a session expires the open suspensions of
the frames it cancelled (``suspensions_close``).

It sits below ``frames.suspensions`` because the frame's own read (``frames.api``,
``frames.views``) and the end of a session (``frames.context.lifecycle``) reach it.
"""

from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from contextops.actors import system_actor
from contextops.models import Organization

from ..events import event_append
from ..locks import frame_lock, session_lock
from ..models import Frame, Session, Suspension, token_hash
from ..notices import approval_notify
from .stack import cancel_open_descendants, frame_close


def _expirable(
    rows: QuerySet[Suspension], *, now: datetime, frame_closed: bool
) -> QuerySet[Suspension]:
    """The open suspensions of ``rows`` that expire: those overdue at ``now``, or
    (``frame_closed``) those whose frame is no longer suspended."""
    rows = rows.filter(status__in=Suspension.OPEN_STATUSES)
    if frame_closed:
        return rows.exclude(frame__status=Frame.Status.SUSPENDED)
    return rows.filter(expires_at__lte=now)


def suspension_expire_locked(
    *,
    session: Session,
    suspension: Suspension,
    actor: str,
    now: datetime,
    frame_closed: bool = False,
) -> bool:
    """Mark an open suspension expired with a conditional UPDATE and log it; True if this
    call was the one that did. It must be overdue, or (``frame_closed``) its frame must
    no longer be suspended, e.g. cancelled when the session ended."""
    rows = _expirable(
        Suspension.objects.filter(pk=suspension.pk), now=now, frame_closed=frame_closed
    )
    changed = rows.update(status=Suspension.Status.EXPIRED)
    if changed:
        payload = {
            "token_hash": token_hash(suspension.pk),
            "expires_at": suspension.expires_at.isoformat() if suspension.expires_at else None,
        }
        if frame_closed:
            payload["reason"] = "frame_closed"
        event_append(
            session=session,
            type="suspension.expired",
            frame=Frame.objects.only("pk").get(pk=suspension.frame_id),
            actor=actor,
            payload=payload,
        )
    return bool(changed)


# Expiry fails the frame (docs/concepts.md#suspensions): shared by the periodic job, every read of a
# suspension or of its frame, a decision and a resume (frames.suspensions.services).
EXPIRY_ACTOR = system_actor("suspension-expiry")
EXPIRED_REASON = "suspension_expired"


def suspension_locked(suspension: Suspension) -> tuple[Session, Suspension]:
    """Lock the suspension's session (ended or not: a decision on an ended session's
    suspension is refused by its frame's status), then the suspension; return both fresh."""
    session = session_lock(suspension.session_id, open_only=False)
    return session, Suspension.objects.select_for_update(no_key=True).get(pk=suspension.pk)


def expire_locked(*, session: Session, suspension: Suspension, now: datetime) -> bool:
    """Mark an overdue open suspension expired and fail its frame; inside the caller's
    transaction, the session locked. True if this call was the one that expired it."""
    if not suspension_expire_locked(
        session=session,
        suspension=suspension,
        actor=EXPIRY_ACTOR,
        now=now,
    ):
        return False
    frame = frame_lock(suspension.frame_id)
    if frame.status == Frame.Status.SUSPENDED:
        cancel_open_descendants(
            frame,
            actor=EXPIRY_ACTOR,
            note="An ancestor's suspension expired.",
            result={"cancelled": "an ancestor's suspension expired"},
        )
        frame_close(
            session=session,
            frame=frame,
            status=Frame.Status.FAILED,
            result_refs=[{"failed": "the suspension expired before anyone resumed it"}],
            actor=EXPIRY_ACTOR,
            failure_reason=EXPIRED_REASON,
        )
    suspension.status = Suspension.Status.EXPIRED
    approval_notify("approval.expired", suspension, frame, session)
    return True


def suspension_expire_if_overdue(suspension: Suspension) -> bool:
    """In its own transaction: expire ``suspension`` (failing its frame) if it is overdue;
    True if it is (now) expired. Runs before a decision so the mark survives the 410 that
    follows, and on every read of a suspension so nobody sees an overdue one pending."""
    if suspension.status != Suspension.Status.EXPIRED and not suspension.is_expired():
        return False  # nothing to lock for: a suspension only becomes overdue with time
    with transaction.atomic():
        session, locked = suspension_locked(suspension)
        if locked.status == Suspension.Status.EXPIRED:
            return True
        if locked.is_expired():
            expire_locked(session=session, suspension=locked, now=timezone.now())
            return True
    return False


def frame_suspension_expire_if_overdue(frame: Frame) -> bool:
    """A read of a suspended frame applies its suspension's expiry at once, by the rule a
    read of the suspension applies (``suspension_expire_if_overdue``): True if the frame's
    open suspension is (now) expired and the frame failed, so the reader reads it again."""
    if frame.status != Frame.Status.SUSPENDED:
        return False
    open_one = Suspension.objects.filter(
        frame_id=frame.pk, status__in=Suspension.OPEN_STATUSES
    ).first()
    return open_one is not None and suspension_expire_if_overdue(open_one)


def suspensions_close(*, session: Session, actor: str) -> int:
    """Expire the open suspensions of the session's frames that are no longer suspended
    (cancelled by the end of the session); inside the caller's transaction, the session
    locked. Returns how many were expired."""
    now = timezone.now()
    expired = 0
    for suspension in Suspension.objects.select_for_update(no_key=True).filter(
        session=session, status__in=Suspension.OPEN_STATUSES
    ):
        expired += suspension_expire_locked(
            session=session,
            suspension=suspension,
            actor=actor,
            now=now,
            frame_closed=True,
        )
    return expired


def suspensions_expire(
    *, now: datetime | None = None, batch: int = 500, organization: Organization | None = None
) -> int:
    """Mark every open suspension past its expiry expired and fail its frame; return how
    many this call did. With ``organization``, only that organization's (what a page
    showing them runs first).

    Each is claimed with a conditional UPDATE under its session's lock, so a decision or
    resume racing with this job either happens first (and the row no longer matches)
    or sees the suspension expired. Open suspensions whose frame was closed meanwhile
    (the session ended and cancelled it) are expired too, so no agent waits on a token
    that can never be used.
    """
    now = now or timezone.now()
    expired = 0
    scope: QuerySet[Suspension] = Suspension.objects.all()
    if organization is not None:
        scope = scope.filter(session__organization=organization)
    for frame_closed in (False, True):
        open_rows = _expirable(scope, now=now, frame_closed=frame_closed)
        seen: set[str] = set()
        while True:
            rows = list(open_rows.exclude(pk__in=seen).order_by("suspended_at")[:batch])
            if not rows:
                break
            for suspension in rows:
                seen.add(suspension.pk)
                with transaction.atomic():
                    session = session_lock(suspension.session_id, open_only=False)
                    if frame_closed:
                        done = suspension_expire_locked(
                            session=session,
                            suspension=suspension,
                            actor=EXPIRY_ACTOR,
                            now=now,
                            frame_closed=True,
                        )
                    else:
                        done = expire_locked(session=session, suspension=suspension, now=now)
                    expired += done
    return expired
