"""Writes of pressure: a frame's level moves with hysteresis for its latest occupancy, and
the session's gauge (its level and ``active_pressure`` lifecycle) follows the top of its
stack. The rules themselves are in ``frames.pressure``."""

from ..events import EventSpec, events_append
from ..models import Frame, Session
from ..pressure import CRITICAL, level_next, utilization_of
from ..selectors import top_frame


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
    session_gauge_follow(session, frame, new_level, utilization)
    return new_level


def session_gauge_follow(session: Session, frame: Frame, level: str, utilization: float) -> None:
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


def gauge_moved(session: Session, frame: Frame, utilization: float) -> list[EventSpec]:
    """``session_gauge_follow`` on a session held in memory: ``session`` takes the level
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
