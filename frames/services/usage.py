"""Writes of model-call usage: one call (``usage_record``) or many in one transaction
(``usage_record_many``), each charged to its frame's budget and the session's totals,
moving the frame's pressure level and the session's gauge. The PostgreSQL statements of
the single-call path are in ``frames.services.usage_sql``."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from contextops.errors import Invalid, NotFound
from contextops.ids import parse_id

from ..budget import USAGE_TOTALS, token_counts, usage_tokens
from ..events import EventSpec
from ..locks import session_require_not_ended
from ..models import Event, Frame, Session, Usage
from ..pressure import level_next, utilization_of
from ..selectors import top_frame_id_of
from .pressure import gauge_moved, session_gauge_follow
from .stack import frame_require_open
from .usage_sql import usage_charge_and_read, usage_charge_in_one_statement


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
    counts = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
    }
    with transaction.atomic():
        charge = _usage_charge(
            counts,
            session=session,
            frame_pk=frame_pk,
            organization=organization,
            message_id=message_id,
        )
        if message_id and charge.replayed is not None:
            return _usage_replayed(charge, counts)
        session, frame = charge.session, charge.frame
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
        _usage_store(session, frame, usage, event, spent=usage_tokens(**counts))
    return usage


def _session_totals(counts: dict[str, int], sign: int) -> dict[str, Any]:
    """The change one call (``counts``) makes to its session's running totals, with the
    number of its ``usage.recorded`` event: ``sign`` +1 charges it, -1 takes it back."""
    return {
        "input_tokens_total": F("input_tokens_total") + sign * counts["input_tokens"],
        "output_tokens_total": F("output_tokens_total") + sign * counts["output_tokens"],
        "cache_creation_tokens_total": F("cache_creation_tokens_total")
        + sign * counts["cache_creation_input_tokens"],
        "cache_read_tokens_total": F("cache_read_tokens_total")
        + sign * counts["cache_read_input_tokens"],
        "api_calls_total": F("api_calls_total") + sign,
        "last_event_seq": F("last_event_seq") + sign,  # the usage.recorded event
    }


@dataclass(frozen=True)
class _Charge:
    """What ``_usage_charge`` found: how many sessions the charge matched (0: an ended
    session), the session and the frame (None: a session's own call) read after it, and
    the id of the session's earlier record of the same message, if there is one."""

    rows: int
    session: Session
    frame: Frame | None
    replayed: Any


def _usage_charge(
    counts: dict[str, int],
    *,
    session: Session | None,
    frame_pk: Any,
    organization: Any,
    message_id: str,
) -> _Charge:
    """Charge one call to its session's totals, then read what the write needs.

    The charge, with the number of the call's ``usage.recorded`` event, is the statement
    that takes the session's lock: one write, no read before it. The reads come after the
    lock, so what they see (a replayed message, the top of the stack) stays true until
    the commit. NotFound when the frame is not there (the charge matched no session),
    Invalid when it belongs to another session than ``session``."""
    if frame_pk is None:
        assert session is not None
        rows = (
            Session.objects.filter(pk=session.pk)
            .exclude(lifecycle_state=Session.Lifecycle.ENDED)
            .update(**_session_totals(counts, +1), updated_at=timezone.now())
        )
        replayed_id = Subquery(
            Usage.objects.filter(session_id=session.pk, message_id=message_id).values("pk")[:1]
        )
        session = Session.objects.annotate(replayed_id=replayed_id).get(pk=session.pk)
        return _Charge(rows, session, None, getattr(session, "replayed_id", None))
    if connection.vendor == "postgresql":
        rows, frame = usage_charge_and_read(
            counts,
            session_pk=session.pk if session is not None else None,
            frame_pk=frame_pk,
            organization=organization,
            message_id=message_id,
        )
    else:
        rows, frame = _usage_charge_and_read_orm(
            counts,
            session=session,
            frame_pk=frame_pk,
            organization=organization,
            message_id=message_id,
        )
    if frame is None:
        raise NotFound("No such frame.")  # the charge matched no session
    if session is not None and frame.session_id != session.pk:
        raise Invalid("The frame belongs to another session.", field="frame_id")
    return _Charge(rows, frame.session, frame, getattr(frame, "replayed_id", None))


def _usage_charge_and_read_orm(
    counts: dict[str, int],
    *,
    session: Session | None,
    frame_pk: Any,
    organization: Any,
    message_id: str,
) -> tuple[int, Frame | None]:
    """``usage_charge_and_read`` through the ORM (every database but PostgreSQL): charge
    the session of ``frame_pk`` (``session`` when given), then read the frame with its
    session, ``top_id`` and ``replayed_id`` annotated; None when there is no such frame."""
    frames = Frame.objects.all()
    if organization is not None:
        frames = frames.filter(organization=organization)
    if session is not None:
        sessions = Session.objects.filter(pk=session.pk)
    else:
        sessions = Session.objects.filter(
            pk=Subquery(frames.filter(pk=frame_pk).values("session_id"))
        )
    rows = sessions.exclude(lifecycle_state=Session.Lifecycle.ENDED).update(
        **_session_totals(counts, +1), updated_at=timezone.now()
    )
    read: dict[str, Any] = {"top_id": top_frame_id_of("session_id")}
    if message_id:  # a record without one is never a replay: nothing to look for
        read["replayed_id"] = Subquery(
            Usage.objects.filter(session_id=OuterRef("session_id"), message_id=message_id).values(
                "pk"
            )[:1]
        )
    try:
        return rows, frames.select_related("session").annotate(**read).get(pk=frame_pk)
    except Frame.DoesNotExist:
        return rows, None


def _usage_replayed(charge: _Charge, counts: dict[str, int]) -> Usage:
    """A retry of a record whose answer was lost (even once the frame or the session has
    closed): the call is charged already, so the charge just made goes. Returns the first
    record, its frame as it stands now (read after the lock)."""
    if charge.rows:
        Session.objects.filter(pk=charge.session.pk).update(**_session_totals(counts, -1))
    usage = Usage.objects.get(pk=charge.replayed)
    if charge.frame is not None and usage.frame_id == charge.frame.pk:
        usage.frame = charge.frame
    return usage


def _usage_store(
    session: Session, frame: Frame | None, usage: Usage, event: Event, *, spent: int
) -> None:
    """Store ``usage`` and ``event`` (its payload given the record's id) and charge
    ``frame``, when there is one: ``spent`` more used, this call's occupancy, its pressure
    level moved with hysteresis, and the session's gauge following when ``frame`` is the
    top of its stack (``top_id``, read after the lock)."""
    if frame is None:
        usage.save(force_insert=True)
        event.payload["usage_id"] = usage.pk
        event.save(force_insert=True)
        return
    frame.budget_used += spent
    frame.last_occupancy_tokens = usage.occupancy_tokens
    utilization = utilization_of(frame.last_occupancy_tokens, session.context_window_tokens)
    level = level_next(frame.pressure_level, utilization)
    frame.pressure_level = level
    if connection.vendor == "postgresql":
        usage_charge_in_one_statement(usage, event, spent=spent)
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
        session_gauge_follow(session, frame, level, utilization)


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
        return token_counts(self)


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
        held, frames, first = _usage_many_read(session, calls, now=now)
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
            spent_by_frame[frame.pk] = spent_by_frame.get(frame.pk, 0) + spent
            pending += [(None, spec) for spec in _frame_charged(held, frame, usage, spent=spent)]
        for usage in answers:
            if usage.frame_id in frames:
                usage.frame = frames[usage.frame_id]  # as it stands now, read after the lock
        if not created:
            return answers
        _usage_many_write(
            session,
            held,
            frames,
            created,
            pending,
            charged,
            spent_by_frame,
            lifecycle_before=lifecycle_before,
            actor=actor,
            now=now,
        )
    return answers


def _frame_charged(held: Session, frame: Frame, usage: Usage, *, spent: int) -> list[EventSpec]:
    """``frame`` charged in memory with one call of ``usage_record_many``: ``spent`` more
    used, the call's occupancy, its pressure level moved with hysteresis. Returns the
    ``pressure.changed`` event of ``held``'s gauge to append, when ``frame`` is the top of
    its stack and the level moved."""
    frame.budget_used += spent
    frame.last_occupancy_tokens = usage.occupancy_tokens
    utilization = utilization_of(frame.last_occupancy_tokens, held.context_window_tokens)
    frame.pressure_level = level_next(frame.pressure_level, utilization)
    if getattr(frame, "top_id", None) == frame.pk:
        return gauge_moved(held, frame, utilization)
    return []


def _usage_many_read(
    session: Session, calls: Sequence[UsageCall], *, now: Any
) -> tuple[Session, dict[Any, Frame], dict[str, Usage]]:
    """Take the lock ``usage_record``'s charge takes (an ended session is not written),
    then read the session as held, the calls' frames (``top_id`` annotated) and the
    records already stored under the calls' message ids, by message id."""
    Session.objects.filter(pk=session.pk).exclude(lifecycle_state=Session.Lifecycle.ENDED).update(
        updated_at=now
    )
    held = Session.objects.get(pk=session.pk)
    frame_ids = {call.frame.pk for call in calls if call.frame is not None}
    frames: dict[Any, Frame] = {
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
    return held, frames, first


def _usage_many_write(
    session: Session,
    held: Session,
    frames: dict[Any, Frame],
    created: list[Usage],
    pending: list[tuple[Usage | None, EventSpec]],
    charged: dict[str, int],
    spent_by_frame: dict[Any, int],
    *,
    lifecycle_before: str,
    actor: str,
    now: Any,
) -> None:
    """``usage_record_many``'s writes, a table at a time: the usage rows, the events in
    order (numbered after ``held``'s last), one UPDATE per charged frame and one of the
    session's totals, pressure and lifecycle; ``session`` leaves as stored."""
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
