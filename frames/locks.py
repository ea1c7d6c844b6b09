"""The session lock: the one way a write of a session begins.

Every write of a session (frames, usage, handles, facts of its working set, turns, RLM
states) locks the session row first, then the rows it changes, parents before children.
One session's writes therefore serialize on its row, which keeps budget arithmetic exact
when many agents write at once and never deadlocks (one order everywhere); on SQLite the
IMMEDIATE transaction mode gives the same guarantee for the whole database.
"""

from typing import Any

from contextops.errors import Conflict

from .models import Frame, Session

SESSION_ENDED_DETAIL = "This session has ended; start a new one."


def session_require_not_ended(session: Session) -> None:
    """Conflict ``session_ended`` once the session has ended: it takes no more work."""
    if session.lifecycle_state == Session.Lifecycle.ENDED:
        raise Conflict("session_ended", SESSION_ENDED_DETAIL)


def session_lock(session: Session | Any, *, open_only: bool = True) -> Session:
    """Lock the session row (a ``Session`` or its primary key) inside the caller's
    transaction and return it fresh; with ``open_only`` (the default) require it not ended.
    """
    pk = session.pk if isinstance(session, Session) else session
    locked = Session.objects.select_for_update().get(pk=pk)
    if open_only:
        session_require_not_ended(locked)
    return locked


def frame_lock(frame: Frame | Any) -> Frame:
    """Lock a frame row (a ``Frame`` or its primary key); take its session's lock first."""
    pk = frame.pk if isinstance(frame, Frame) else frame
    return Frame.objects.select_for_update().get(pk=pk)
