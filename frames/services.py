"""Writes to sessions, frames, handles and usage.

Each service runs in one transaction, locks the session row first (then the frames it
changes, parents before children) and appends its event to the session's log inside that
transaction. Every write of one session therefore serializes on the session row, which
is what keeps budget arithmetic exact when many agents write at once; on SQLite the
IMMEDIATE transaction mode gives the same guarantee for the whole database.
"""

import functools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import F, OuterRef, QuerySet, Subquery
from django.utils import timezone

from contextops.actors import system_actor
from contextops.embeddings import vector_for_storage
from contextops.errors import AuthorityTooLow, Conflict, Invalid, NotFound
from contextops.ids import parse_id
from contextops.rows import columns, from_row
from contextops.tokens import count_tokens
from contextops.zones import zone_check

from .budget import usage_tokens
from .events import EventSpec, RowChange, event_append, events_append
from .locks import (
    frame_close_lock,
    frame_lock,
    session_and_frame_lock,
    session_lock,
    session_require_not_ended,
)
from .models import ContextHandle, Event, Frame, Session, Suspension, Usage, token_hash
from .notices import approval_notify
from .pressure import CRITICAL, LOW, level_next, utilization_of
from .selectors import stack_order_sql, top_frame, top_frame_id_of

DEFAULT_MAX_SUBFRAME_DEPTH = 8


def _open_frame_lock(frame: Frame, *, action: str) -> tuple[Session, Frame]:
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


def _frame_snapshot(frame: Frame) -> dict[str, Any]:
    return {
        "status": frame.status,
        "total": frame.budget_total,
        "used": frame.budget_used,
        "reserved": frame.budget_reserved,
        "subcall_allocation": frame.subcall_allocation,
    }


def session_create(
    *,
    organization,
    agent=None,
    identity: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    context_window_tokens: int = 200_000,
    model: str = "",
    title: str = "",
    compaction_threshold: float = 0.9,
    eviction_policy: str = Session.Eviction.LRU,
    actor: str = "",
) -> Session:
    """Start a session; its identity (layer 1) is fixed from here on.

    The identity's authority defaults to the agent's own and may not exceed it: an
    agent cannot start a session that speaks with more authority than its key has.
    """
    identity = dict(identity or {})
    environment = dict(environment or {})
    if environment.get("timezone"):
        zone_check(environment["timezone"], field="environment.timezone")
    if agent is not None:
        agent_authority = agent.authority
        claimed = identity.get("authority") or agent_authority
        if claimed not in organization.authority_ladder:
            raise Invalid(
                f"Unknown authority {claimed!r}; this organization's ladder is {', '.join(organization.authority_ladder)}.",
                field=("identity", "authority"),
            )
        if organization.authority_rank(claimed) < organization.authority_rank(agent_authority):
            raise AuthorityTooLow(
                f"This key speaks with {agent_authority} authority; it cannot start a session as {claimed}."
            )
        identity["authority"] = claimed
        identity.setdefault("organization", organization.name)
    with transaction.atomic():
        session = Session.objects.create(
            organization=organization,
            agent=agent,
            identity=identity,
            environment=dict(environment or {}),
            context_window_tokens=context_window_tokens,
            model=model,
            title=title or str(identity.get("user_name") or ""),
            compaction_threshold=compaction_threshold,
            eviction_policy=eviction_policy,
            # Seed 003's lifecycle: loading until the agent first reads its context back
            # (resume or a context pack: bootstrap), active from its first frame.
            lifecycle_state=Session.Lifecycle.LOADING,
        )
        event_append(
            session=session,
            type="session.created",
            actor=actor,
            payload={
                "identity": identity,
                "context_window_tokens": context_window_tokens,
                "model": model,
            },
        )
    return session


@dataclass(frozen=True)
class SessionRead:
    """A session with the top of its stack, both read inside the write's transaction."""

    session: Session
    top: Frame | None


def session_eviction_policy_set(*, session: Session, policy: str, actor: str = "") -> SessionRead:
    """Change the policy that orders the session's eviction candidates (seed 003
    ``set_priority``), logging ``session.updated`` with the old and new policy; a policy
    equal to the current one changes nothing and logs nothing. Returns the session as it
    stands at the commit (its agent loaded) with the top of its stack."""
    if policy not in Session.Eviction.values:
        raise Invalid(
            f"eviction_policy must be one of {', '.join(Session.Eviction.values)}.",
            field="eviction_policy",
        )
    with transaction.atomic():
        locked = session_lock(session)
        previous = locked.eviction_policy
        if policy != previous:
            Session.objects.filter(pk=locked.pk).update(
                eviction_policy=policy, updated_at=timezone.now()
            )
            locked.eviction_policy = policy
            event_append(
                session=locked,
                type="session.updated",
                actor=actor,
                payload={"eviction_policy": policy, "from": {"eviction_policy": previous}},
            )
        locked.agent  # noqa: B018  # read inside the transaction: the answer names it
        return SessionRead(session=locked, top=top_frame(locked))


def session_bootstrapped(*, session: Session, actor: str = "") -> None:
    """A loading session moves to bootstrap once its agent reads its context back (a
    resume or a context pack); any other state is left alone. One conditional UPDATE."""
    with transaction.atomic():
        moved = Session.objects.filter(
            pk=session.pk, lifecycle_state=Session.Lifecycle.LOADING
        ).update(lifecycle_state=Session.Lifecycle.BOOTSTRAP, updated_at=timezone.now())
        if moved:
            session.lifecycle_state = Session.Lifecycle.BOOTSTRAP
            event_append(session=session, type="session.bootstrapped", actor=actor)


def session_activated(*, session: Session, actor: str = "") -> None:
    """A loading or bootstrapping session moves to active once its agent stores work
    there other than a frame (a LangGraph checkpoint), as a first frame moves it; any
    other state is left alone. One conditional UPDATE."""
    with transaction.atomic():
        moved = Session.objects.filter(
            pk=session.pk,
            lifecycle_state__in=(Session.Lifecycle.LOADING, Session.Lifecycle.BOOTSTRAP),
        ).update(lifecycle_state=Session.Lifecycle.ACTIVE, updated_at=timezone.now())
        if moved:
            session.lifecycle_state = Session.Lifecycle.ACTIVE
            event_append(session=session, type="session.activated", actor=actor)


def actor_resumed_record(*, session: Session, current_frame, pending: int, actor: str = "") -> None:
    """Log that an actor rebuilt its stack from the database (seed 000 §6 ``actor.resumed``)."""
    with transaction.atomic():
        session_bootstrapped(session=session, actor=actor)
        event_append(
            session=session,
            type="actor.resumed",
            frame=current_frame,
            actor=actor,
            payload={"pending_work": pending},
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
        session, frame = _open_frame_lock(frame, action="reserve tokens on")
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
        session, frame = _open_frame_lock(frame, action="add results to")
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


def usage_record(
    *,
    session: Session | None = None,
    frame: Frame | Any | None = None,
    organization: Any = None,
    input_tokens: int,
    output_tokens: int,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    model: str = "",
    message_id: str = "",
    started_at: datetime | None = None,
    latency_ms: int | None = None,
    actor: str = "",
) -> Usage:
    """Store one model call's usage; charge it to ``frame`` and the session's totals.
    ``started_at`` and ``latency_ms`` are the call's timing as the caller measured it.

    The frame's ``used`` rises by every token the call put in the window (full input
    plus output); the frame's occupancy becomes this call's, and its pressure level
    (and the session's gauge, when it is the top of the stack) moves with hysteresis.

    Idempotent by ``message_id``: a second record of the same message in the session (a
    retry after a lost answer) charges nothing and returns the first record.

    The returned record's ``frame`` is the charged frame as it stands at the commit (its
    budget and pressure level included), so an answer needs no read after the commit.

    Without ``session``, the call is charged to ``frame``'s session, found from the frame
    (a ``Frame`` or its id); with ``organization``, a frame of another organization (or
    an id that is not one) is NotFound, and nothing is written.
    """
    frame_pk = None
    if frame is not None:
        frame_pk = parse_id(frame, "No such frame.")
    if session is None and frame_pk is None:
        raise TypeError("usage_record needs a session or a frame")

    def frames() -> QuerySet[Frame]:
        if organization is None:
            return Frame.objects.all()
        return Frame.objects.filter(organization=organization)

    def sessions() -> QuerySet[Session]:
        if session is not None:
            return Session.objects.filter(pk=session.pk)
        assert frame_pk is not None
        return Session.objects.filter(
            pk=Subquery(frames().filter(pk=frame_pk).values("session_id"))
        )

    counts = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
    }
    spent = usage_tokens(**counts)

    def totals(sign: int) -> dict[str, Any]:
        return {
            "input_tokens_total": F("input_tokens_total") + sign * input_tokens,
            "output_tokens_total": F("output_tokens_total") + sign * output_tokens,
            "cache_creation_tokens_total": F("cache_creation_tokens_total")
            + sign * cache_creation_input_tokens,
            "cache_read_tokens_total": F("cache_read_tokens_total")
            + sign * cache_read_input_tokens,
            "api_calls_total": F("api_calls_total") + sign,
            "last_event_seq": F("last_event_seq") + sign,  # the usage.recorded event
        }

    with transaction.atomic():
        # The charge to the session's totals, with the number of its usage.recorded event,
        # is the statement that takes the session's lock: one write, no read before it.
        if frame_pk is not None and connection.vendor == "postgresql":
            charged, frame = _usage_charge_and_read(
                counts,
                session_pk=session.pk if session is not None else None,
                frame_pk=frame_pk,
                organization=organization,
                message_id=message_id,
            )
            if frame is None:
                raise NotFound("No such frame.")  # the charge matched no session
            if session is not None and frame.session_id != session.pk:
                raise Invalid("The frame belongs to another session.", field="frame_id")
            session, replayed = frame.session, getattr(frame, "replayed_id", None)
        elif frame_pk is not None:
            charged = (
                sessions()
                .exclude(lifecycle_state=Session.Lifecycle.ENDED)
                .update(**totals(+1), updated_at=timezone.now())
            )
            # Read after the lock, so what it sees (a replayed message, the top of the
            # stack) stays true until the commit.
            read: dict[str, Any] = {"top_id": top_frame_id_of("session_id")}
            if message_id:  # a record without one is never a replay: nothing to look for
                read["replayed_id"] = Subquery(
                    Usage.objects.filter(
                        session_id=OuterRef("session_id"), message_id=message_id
                    ).values("pk")[:1]
                )
            try:
                frame = frames().select_related("session").annotate(**read).get(pk=frame_pk)
            except Frame.DoesNotExist:
                raise NotFound("No such frame.") from None  # the charge matched no session
            if session is not None and frame.session_id != session.pk:
                raise Invalid("The frame belongs to another session.", field="frame_id")
            session, replayed = frame.session, getattr(frame, "replayed_id", None)
        else:
            assert session is not None
            charged = (
                sessions()
                .exclude(lifecycle_state=Session.Lifecycle.ENDED)
                .update(**totals(+1), updated_at=timezone.now())
            )
            replayed_id = Subquery(
                Usage.objects.filter(session_id=session.pk, message_id=message_id).values("pk")[:1]
            )
            session = Session.objects.annotate(replayed_id=replayed_id).get(pk=session.pk)
            replayed = getattr(session, "replayed_id", None)
        if message_id and replayed is not None:
            # A retry of a record whose answer was lost (even once the frame or the
            # session has closed): the call is charged already, so the charge above goes.
            if charged:
                Session.objects.filter(pk=session.pk).update(**totals(-1))
            usage = Usage.objects.get(pk=replayed)
            if frame is not None and usage.frame_id == frame.pk:
                usage.frame = frame  # as it stands now, read after the lock
            return usage
        session_require_not_ended(session)
        if frame is not None:
            frame_require_open(frame, action="record usage on")
        usage = Usage(
            session=session,
            frame=frame,
            model=model or session.model,
            message_id=message_id,
            started_at=started_at,
            latency_ms=latency_ms,
            **counts,
        )
        event = Event(
            session=session,
            seq=session.last_event_seq,
            type="usage.recorded",
            frame_id=frame.pk if frame is not None else None,
            actor=actor,
            payload=_usage_recorded(usage),  # its usage_id set once the row is stored
        )
        top_level = None
        if frame is None:
            usage.save(force_insert=True)
            event.payload["usage_id"] = usage.pk
            event.save(force_insert=True)
        else:
            frame.budget_used += spent
            frame.last_occupancy_tokens = usage.occupancy_tokens
            utilization = utilization_of(frame.last_occupancy_tokens, session.context_window_tokens)
            level = level_next(frame.pressure_level, utilization)
            frame.pressure_level = level
            if connection.vendor == "postgresql":
                _usage_charge_in_one_statement(usage, event, spent=spent)
            else:
                usage.save(force_insert=True)
                Frame.objects.filter(pk=frame.pk).update(
                    budget_used=F("budget_used") + spent,
                    last_occupancy_tokens=usage.occupancy_tokens,
                    pressure_level=level,
                )
                event.payload["usage_id"] = usage.pk
                event.save(force_insert=True)
            if getattr(frame, "top_id", None) == frame.pk:
                top_level = (level, utilization)
        if frame is not None and top_level is not None:
            _session_gauge_follow(session, frame, *top_level)
    return usage


@dataclass(frozen=True)
class UsageCall:
    """One model call for ``usage_record_many``: what ``usage_record`` takes but the session."""

    frame: Frame | None
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    model: str = ""
    message_id: str = ""
    started_at: datetime | None = None
    latency_ms: int | None = None

    def counts(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }


USAGE_TOTALS = {
    "input_tokens": "input_tokens_total",
    "output_tokens": "output_tokens_total",
    "cache_creation_input_tokens": "cache_creation_tokens_total",
    "cache_read_input_tokens": "cache_read_tokens_total",
}


def usage_record_many(
    *, session: Session, calls: Sequence[UsageCall], actor: str = ""
) -> list[Usage]:
    """``usage_record`` of each of ``calls`` in order, in one transaction and a handful of
    statements whatever their number (a table at a time, one UPDATE per charged frame):
    the same usage rows, session totals, frame budgets, pressure levels and events, in
    the same order and numbered alike.

    Returns a record per call, in order: a call whose ``message_id`` is stored already,
    or comes earlier in ``calls``, charges nothing and answers that first record. The
    records carry their frames as they stand after the last call. All or nothing: a call
    ``usage_record`` would refuse (a frame of another session or not open, an ended
    session) raises the same error and none is recorded. ``session`` leaves with its
    totals, pressure and event number as stored.
    """
    if not calls:
        return []
    with transaction.atomic():
        now = timezone.now()
        # The same lock usage_record's charge takes; an ended session is not written.
        Session.objects.filter(pk=session.pk).exclude(
            lifecycle_state=Session.Lifecycle.ENDED
        ).update(updated_at=now)
        held = Session.objects.get(pk=session.pk)
        frame_ids = {call.frame.pk for call in calls if call.frame is not None}
        frames = {
            frame.pk: frame
            for frame in Frame.objects.filter(pk__in=frame_ids).annotate(
                top_id=top_frame_id_of("session_id")
            )
        }
        missing = frame_ids - frames.keys()
        if missing:
            raise Frame.DoesNotExist("Frame matching query does not exist.")
        message_ids = sorted({call.message_id for call in calls if call.message_id})
        first: dict[str, Usage] = {}
        for start in range(0, len(message_ids), 500):
            for stored in Usage.objects.filter(
                session_id=session.pk, message_id__in=message_ids[start : start + 500]
            ):
                first[stored.message_id] = stored
        answers: list[Usage] = []
        created: list[Usage] = []
        # The events in order, each with its usage record (None for pressure.changed).
        pending: list[tuple[Usage | None, EventSpec]] = []
        charged: dict[str, int] = dict.fromkeys(USAGE_TOTALS.values(), 0)
        spent_by_frame: dict[Any, int] = {}
        lifecycle_before = held.lifecycle_state
        for call in calls:
            frame = frames[call.frame.pk] if call.frame is not None else None
            if frame is not None and frame.session_id != session.pk:
                raise Invalid("The frame belongs to another session.", field="frame_id")
            if call.message_id and call.message_id in first:
                answers.append(first[call.message_id])
                continue
            session_require_not_ended(held)
            if frame is not None:
                frame_require_open(frame, action="record usage on")
            counts = call.counts()
            spent = usage_tokens(**counts)
            usage = Usage(
                session=held,
                frame=frame,
                model=call.model or held.model,
                message_id=call.message_id,
                started_at=call.started_at,
                latency_ms=call.latency_ms,
                **counts,
            )
            created.append(usage)
            answers.append(usage)
            if call.message_id:
                first[call.message_id] = usage
            for name, total in USAGE_TOTALS.items():
                charged[total] += counts[name]
            pending.append((usage, EventSpec("usage.recorded", frame)))
            if frame is None:
                continue
            frame.budget_used += spent
            spent_by_frame[frame.pk] = spent_by_frame.get(frame.pk, 0) + spent
            frame.last_occupancy_tokens = usage.occupancy_tokens
            utilization = utilization_of(frame.last_occupancy_tokens, held.context_window_tokens)
            frame.pressure_level = level_next(frame.pressure_level, utilization)
            if getattr(frame, "top_id", None) == frame.pk:
                pending += [(None, spec) for spec in _gauge_moved(held, frame, utilization)]
        for usage in answers:
            if usage.frame_id in frames:
                usage.frame = frames[usage.frame_id]  # as it stands now, read after the lock
        if not created:
            return answers
        Usage.objects.bulk_create(created, batch_size=500)
        base = held.last_event_seq
        events = []
        for offset, (record, spec) in enumerate(pending, start=1):
            events.append(
                Event(
                    session=held,
                    seq=base + offset,
                    type=spec.type,
                    frame_id=spec.frame.pk if spec.frame is not None else None,
                    actor=actor if record is not None else "",
                    payload=spec.payload if record is None else _usage_recorded(record),
                )
            )
        Event.objects.bulk_create(events, batch_size=500)
        for frame_pk, spent in spent_by_frame.items():
            frame = frames[frame_pk]
            Frame.objects.filter(pk=frame_pk).update(
                budget_used=F("budget_used") + spent,
                last_occupancy_tokens=frame.last_occupancy_tokens,
                pressure_level=frame.pressure_level,
            )
        moved: dict[str, Any] = {"pressure_level": held.pressure_level}
        if held.lifecycle_state != lifecycle_before:
            moved["lifecycle_state"] = held.lifecycle_state
        Session.objects.filter(pk=session.pk).update(
            **{name: F(name) + value for name, value in charged.items()},
            api_calls_total=F("api_calls_total") + len(created),
            last_event_seq=F("last_event_seq") + len(events),
            **moved,
        )
        for name, value in charged.items():
            setattr(session, name, getattr(held, name) + value)
        session.api_calls_total = held.api_calls_total + len(created)
        session.last_event_seq = base + len(events)
        session.updated_at = now
        for name, value in moved.items():
            setattr(session, name, value)
    return answers


def _gauge_moved(session: Session, frame: Frame, utilization: float) -> list[EventSpec]:
    """``_session_gauge_follow`` on a session held in memory: ``session`` takes the level
    of ``frame`` (the top of its stack) and its lifecycle follows; returns the
    ``pressure.changed`` event to append, if any."""
    level = frame.pressure_level
    events = []
    if session.pressure_level != level:
        events.append(
            EventSpec(
                "pressure.changed",
                frame,
                {"from": session.pressure_level, "to": level, "utilization": round(utilization, 4)},
            )
        )
        session.pressure_level = level
    if session.lifecycle_state in (Session.Lifecycle.ACTIVE, Session.Lifecycle.ACTIVE_PRESSURE):
        session.lifecycle_state = (
            Session.Lifecycle.ACTIVE_PRESSURE if level == CRITICAL else Session.Lifecycle.ACTIVE
        )
    return events


def _usage_recorded(usage: Usage) -> dict[str, Any]:
    """The payload of ``usage``'s ``usage.recorded`` event."""
    counts = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
    }
    return {
        **counts,
        "tokens": usage_tokens(**counts),
        "model": usage.model,
        "usage_id": usage.pk,
        **({"started_at": usage.started_at.isoformat()} if usage.started_at else {}),
        **({"latency_ms": usage.latency_ms} if usage.latency_ms is not None else {}),
    }


_SESSION_TOTALS = (
    ("input_tokens_total", "input_tokens"),
    ("output_tokens_total", "output_tokens"),
    ("cache_creation_tokens_total", "cache_creation_input_tokens"),
    ("cache_read_tokens_total", "cache_read_input_tokens"),
)


@functools.cache
def _usage_charge_sql(by_session: bool, scoped: bool, replay: bool) -> tuple[str, str]:
    """PostgreSQL: the charge of one call to its session's totals (the statement that takes
    the session's lock) and the read after it (the frame with its session, the top of the
    stack and, with ``replay``, the session's record of the same message), written once
    per process: what ``usage_record`` asks the ORM for elsewhere, without compiling it on
    every call."""
    qn = connection.ops.quote_name
    session_table, frame_table = qn(Session._meta.db_table), qn(Frame._meta.db_table)
    sets = ", ".join(f"{qn(total)} = {qn(total)} + %s" for total, _ in _SESSION_TOTALS)
    charge = (
        f'UPDATE {session_table} SET {sets}, "api_calls_total" = "api_calls_total" + 1,'
        ' "last_event_seq" = "last_event_seq" + 1, "updated_at" = %s'
        ' WHERE "lifecycle_state" <> %s AND "id" = '
    )
    if by_session:
        charge += "%s"
    else:
        charge += f'(SELECT "session_id" FROM {frame_table} WHERE "id" = %s' + (
            ' AND "organization_id" = %s)' if scoped else ")"
        )

    def top(status: str) -> str:
        return (
            f'(SELECT t."id" FROM {frame_table} t WHERE t."session_id" = f."session_id"'
            f' AND t."status" {status} ORDER BY {stack_order_sql("t")} LIMIT 1)'
        )

    replayed = (
        f'(SELECT u."id" FROM {qn(Usage._meta.db_table)} u WHERE u."session_id" = f."session_id"'
        ' AND u."message_id" = %s ORDER BY u."created_at", u."id" LIMIT 1)'
        if replay
        else "NULL"
    )
    read = (
        f"SELECT {columns(Frame, 'f')}, {columns(Session, 's')},"
        f" COALESCE({top('= %s')}, {top('= ANY(%s)')}), {replayed}"
        f' FROM {frame_table} f JOIN {session_table} s ON s."id" = f."session_id"'
        ' WHERE f."id" = %s' + (' AND f."organization_id" = %s' if scoped else "")
    )
    return charge, read


def _usage_charge_and_read(
    counts: dict[str, int],
    *,
    session_pk: Any,
    frame_pk: uuid.UUID,
    organization: Any,
    message_id: str,
) -> tuple[int, Frame | None]:
    """PostgreSQL: charge one call (``counts``) to the session's totals, then read the frame
    (``frame_pk``, in ``organization`` when given) with its session, ``top_id`` and
    ``replayed_id`` annotated; return how many sessions the charge matched (0: ended, or
    no such frame) and the frame (None when there is none)."""
    charge, read = _usage_charge_sql(
        session_pk is not None, organization is not None, bool(message_id)
    )
    scope = [organization.pk] if organization is not None else []
    params: list[Any] = [counts[name] for _, name in _SESSION_TOTALS]
    params += [timezone.now(), Session.Lifecycle.ENDED]
    params += [session_pk] if session_pk is not None else [frame_pk, *scope]
    read_params: list[Any] = [Frame.Status.ACTIVE, list(Frame.OPEN_STATUSES)]
    read_params += [message_id] if message_id else []
    read_params += [frame_pk, *scope]
    with connection.cursor() as cursor:
        cursor.execute(charge, params)
        charged = cursor.rowcount
        cursor.execute(read, read_params)
        row = cursor.fetchone()
    if row is None:
        return charged, None
    *row, top_id, replayed_id = row
    frame_end = len(Frame._meta.concrete_fields)
    frame, session = from_row(Frame, row[:frame_end]), from_row(Session, row[frame_end:])
    vars(frame).update(top_id=top_id, replayed_id=replayed_id)
    frame.session = session
    if organization is not None:
        session.organization = frame.organization = organization
    return charged, frame


def _usage_charge_in_one_statement(usage: Usage, event: Event, *, spent: int) -> None:
    """PostgreSQL: store ``usage``, charge its frame (``spent`` more used, the occupancy and
    pressure level already set on ``usage.frame``) and append ``event`` with the record's id
    in its payload, as one statement (data-modifying WITHs): one round trip instead of
    three, and no ORM compilation on the hottest write."""
    assert usage.frame is not None
    qn = connection.ops.quote_name
    usage_columns = [
        "session_id",
        "frame_id",
        "model",
        "message_id",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "started_at",
        "latency_ms",
        "created_at",
    ]
    usage.created_at = event.created_at = timezone.now()
    sql = (
        f"WITH stored AS (INSERT INTO {qn(Usage._meta.db_table)}"
        f" ({', '.join(qn(c) for c in usage_columns)})"
        f" VALUES ({', '.join(['%s'] * len(usage_columns))}) RETURNING id),"
        f" charged AS (UPDATE {qn(Frame._meta.db_table)} SET"
        ' "budget_used" = "budget_used" + %s, "last_occupancy_tokens" = %s,'
        ' "pressure_level" = %s WHERE "id" = %s)'
        f" INSERT INTO {qn(Event._meta.db_table)}"
        ' ("session_id", "seq", "type", "frame_id", "actor", "payload", "created_at")'
        " SELECT %s, %s, %s, %s, %s, %s::jsonb || jsonb_build_object('usage_id', stored.id), %s"
        " FROM stored RETURNING (payload->>'usage_id')::bigint, id"
    )
    frame = usage.frame
    params = [getattr(usage, column) for column in usage_columns]
    params += [spent, frame.last_occupancy_tokens, frame.pressure_level, frame.pk]
    params += [
        event.session_id,
        event.seq,
        event.type,
        event.frame_id,
        event.actor,
        json.dumps(event.payload),
        event.created_at,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        usage.pk, event.pk = cursor.fetchone()
    event.payload["usage_id"] = usage.pk
    for stored in (usage, event):
        stored._state.adding, stored._state.db = False, connection.alias


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


def handle_add(
    *,
    frame: Frame,
    kind: str,
    priority: str = ContextHandle.Priority.MEDIUM,
    content: str = "",
    ref: str = "",
    category: str = "",
    tool_call_id: str = "",
    estimated_tokens: int | None = None,
    state: str = ContextHandle.State.LOADED,
    actor: str = "",
) -> ContextHandle:
    """Add an item to a frame's context; its token count is computed here, once.

    A reference without content is counted from ``estimated_tokens`` when given.
    ``state`` is ``loaded`` (in the window) or ``cold`` (discovered: registered, not
    loaded; it costs the window nothing until it is paged in); Invalid otherwise.
    """
    if state not in (ContextHandle.State.LOADED, ContextHandle.State.COLD):
        raise Invalid("A new handle is loaded or cold.", field="state")
    tokens = count_tokens(content) if content else (estimated_tokens or 0)
    # Embedded once, here, before the locks are taken (ContextHandle.embedding_text).
    embedding = vector_for_storage(content or ref)
    with transaction.atomic():
        session, frame = _open_frame_lock(frame, action="add a handle to")
        handle = ContextHandle.objects.create(
            frame=frame,
            session=session,
            kind=kind,
            priority=priority,
            category=category,
            content=content,
            ref=ref,
            tool_call_id=tool_call_id,
            estimated_tokens=tokens,
            state=state,
            embedding=embedding,
        )
        event_append(
            session=session,
            type="frame.handle_added",
            frame=frame,
            actor=actor,
            payload={
                "handle_id": str(handle.pk),
                "kind": kind,
                "priority": priority,
                "tokens": tokens,
                "state": state,
            },
        )
    return handle


def suspension_expire_locked(
    *,
    session: Session,
    suspension: Suspension,
    frame_id,
    actor: str,
    now: datetime,
    frame_closed: bool = False,
) -> bool:
    """Mark an open suspension expired with a conditional UPDATE and log it; True if this
    call was the one that did. It must be overdue, or (``frame_closed``) its frame must
    no longer be suspended, e.g. cancelled when the session ended."""
    rows = Suspension.objects.filter(pk=suspension.pk, status__in=Suspension.OPEN_STATUSES)
    if frame_closed:
        rows = rows.exclude(frame__status=Frame.Status.SUSPENDED)
    else:
        rows = rows.filter(expires_at__lte=now)
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
            frame=Frame.objects.only("pk").get(pk=frame_id),
            actor=actor,
            payload=payload,
        )
    return bool(changed)


# Expiry fails the frame (seed 000 §3): shared by the periodic job, every read of a
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
        frame_id=suspension.frame_id,
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


def cancel_open_descendants(
    frame: Frame, *, actor: str, note: str, result: dict, user: User | None = None
) -> None:
    """Cancel the frame's open descendants, deepest first, rejecting their own open
    suspensions with ``note``; inside the caller's transaction."""
    for child in _open_descendants(frame):
        if child.status == Frame.Status.SUSPENDED:
            Suspension.objects.filter(frame=child, status__in=Suspension.OPEN_STATUSES).update(
                status=Suspension.Status.REJECTED,
                decided_by=user,
                decided_at=timezone.now(),
                decision_note=note,
            )
            frame_status_set(
                frame=child,
                status=Frame.Status.ACTIVE,
                event_type="frame.updated",
                actor=actor,
                payload={"reason": "ancestor rejected" if user else "ancestor expired"},
            )
        frame_pop(frame=child, status=Frame.Status.CANCELLED, result_refs=[result], actor=actor)


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
            frame_id=suspension.frame_id,
            actor=actor,
            now=now,
            frame_closed=True,
        )
    return expired


def pressure_update(*, session: Session, frame: Frame) -> str:
    """Move ``frame``'s pressure level to the next one for its latest occupancy; return it.

    Call it inside the transaction that recorded the usage (the session row locked).
    The level steps from the stored ``Frame.pressure_level`` with hysteresis. When
    ``frame`` is the top of the session's stack, the session's level (the gauge)
    follows it, the session enters ``active_pressure`` at CRITICAL and returns to
    ``active`` below it, and a ``pressure.changed`` event is appended on a change.
    """
    utilization = utilization_of(frame.last_occupancy_tokens, session.context_window_tokens)
    new_level = level_next(frame.pressure_level, utilization)
    if new_level != frame.pressure_level:
        Frame.objects.filter(pk=frame.pk).update(pressure_level=new_level)
        frame.pressure_level = new_level
    top = top_frame(session)
    if top is None or top.pk != frame.pk:
        return new_level
    _session_gauge_follow(session, frame, new_level, utilization)
    return new_level


def _session_gauge_follow(session: Session, frame: Frame, level: str, utilization: float) -> None:
    """The session's gauge follows the top of its stack (``frame``, now at ``level``): its
    level, ``active_pressure`` at CRITICAL and ``active`` below, ``pressure.changed`` on a
    change. Nothing is written when nothing moves."""
    updates: dict = {}
    if session.pressure_level != level:
        updates["pressure_level"] = level
    lifecycle = session.lifecycle_state
    if lifecycle in (Session.Lifecycle.ACTIVE, Session.Lifecycle.ACTIVE_PRESSURE):
        wanted = (
            Session.Lifecycle.ACTIVE_PRESSURE if level == CRITICAL else Session.Lifecycle.ACTIVE
        )
        if wanted != lifecycle:
            updates["lifecycle_state"] = wanted
    if not updates:
        return
    previous = session.pressure_level
    events = []
    if "pressure_level" in updates:
        events.append(
            EventSpec(
                "pressure.changed",
                frame,
                {"from": previous, "to": level, "utilization": round(utilization, 4)},
            )
        )
    events_append(session=session, events=events, **updates)
