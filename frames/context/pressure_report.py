"""The window-pressure report of a session (docs/concepts.md#pressure): the pressure at the top of
its stack and the handles its eviction policy would evict first. The API's
``GET /sessions/{id}/pressure`` and the dashboard's gauge both read it here.
"""

from dataclasses import dataclass

from frames.models import Frame, Session
from frames.pressure import Pressure
from frames.selectors import pressure_of, top_frame

from .eviction import Candidate, eviction_candidates


@dataclass(frozen=True)
class PressureReport:
    frame: Frame | None  # the top of the stack, whose latest call the pressure measures
    pressure: Pressure
    candidates: list[Candidate]  # first to evict first; none without a frame


def pressure_report(*, session: Session, candidates: int = 10) -> PressureReport:
    """The session's pressure report with at most ``candidates`` eviction candidates."""
    frame = top_frame(session)
    return PressureReport(
        frame=frame,
        pressure=pressure_of(session, frame),
        candidates=(
            eviction_candidates(session=session, frame=frame, limit=candidates)
            if frame is not None
            else []
        ),
    )
