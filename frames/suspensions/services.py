"""Suspending frames with opaque tokens, deciding on them, resuming and expiring them
(docs/concepts.md#suspensions): the writes. The reads (by token, by frame and token hash, the long
poll, the inbox's lists) are in ``frames.suspensions.selectors``.

A token is ``secrets.token_urlsafe(32)`` (256 bits) and is the only handle on its
suspension an agent gets; the event log stores its SHA-256 instead, and so does the
dashboard, which addresses a suspension by frame and token hash so the token itself
never appears in a page or a URL.

Lock order everywhere: the session row (``frames.locks.session_lock``), then the
suspension row, then frames (the frame services lock session then frames too), so
approve, reject, resume and the expiry job serialize per session and never deadlock
with each other.

Expiry fails the frame; it lives whole in ``frames.services.expiry`` (the periodic job's
``suspensions_expire`` included), below this package, where a read of the frame reaches it.
"""

import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from contextops import tracing
from contextops.actors import user_actor
from contextops.audit import audit_record
from contextops.errors import Conflict, Gone, Invalid
from frames.events import event_append
from frames.locks import frame_lock, session_lock
from frames.models import FAILURE_REASON_MAX, Frame, Session, Suspension, token_hash
from frames.notices import approval_notify
from frames.services.expiry import expire_locked, suspension_expire_if_overdue, suspension_locked
from frames.services.stack import (
    cancel_open_descendants,
    frame_pop,
    frame_status_set,
    suspended_frame_pop,
)

DEFAULT_EXPIRES_IN_SECONDS = 24 * 3600
MAX_EXPIRES_IN_SECONDS = 30 * 24 * 3600


def _gone() -> Gone:
    return Gone(
        "suspension_expired",
        "This suspension token has expired; suspend the frame again for a new one.",
    )


def _require_suspended(frame: Frame) -> None:
    if frame.status != Frame.Status.SUSPENDED:
        raise Conflict(
            "frame_not_active",
            f"The frame is {frame.status} now; its suspension can no longer be decided or resumed.",
            status=frame.status,
        )


def suspension_create(
    *,
    frame: Frame,
    reason: str,
    requires_approval: bool = False,
    expires_in_seconds: int | None = None,
    actor: str = "",
) -> Suspension:
    """Suspend an active or waiting frame and return its new suspension (with the token).

    Raises Conflict ``frame_not_active`` for closed frames and for frames that already
    hold an open suspension; a suspended frame whose suspension expired may be
    suspended again. Invalid when the expiry is out of bounds; Conflict
    ``session_ended`` once the session has ended.
    """
    if expires_in_seconds is None:
        expires_in_seconds = DEFAULT_EXPIRES_IN_SECONDS
    if not 1 <= expires_in_seconds <= MAX_EXPIRES_IN_SECONDS:
        raise Invalid(
            f"expires_in_seconds must be between 1 and {MAX_EXPIRES_IN_SECONDS}.",
            field="expires_in_seconds",
        )
    if not reason.strip():
        raise Invalid("Say why the frame is suspended.", field="reason")
    overdue = Suspension.objects.filter(frame=frame, status__in=Suspension.OPEN_STATUSES).first()
    if overdue is not None:
        # Committed on its own: the refusal that follows for the failed frame keeps it.
        suspension_expire_if_overdue(overdue)
    with transaction.atomic():
        session = session_lock(frame.session_id)
        frame = frame_lock(frame)
        open_one = Suspension.objects.filter(
            frame=frame, status__in=Suspension.OPEN_STATUSES
        ).first()
        if (
            frame.status == Frame.Status.SUSPENDED
            and open_one is not None
            and open_one.is_expired()
        ):
            expire_locked(session=session, suspension=open_one, now=timezone.now())
            frame.refresh_from_db()
            open_one = None
        resuspend = frame.status == Frame.Status.SUSPENDED and open_one is None
        if frame.status not in (Frame.Status.ACTIVE, Frame.Status.WAITING) and not resuspend:
            raise Conflict(
                "frame_not_active",
                f"Cannot suspend a {frame.status} frame; only active or waiting frames can be suspended.",
                status=frame.status,
            )
        now = timezone.now()
        expires_at = now + timedelta(seconds=expires_in_seconds)
        suspension = Suspension.objects.create(
            token=secrets.token_urlsafe(32),
            frame=frame,
            session=session,
            reason=reason,
            requires_approval=requires_approval,
            suspended_by=actor[:200],
            suspended_at=now,
            expires_at=expires_at,
        )
        frame_status_set(
            frame=frame,
            status=Frame.Status.SUSPENDED,
            event_type="frame.suspended",
            actor=actor,
            payload={
                "token_hash": token_hash(suspension.token),
                "reason": reason,
                "requires_approval": requires_approval,
                "expires_at": expires_at.isoformat(),
            },
        )
        approval_notify("approval.pending", suspension, frame, session)
    return suspension


def _decide(
    *, suspension: Suspension, user: User, status: str, note: str
) -> tuple[Session, Suspension, Frame]:
    """Shared part of approve and reject: lock, check still pending, record the decision.

    Returns the locked session, the updated suspension and the locked frame; the caller
    is inside a transaction. Raises Gone for an expired suspension (after marking it,
    see the callers), Conflict ``already_decided`` when someone decided first.
    """
    session, locked = suspension_locked(suspension)
    frame = frame_lock(locked.frame_id)
    if locked.status == Suspension.Status.EXPIRED or locked.is_expired():
        raise _gone()  # overdue since suspension_expire_if_overdue looked: the job will mark it
    if locked.status != Suspension.Status.PENDING:
        raise Conflict(
            "already_decided", f"This suspension is already {locked.status}.", status=locked.status
        )
    _require_suspended(frame)
    now = timezone.now()
    Suspension.objects.filter(pk=locked.pk).update(
        status=status, decided_by=user, decided_at=now, decision_note=note
    )
    locked.status = status
    locked.decided_by = user
    locked.decided_at = now
    locked.decision_note = note
    event_append(
        session=session,
        type=f"suspension.{status}",
        frame=frame,
        actor=user_actor(user),
        payload={"token_hash": token_hash(locked.pk), "note": note},
    )
    audit_record(
        action=f"suspension.{status}",
        user=user,
        organization_id=session.organization_id,
        target=f"suspension of frame {frame.pk}",
        detail={
            "session_id": str(session.pk),
            "frame_id": str(frame.pk),
            "goal": frame.goal[:200],
            "reason": locked.reason[:500],
            "note": note,
        },
    )
    approval_notify("approval.decided", locked, frame, session)
    return session, locked, frame


def suspension_approve(*, suspension: Suspension, user: User, note: str = "") -> Suspension:
    """A person approves: the agent may resume with its token from now on.

    Raises Gone ``suspension_expired`` when overdue, after committing the expiry mark
    in a transaction of its own; Conflict ``already_decided`` when it was decided (or
    resumed) before. Returns the suspension as decided (its frame not loaded).
    """
    if suspension_expire_if_overdue(suspension):
        raise _gone()
    with _approval_span(suspension, user, Suspension.Status.APPROVED), transaction.atomic():
        _, decided, _ = _decide(
            suspension=suspension, user=user, status=Suspension.Status.APPROVED, note=note
        )
    return decided


def _approval_span(suspension: Suspension, user: User, decision: str):
    """A span for a person's decision on a suspension (when OTLP export is on)."""
    return tracing.span(
        "approval",
        {
            "contextops.approval.decision": decision,
            "contextops.approval.decided_by": user.get_username(),
            "contextops.frame.id": str(suspension.frame_id),
            "gen_ai.conversation.id": str(suspension.session_id),
        },
    )


def rejected_reason(user: User, note: str) -> str:
    """A rejected frame's ``failure_reason``: who rejected it and why, in their words."""
    return f"rejected by {user.get_username()}: {note}"[:FAILURE_REASON_MAX]


def suspension_reject(*, suspension: Suspension, user: User, note: str) -> Suspension:
    """A person rejects: the frame fails with the note as its reason (``failure_reason``
    "rejected by <username>: <note>").

    The failure is an ordinary pop (status ``failed``, result ``{"rejected": note}``) so
    the parent settles the budget exactly as it would for any failed child. Open
    descendants of the frame are cancelled first (deepest first), their own open
    suspensions rejected with them. Raises Invalid without a note (nothing changed),
    and Gone / Conflict as ``suspension_approve`` does (an overdue suspension's expiry
    mark committed first).
    """
    note = (note or "").strip()
    if not note:
        raise Invalid("Say why the suspension is rejected.", field="note")
    if suspension_expire_if_overdue(suspension):
        raise _gone()
    actor = user_actor(user)
    with _approval_span(suspension, user, Suspension.Status.REJECTED), transaction.atomic():
        _, decided, frame = _decide(
            suspension=suspension, user=user, status=Suspension.Status.REJECTED, note=note
        )
        cancel_open_descendants(
            frame,
            actor=actor,
            note=f"An ancestor's suspension was rejected: {note}",
            result={"cancelled": "an ancestor's suspension was rejected"},
            user=user,
        )
        suspended_frame_pop(
            frame,
            reason="suspension rejected",
            status=Frame.Status.FAILED,
            result={"rejected": note},
            actor=actor,
            failure_reason=rejected_reason(user, note),
        )
    return decided


def suspension_resume(*, suspension: Suspension, actor: str = "") -> Frame:
    """Use the token: the frame is active again (waiting when it still has open children).

    Raises Conflict ``suspension_not_approved`` while approval is pending or after a
    rejection, Conflict ``token_used`` the second time, Gone ``suspension_expired``
    once overdue (the expiry mark committed first, in a transaction of its own). Returns
    the frame as it stands at the commit.
    """
    if suspension_expire_if_overdue(suspension):
        raise _gone()
    with transaction.atomic():
        session, locked = suspension_locked(suspension)
        if locked.status == Suspension.Status.RESUMED:
            raise Conflict(
                "token_used", "This suspension token has already been used to resume the frame."
            )
        if locked.status == Suspension.Status.EXPIRED or locked.is_expired():
            raise _gone()
        if locked.status == Suspension.Status.REJECTED:
            raise Conflict(
                "suspension_not_approved",
                "The suspension was rejected; the frame has failed.",
                status="rejected",
            )
        if locked.status == Suspension.Status.PENDING and locked.requires_approval:
            raise Conflict(
                "suspension_not_approved",
                "A person has not approved this suspension yet.",
                status="pending",
            )
        frame = frame_lock(locked.frame_id)
        _require_suspended(frame)
        still_waiting = Frame.objects.filter(parent=frame, status__in=Frame.OPEN_STATUSES).exists()
        payload = {"token_hash": token_hash(locked.pk)}
        approver = locked.decided_by
        if approver is not None:
            payload["approved_by"] = user_actor(approver)
        frame = frame_status_set(
            frame=frame,
            status=Frame.Status.WAITING if still_waiting else Frame.Status.ACTIVE,
            event_type="frame.resumed",
            actor=actor,
            payload=payload,
        )
        Suspension.objects.filter(pk=locked.pk).update(
            status=Suspension.Status.RESUMED, resumed_at=timezone.now(), resumed_by=actor[:200]
        )
        frame.refresh_from_db()
    return frame


def suspension_passed(*, suspension: Suspension, actor: str, result: dict) -> bool:
    """The work the frame waited for went on without its token (a LangGraph thread resumed
    past its interrupt, however it was resumed): an open suspension ends ``resumed`` by
    ``actor`` and its frame, resumed, closes as completed with ``result``. Inside the
    caller's transaction, the session locked. False (nothing changed) when the suspension
    was no longer open (resumed, rejected or expired before) or its frame not suspended.
    """
    locked = Suspension.objects.select_for_update(no_key=True).get(pk=suspension.pk)
    if locked.status not in Suspension.OPEN_STATUSES:
        return False
    frame = frame_lock(locked.frame_id)
    if frame.status != Frame.Status.SUSPENDED:
        return False
    payload = {"token_hash": token_hash(locked.pk), "resumed_by": actor}
    if locked.decided_by is not None:
        payload["approved_by"] = user_actor(locked.decided_by)
    Suspension.objects.filter(pk=locked.pk).update(
        status=Suspension.Status.RESUMED, resumed_at=timezone.now(), resumed_by=actor[:200]
    )
    cancel_open_descendants(
        frame,
        actor=actor,
        note="The work went on past its ancestor's suspension.",
        result={"cancelled": "the work went on past an ancestor's suspension"},
    )
    frame = frame_status_set(
        frame=frame,
        status=Frame.Status.ACTIVE,
        event_type="frame.resumed",
        actor=actor,
        payload=payload,
    )
    frame_pop(frame=frame, status=Frame.Status.COMPLETED, result_refs=[result], actor=actor)
    return True
