"""Appending to the event log: the one place that hands out sequence numbers."""

from dataclasses import dataclass, field
from typing import Any

from django.db.models import F

from .models import Event, Frame, Session


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


def events_append(
    *, session: Session, events: list[EventSpec], actor: str = "", **session_updates: Any
) -> list[Event]:
    """Append ``events`` to ``session``'s log in order and return them; two queries.

    Call it inside the transaction that makes the change, the session locked. Fields in
    ``session_updates`` (``updated_at``, a lifecycle move) are stored on the session row
    by the same UPDATE that hands out the sequence numbers.
    """
    if not events:
        if session_updates:
            Session.objects.filter(pk=session.pk).update(**session_updates)
            for name, value in session_updates.items():
                setattr(session, name, value)
        return []
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
