"""Writes to the frame stack: push a frame (funded from its parent), reserve tokens, add
results, change an open frame's status, and pop or close it (settled with its parent),
with its open descendants cancelled first when an ancestor goes."""

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from contextops.errors import Conflict, Invalid

from ..budget import DEFAULT_MAX_SUBFRAME_DEPTH
from ..events import EventSpec, RowChange, event_append, events_append
from ..locks import (
    frame_close_lock,
    frame_lock,
    session_and_frame_lock,
    session_lock,
    session_require_not_ended,
)
from ..models import Frame, Session, Suspension
from ..pressure import LOW


def open_frame_lock(frame: Frame, *, action: str) -> tuple[Session, Frame]:
    """Lock ``frame``'s session, then the frame (always in that order), and require the
    frame open; for a change to one frame, inside the caller's transaction."""
    session = session_lock(frame.session)
    locked = frame_lock(frame)
    frame_require_open(locked, action=action)
    return session, locked


def frame_require_open(frame: Frame, *, action: str) -> None:
    if frame.status not in (Frame.Status.ACTIVE, Frame.Status.WAITING):
        raise Conflict(
            "frame_not_active",
            f"Cannot {action} a {frame.status} frame; only active or waiting frames can.",
            status=frame.status,
        )


def frame_push(
    *,
    session: Session | Any,
    parent: Frame | Any | None = None,
    goal: str,
    inputs: dict[str, Any] | None = None,
    budget_total: int,
    max_subframe_depth: int | None = None,
    actor: str = "",
    organization: Any = None,
) -> Frame:
    """Open a frame; a child's total comes out of its parent's available tokens.

    ``session`` and ``parent`` may be ids: with ``organization``, one of another
    organization (or not an id) is NotFound, the session's before the parent's.
    Raises InsufficientTokens when the parent cannot fund the child, Conflict
    ``max_depth_exceeded`` when the parent is at its depth limit, Conflict
    ``frame_not_active`` when the parent is closed or suspended.

    Long because it reads straight through as the budget rules ask: lock, check the
    parent, fund the child (the arithmetic is frames.budget's), create it and log it,
    every step on the rows the first one locked.
    """
    with transaction.atomic():
        if parent is None:
            session = session_lock(session, open_only=False, organization=organization)
        else:
            session, parent = session_and_frame_lock(session, parent, organization=organization)
        session_require_not_ended(session)  # after the reads: a missing parent is a 404 first
        depth, changes = 0, []
        if parent is not None:
            if parent.session_id != session.pk:
                raise Invalid(
                    "The parent frame belongs to another session.", field="parent_frame_id"
                )
            frame_require_open(parent, action="push a child under")
            if parent.depth >= parent.max_subframe_depth:
                raise Conflict(
                    "max_depth_exceeded",
                    f"The parent is at depth {parent.depth}, the deepest its limit of {parent.max_subframe_depth} allows.",
                    max_subframe_depth=parent.max_subframe_depth,
                )
            if max_subframe_depth is None:
                max_subframe_depth = parent.max_subframe_depth
            elif max_subframe_depth > parent.max_subframe_depth:
                raise Invalid(
                    f"A child may only lower its parent's depth limit ({parent.max_subframe_depth}).",
                    field=("budget", "max_subframe_depth"),
                )
            funded = parent.budget.allocate_for_subcall(budget_total)
            parent_status = (
                Frame.Status.WAITING if parent.status == Frame.Status.ACTIVE else parent.status
            )
            changes.append(
                RowChange(
                    Frame,
                    parent.pk,
                    {
                        "subcall_allocation": funded.subcall_allocation,
                        "children_count": F("children_count") + 1,
                        "status": parent_status,
                    },
                )
            )
            depth = parent.depth + 1
        frame = Frame.objects.create(
            session=session,
            organization_id=session.organization_id,
            parent=parent,
            depth=depth,
            goal=goal,
            inputs=inputs or {},
            budget_total=budget_total,
            max_subframe_depth=DEFAULT_MAX_SUBFRAME_DEPTH
            if max_subframe_depth is None
            else max_subframe_depth,
            # The agent's window does not empty when it opens a subtask: a child starts
            # with its parent's latest occupancy and level, until its own first call.
            last_occupancy_tokens=parent.last_occupancy_tokens if parent is not None else 0,
            pressure_level=parent.pressure_level if parent is not None else LOW,
        )
        events = [
            EventSpec(
                "frame.pushed",
                frame,
                {
                    "parent_frame_id": str(parent.pk) if parent else None,
                    "depth": depth,
                    "goal": goal,
                    "inputs": frame.inputs,
                    "budget_total": budget_total,
                    "max_subframe_depth": frame.max_subframe_depth,
                    "created_at": frame.created_at.isoformat(),
                },
            )
        ]
        if parent is not None and parent_status != parent.status:
            events.append(_status_moved_event(parent, parent_status, reason="child_pushed"))
        updates: dict[str, Any] = {"updated_at": timezone.now()}
        if session.lifecycle_state in (Session.Lifecycle.LOADING, Session.Lifecycle.BOOTSTRAP):
            updates["lifecycle_state"] = Session.Lifecycle.ACTIVE
            events.append(EventSpec("session.activated"))
        events_append(session=session, events=events, actor=actor, changes=changes, **updates)
    return frame


def frame_reserve(*, frame: Frame, purpose: str, amount: int, actor: str = "") -> Frame:
    """Set ``amount`` more tokens aside for ``purpose``; InsufficientTokens if they are not there."""
    with transaction.atomic():
        session, frame = open_frame_lock(frame, action="reserve tokens on")
        reserved = frame.budget.reserve(amount)
        reservations = dict(frame.reservations)
        reservations[purpose] = reservations.get(purpose, 0) + amount
        Frame.objects.filter(pk=frame.pk).update(
            budget_reserved=reserved.reserved, reservations=reservations
        )
        event_append(
            session=session,
            type="frame.reserved",
            frame=frame,
            actor=actor,
            payload={"purpose": purpose, "amount": amount},
        )
        frame.refresh_from_db()
    return frame


MAX_RESULT_REFS = 1000


def _result_refs_extended(frame: Frame, result_refs: list) -> list:
    """``frame``'s result references with ``result_refs`` after them; 422 past the limit.

    Only for results added while the frame works, the one call an agent repeats: a pop
    brings at most its own 1,000 (PopIn), and the pops the system makes (a rejection, an
    RLM ``Final``) add their one marker whatever the frame already holds."""
    refs = [*frame.result_refs, *result_refs]
    if len(refs) > MAX_RESULT_REFS:
        raise Invalid(
            f"A frame holds at most {MAX_RESULT_REFS} result references; this one has "
            f"{len(frame.result_refs)} and {len(result_refs)} more would not fit.",
            field="result_refs",
        )
    return refs


def frame_results_add(*, frame: Frame, result_refs: list, actor: str = "") -> Frame:
    """Record results an open frame has produced so far (a file written, a fact's key),
    before it pops: its parent and the dashboard see them while it works."""
    with transaction.atomic():
        session, frame = open_frame_lock(frame, action="add results to")
        refs = _result_refs_extended(frame, result_refs)
        Frame.objects.filter(pk=frame.pk).update(result_refs=refs)
        event_append(
            session=session,
            type="frame.result_added",
            frame=frame,
            actor=actor,
            payload={"result_refs": result_refs},
        )
        frame.refresh_from_db()
    return frame


def frame_pop(
    *,
    frame: Frame | Any,
    status: str,
    result_refs: list | None = None,
    actor: str = "",
    organization: Any = None,
    failure_reason: str = "",
) -> Frame:
    """Close a frame as completed or failed and settle its budget with the parent.

    ``failure_reason`` (a failed frame only) says in the agent's words why it failed.

    The parent's subcall allocation drops by the child's total and its used rises by
    what the child used; when no other child is open, a waiting parent is active again.
    The frame's reservations are released (``released`` in ``frame.popped``), so its
    available is what went back to the parent (``returned``).
    ``frame`` may be an id: with ``organization``, one of another organization (or not
    an id) is NotFound, and nothing is written.
    """
    if status not in (Frame.Status.COMPLETED, Frame.Status.FAILED, Frame.Status.CANCELLED):
        raise Invalid("A frame pops as completed, failed or cancelled.", field="status")
    failure_reason = (failure_reason or "").strip()
    if failure_reason and status != Frame.Status.FAILED:
        raise Invalid("Only a failed frame has a failure_reason.", field="failure_reason")
    with transaction.atomic():
        session, frame = frame_close_lock(frame, organization=organization)
        session_require_not_ended(session)
        frame_require_open(frame, action="pop")
        if getattr(frame, "open_children", False):
            raise Conflict(
                "frame_has_open_children", "Pop or cancel this frame's open children first."
            )
        frame_close(
            session=session,
            frame=frame,
            status=status,
            result_refs=result_refs,
            actor=actor,
            failure_reason=failure_reason,
        )
    return frame


def frame_close(
    *,
    session: Session,
    frame: Frame,
    status: str,
    result_refs: list | None = None,
    actor: str = "",
    failure_reason: str = "",
) -> None:
    """Close a locked frame and settle it with its parent; call inside the caller's transaction.

    Shared by a pop, a rejected or expired suspension and the end of a session, so a frame
    closes the same way, with the same ``frame.popped`` event, whatever closed it.
    ``failure_reason`` says why a frame failed when the system failed it. A frame from
    ``frame_close_lock`` brings its locked parent and ``open_siblings`` along; any
    other has them read here.

    Long because the frame's close and its parent's settlement are one change, written
    and logged as one batch of events; split, each half would hand its row changes and
    events back to the other.
    """
    parent = None
    if frame.parent_id:
        parent = frame.parent if Frame.parent.is_cached(frame) else frame_lock(frame.parent_id)
    now = timezone.now()
    # A closed frame spends nothing more, so what it set aside goes back with the rest of
    # its unused tokens: its budget then says what the parent got back (``returned``).
    released = dict(frame.reservations)
    frame.status = status
    frame.completed_at = now
    frame.result_refs = [*frame.result_refs, *(result_refs or [])]
    frame.failure_reason = failure_reason
    frame.budget_reserved, frame.reservations = 0, {}
    changes = [
        RowChange(
            Frame,
            frame.pk,
            {
                "status": status,
                "completed_at": now,
                "result_refs": frame.result_refs,
                "failure_reason": failure_reason,
                "budget_reserved": 0,
                "reservations": {},
            },
        )
    ]
    events = [
        EventSpec(
            "frame.popped",
            frame,
            {
                "status": status,
                "used": frame.budget_used,
                "returned": max(0, frame.budget_total - frame.budget_used),
                "released": released,
                "result_refs": result_refs or [],
                "completed_at": now.isoformat(),
                **({"failure_reason": failure_reason} if failure_reason else {}),
            },
        )
    ]
    if parent is not None:
        settled = parent.budget.settle_subcall(
            child_total=frame.budget_total, child_used=frame.budget_used
        )
        still_waiting = getattr(frame, "open_siblings", None)
        if still_waiting is None:
            still_waiting = (
                Frame.objects.filter(parent=parent, status__in=Frame.OPEN_STATUSES)
                .exclude(pk=frame.pk)
                .exists()
            )
        parent_status = (
            Frame.Status.ACTIVE
            if parent.status == Frame.Status.WAITING and not still_waiting
            else parent.status
        )
        changes.append(
            RowChange(
                Frame,
                parent.pk,
                {
                    "budget_used": settled.used,
                    "subcall_allocation": settled.subcall_allocation,
                    "status": parent_status,
                },
            )
        )
        if parent_status != parent.status:
            events.append(_status_moved_event(parent, parent_status, reason="children_closed"))
            parent.status = parent_status
        parent.budget_used = settled.used
        parent.subcall_allocation = settled.subcall_allocation
    events_append(session=session, events=events, actor=actor, changes=changes)


def _status_moved_event(frame: Frame, status: str, *, reason: str) -> EventSpec:
    """A status change no more specific event records (``frame.updated``): a parent
    waiting while a child works, active again once its children are closed."""
    return EventSpec(
        "frame.updated", frame, {"status": status, "from": frame.status, "reason": reason}
    )


def frame_status_set(
    *, frame: Frame, status: str, event_type: str, actor: str = "", payload: dict | None = None
) -> Frame:
    """Move an open frame to another open status (suspended, active) and log why."""
    with transaction.atomic():
        session = session_lock(frame.session)
        frame = frame_lock(frame)
        Frame.objects.filter(pk=frame.pk).update(status=status)
        frame.status = status
        event_append(
            session=session,
            type=event_type,
            frame=frame,
            actor=actor,
            payload={"status": status, **(payload or {})},
        )
    return frame


def _open_descendants(frame: Frame) -> list[Frame]:
    """The frame's open descendants, deepest first (locked)."""
    open_frames = list(
        Frame.objects.select_for_update(no_key=True)
        .filter(session_id=frame.session_id, status__in=Frame.OPEN_STATUSES, depth__gt=frame.depth)
        .order_by("-depth", "created_at")
    )
    if not open_frames:
        return []
    parents = dict(Frame.objects.filter(session_id=frame.session_id).values_list("pk", "parent_id"))
    found = []
    for candidate in open_frames:
        ancestor = candidate.parent_id
        while ancestor is not None and ancestor != frame.pk:
            ancestor = parents.get(ancestor)
        if ancestor == frame.pk:
            found.append(candidate)
    return found


def cancel_open_descendants(
    frame: Frame, *, actor: str, note: str, result: dict, user: User | None = None
) -> None:
    """Cancel the frame's open descendants, deepest first, rejecting their own open
    suspensions with ``note``; inside the caller's transaction."""
    for child in _open_descendants(frame):
        if child.status != Frame.Status.SUSPENDED:
            frame_pop(frame=child, status=Frame.Status.CANCELLED, result_refs=[result], actor=actor)
            continue
        Suspension.objects.filter(frame=child, status__in=Suspension.OPEN_STATUSES).update(
            status=Suspension.Status.REJECTED,
            decided_by=user,
            decided_at=timezone.now(),
            decision_note=note,
        )
        suspended_frame_pop(
            child,
            reason="ancestor rejected" if user else "ancestor expired",
            status=Frame.Status.CANCELLED,
            result=result,
            actor=actor,
        )


def suspended_frame_pop(
    frame: Frame, *, reason: str, status: str, result: dict, actor: str, failure_reason: str = ""
) -> Frame:
    """Pop a suspended frame with ``status``: it is active again first (``frame.updated``,
    saying ``reason``), then popped as any frame is, ``result`` its one result."""
    frame_status_set(
        frame=frame,
        status=Frame.Status.ACTIVE,
        event_type="frame.updated",
        actor=actor,
        payload={"reason": reason},
    )
    return frame_pop(
        frame=frame,
        status=status,
        result_refs=[result],
        actor=actor,
        failure_reason=failure_reason,
    )
