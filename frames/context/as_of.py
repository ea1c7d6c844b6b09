"""A session as it stood right after one of its events: what a context pack replayed at
``as_of_seq`` reads instead of the current state.

The event log is the time-travel state: frames (status) are replayed from it
(``frames.projections.replay``); a handle exists once its ``frame.handle_added`` event is
in (or, without one, once it was created), and its resource state is the one before its
first later state event; a summary written by a later page-out was not there yet. Facts
are not session events: the ones valid at the event's time are read (``facts_for_context``
with ``as_of``). The working set holds items last written by then.
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contextops.errors import Invalid
from frames.models import Event, Frame, Session
from frames.projections import replay

HANDLE_STATE_EVENTS = ("handle.state_changed", "handle.paged_out", "handle.paged_in")


@dataclass(frozen=True)
class AsOf:
    """The session after event ``seq`` (at ``moment``)."""

    seq: int
    moment: datetime
    frame_status: dict[str, str] = field(default_factory=dict)
    frames_pushed_at: dict[str, int] = field(default_factory=dict)  # frame id -> push seq
    handles_added_after: frozenset[str] = frozenset()
    handle_states: dict[str, str] = field(default_factory=dict)  # handles whose state moved since
    summaries_after: frozenset[str] = frozenset()  # handles paged out (summarized) since

    def frame_existed(self, frame: Frame) -> bool:
        return str(frame.pk) in self.frame_status

    def status_of(self, frame: Frame) -> str:
        return self.frame_status.get(str(frame.pk), frame.status)

    def handle_visible(self, handle_id: str, created_at: datetime) -> bool:
        return handle_id not in self.handles_added_after and created_at <= self.moment

    def top_frame(self, frames: list[Frame]) -> Frame | None:
        """The top of the stack then: the deepest, newest active frame, else open one."""
        existing = [f for f in frames if self.frame_existed(f)]
        for wanted in (("active",), ("active", "waiting", "suspended")):
            open_then = [f for f in existing if self.status_of(f) in wanted]
            if open_then:
                return max(
                    open_then, key=lambda f: (f.depth, self.frames_pushed_at.get(str(f.pk), 0))
                )
        return None


def as_of_read(*, session: Session, seq: int) -> AsOf:
    """The session after event ``seq``; Invalid(field="as_of_seq") for an event it has not."""
    named = Event.objects.filter(session=session, seq=seq).only("created_at").first()
    if seq < 1 or named is None:
        raise Invalid(
            f"as_of_seq must name one of the session's events (1 to {session.last_event_seq}).",
            field="as_of_seq",
        )
    events = list(Event.objects.filter(session=session, seq__lte=seq).order_by("seq"))
    state = replay(events)
    pushed = {str(e.frame_id): e.seq for e in events if e.type == "frame.pushed" and e.frame_id}
    later = Event.objects.filter(
        session=session,
        seq__gt=seq,
        type__in=("frame.handle_added", *HANDLE_STATE_EVENTS),
    ).order_by("seq")
    added_after: set[str] = set()
    states: dict[str, str] = {}
    summaries: set[str] = set()
    for event in later.only("type", "payload"):
        payload: dict[str, Any] = event.payload or {}
        handle_id = str(payload.get("handle_id", ""))
        if event.type == "frame.handle_added":
            added_after.add(handle_id)
            continue
        if handle_id not in states and payload.get("from"):
            states[handle_id] = str(payload["from"])
        if event.type == "handle.paged_out":
            summaries.add(handle_id)
    return AsOf(
        seq=seq,
        moment=named.created_at,
        frame_status={k: v["status"] for k, v in state.frames.items()},
        frames_pushed_at=pushed,
        handles_added_after=frozenset(added_after),
        handle_states=states,
        summaries_after=frozenset(summaries),
    )
