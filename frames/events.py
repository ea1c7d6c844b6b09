"""Appending to the event log: the one place that hands out sequence numbers."""

from typing import Any

from django.db.models import F

from .models import Event, Frame, Session


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
    from an atomic increment of ``Session.last_event_seq``, so two writers in one
    session serialize on the session row and never share a number.
    """
    Session.objects.filter(pk=session.pk).update(last_event_seq=F("last_event_seq") + 1)
    seq = Session.objects.filter(pk=session.pk).values_list("last_event_seq", flat=True).get()
    session.last_event_seq = seq
    return Event.objects.create(
        session=session,
        seq=seq,
        type=type,
        frame_id=frame.pk if frame is not None else None,
        actor=actor,
        payload=payload or {},
    )
