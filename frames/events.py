"""Appending to the event log: the one place that hands out sequence numbers."""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connection
from django.db.models import F, Model, Q
from django.db.models import Field as DbField
from django.db.models.sql import UpdateQuery
from django.utils import timezone

from .models import ContextHandle, Event, Frame, Session


@dataclass(frozen=True)
class EventSpec:
    """One event a write appends (``events_append`` numbers them in order)."""

    type: str
    frame: Frame | None = None
    payload: dict[str, Any] = field(default_factory=dict)


def _seq_advance(session: Session, count: int, updates: dict[str, Any]) -> int:
    """Move ``session.last_event_seq`` on by ``count`` (storing ``updates`` with it); return
    the first number handed out.

    The caller holds the session row (its lock, or a write to it earlier in the
    transaction), so the number in memory is normally current and one conditional UPDATE
    does it. A copy loaded before another write of the session moved the log on changes
    no row; then the numbers come from an atomic increment read back, as before.
    """
    expected = session.last_event_seq
    moved = Session.objects.filter(pk=session.pk, last_event_seq=expected).update(
        last_event_seq=expected + count, **updates
    )
    if not moved:
        Session.objects.filter(pk=session.pk).update(
            last_event_seq=F("last_event_seq") + count, **updates
        )
        expected = (
            Session.objects.filter(pk=session.pk).values_list("last_event_seq", flat=True).get()
            - count
        )
    session.last_event_seq = expected + count
    for name, value in updates.items():
        setattr(session, name, value)
    return expected + 1


@dataclass(frozen=True)
class RowChange:
    """An UPDATE of one row (``model``'s, by primary key) that a write stores with its events."""

    model: type[Model]
    pk: Any
    values: dict[str, Any]

    def apply(self) -> None:
        self.model._default_manager.filter(pk=self.pk).update(**self.values)

    def sql(self) -> tuple[str, tuple]:
        query = UpdateQuery(self.model)
        query.add_update_values(self.values)
        query.add_q(Q(pk=self.pk))
        return query.get_compiler(connection.alias).as_sql()


def events_append(
    *,
    session: Session,
    events: list[EventSpec],
    actor: str = "",
    changes: Sequence[RowChange] = (),
    **session_updates: Any,
) -> list[Event]:
    """Append ``events`` to ``session``'s log in order and return them; one query on
    PostgreSQL, two elsewhere (and one more a row in ``changes``).

    Call it inside the transaction that makes the change, the session locked. Fields in
    ``session_updates`` (``updated_at``, a lifecycle move) are stored on the session row
    by the same UPDATE that hands out the sequence numbers; ``changes`` (the rows the
    write moves) by the same statement on PostgreSQL, before the events elsewhere.
    """
    if not events:
        for change in changes:
            change.apply()
        if session_updates:
            Session.objects.filter(pk=session.pk).update(**session_updates)
            for name, value in session_updates.items():
                setattr(session, name, value)
        return []
    if connection.vendor == "postgresql":
        appended = _append_in_one_statement(session, events, actor, session_updates, changes)
        if appended is not None:
            return appended
    for change in changes:
        change.apply()
    first = _seq_advance(session, len(events), session_updates)
    return Event.objects.bulk_create(
        [
            Event(
                session=session,
                seq=first + offset,
                type=spec.type,
                frame_id=spec.frame.pk if spec.frame is not None else None,
                actor=actor,
                payload=spec.payload,
            )
            for offset, spec in enumerate(events)
        ]
    )


def _append_in_one_statement(
    session: Session,
    events: list[EventSpec],
    actor: str,
    updates: dict[str, Any],
    changes: Sequence[RowChange],
) -> list[Event] | None:
    """PostgreSQL: ``_seq_advance``'s conditional UPDATE, the ``changes`` and the events'
    INSERT as one statement (the UPDATEs in WITHs, each change and the INSERT taking the
    session's row); one round trip and no ORM compilation of the log's statements
    instead of two of each and one a change. None, with nothing written, when the copy
    of the session in memory is stale: the caller then takes the statement-a-step way.
    """
    qn = connection.ops.quote_name
    expected, count = session.last_event_seq, len(events)
    meta = Session._meta
    assignments, params = [], []
    for name, value in {"last_event_seq": expected + count, **updates}.items():
        column = cast(DbField, meta.get_field(name))  # the session's own columns
        assignments.append(f"{qn(column.column or name)} = %s")
        params.append(column.get_db_prep_save(value, connection))
    now = timezone.now()
    payloads = [spec.payload for spec in events]
    frame_ids = [str(spec.frame.pk) if spec.frame is not None else None for spec in events]
    moved = (
        f"WITH moved AS (UPDATE {qn(meta.db_table)} SET {', '.join(assignments)}"
        ' WHERE "id" = %s AND "last_event_seq" = %s RETURNING "id")'
    )
    params += [session.pk, expected]
    for number, change in enumerate(changes):
        change_sql, change_params = change.sql()  # "UPDATE ... WHERE <pk> = %s"
        moved += f", change_{number} AS ({change_sql} AND EXISTS (SELECT 1 FROM moved))"
        params += change_params
    sql = (
        f"{moved} INSERT INTO {qn(Event._meta.db_table)}"
        ' ("session_id", "seq", "type", "frame_id", "actor", "payload", "created_at")'
        " SELECT moved.id, e.seq, e.type, e.frame_id, %s, e.payload::jsonb, %s"
        " FROM moved, unnest(%s::bigint[], %s::text[], %s::uuid[], %s::text[])"
        " AS e(seq, type, frame_id, payload) ORDER BY e.seq RETURNING id, seq"
    )
    params += [
        actor,
        now,
        list(range(expected + 1, expected + count + 1)),
        [spec.type for spec in events],
        frame_ids,
        [json.dumps(payload) for payload in payloads],
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids = dict((number, pk_value) for pk_value, number in cursor.fetchall())
    if not ids:
        return None
    session.last_event_seq = expected + count
    for name, value in updates.items():
        setattr(session, name, value)
    appended = []
    for offset, spec in enumerate(events):
        event = Event(
            id=ids[expected + 1 + offset],
            session=session,
            seq=expected + 1 + offset,
            type=spec.type,
            frame_id=spec.frame.pk if spec.frame is not None else None,
            actor=actor,
            payload=spec.payload,
            created_at=now,
        )
        event._state.adding, event._state.db = False, connection.alias
        appended.append(event)
    return appended


def event_append(
    *,
    session: Session,
    type: str,
    frame: Frame | None = None,
    actor: str = "",
    payload: dict[str, Any] | None = None,
) -> Event:
    """Append one event to ``session``'s log and return it.

    Call it inside the transaction that makes the change. The sequence number comes
    from the session row, which the caller holds, so two writers in one session
    serialize on it and never share a number.
    """
    seq = _seq_advance(session, 1, {})
    return Event.objects.create(
        session=session,
        seq=seq,
        type=type,
        frame_id=frame.pk if frame is not None else None,
        actor=actor,
        payload=payload or {},
    )


def handle_event_append(
    session: Session, handle: ContextHandle, type: str, actor: str, payload: dict[str, Any]
) -> Event:
    """``event_append`` of an event about ``handle``: in the handle's frame, the handle's
    id first in the payload, then ``payload``."""
    return event_append(
        session=session,
        type=type,
        frame=Frame(pk=handle.frame_id),
        actor=actor,
        payload={"handle_id": str(handle.pk), **payload},
    )
