"""The session lock: the one way a write of a session begins.

Every write of a session (frames, usage, handles, facts of its working set, turns, RLM
states) locks the session row first, then the rows it changes, parents before children.
One session's writes therefore serialize on its row, which keeps budget arithmetic exact
when many agents write at once and never deadlocks (one order everywhere); on SQLite the
IMMEDIATE transaction mode gives the same guarantee for the whole database.
"""

import uuid
from typing import Any

from contextops.errors import Conflict, NotFound

from .models import Frame, Session

SESSION_ENDED_DETAIL = "This session has ended; start a new one."


def _uuid(value: Any) -> uuid.UUID | None:
    """``value`` as a UUID; None when it is not one (a 404 for the caller, as its read)."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return None


def session_require_not_ended(session: Session) -> None:
    """Conflict ``session_ended`` once the session has ended: it takes no more work."""
    if session.lifecycle_state == Session.Lifecycle.ENDED:
        raise Conflict("session_ended", SESSION_ENDED_DETAIL)


def session_lock(
    session: Session | Any, *, open_only: bool = True, organization: Any = None
) -> Session:
    """Lock the session row (a ``Session`` or its primary key) inside the caller's
    transaction and return it fresh; with ``open_only`` (the default) require it not ended.

    With ``organization``, a session of another organization (or an id that is not one)
    is NotFound, as its read would be: the lock is the request's first read of it.
    """
    if organization is None:
        pk = session.pk if isinstance(session, Session) else session
        locked = Session.objects.select_for_update().get(pk=pk)
    else:
        pk = _uuid(session.pk if isinstance(session, Session) else session)
        try:
            if pk is None:
                raise Session.DoesNotExist
            locked = Session.objects.select_for_update().get(pk=pk, organization=organization)
        except Session.DoesNotExist:
            raise NotFound("No such session.") from None
        locked.organization = organization  # the one it was found in: no query to read it
    if open_only:
        session_require_not_ended(locked)
    return locked


def frame_session_lock(frame: Frame | Any, *, organization: Any = None) -> tuple[Session, Frame]:
    """Lock the session of a frame (a ``Frame`` or its primary key) from the frame's id
    alone, in one statement; return the session, fresh, and the frame as read before the
    lock: only its ids (its parent's included) are to be trusted, the rest may have moved.

    With ``organization``, a frame of another organization (or an id that is not one) is
    NotFound, as its read would be.
    """
    pk = _uuid(frame.pk if isinstance(frame, Frame) else frame)
    scope = {} if organization is None else {"organization": organization}
    try:
        if pk is None:
            raise Frame.DoesNotExist
        # Only the session's row is locked: PostgreSQL hands back its newest version.
        found = (
            Frame.objects.select_related("session")
            .select_for_update(of=("session",))
            .get(pk=pk, **scope)
        )
    except Frame.DoesNotExist:
        raise NotFound("No such frame.") from None
    return found.session, found


def frame_lock(frame: Frame | Any, *, organization: Any = None) -> Frame:
    """Lock a frame row (a ``Frame`` or its primary key); take its session's lock first.

    With ``organization``, a frame of another organization (or an id that is not one) is
    NotFound, as its read would be.
    """
    pk = frame.pk if isinstance(frame, Frame) else frame
    if organization is None:
        return Frame.objects.select_for_update().get(pk=pk)
    pk = _uuid(pk)
    try:
        if pk is None:
            raise Frame.DoesNotExist
        return Frame.objects.select_for_update().get(pk=pk, organization=organization)
    except Frame.DoesNotExist:
        raise NotFound("No such frame.") from None
