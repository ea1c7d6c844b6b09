"""The session lifecycle of seed 003: loading, bootstrap, active, persisting, ended.

Ending a session reaches every layer a session owns (its frames, their suspensions, its
working set), so it sits here, above frames and facts.
"""

from django.db import transaction
from django.utils import timezone

from facts.services import working_set_clear
from frames.events import event_append
from frames.locks import frame_lock, session_lock
from frames.models import Frame, Session
from frames.services import frame_close, suspensions_close


def session_end(*, session: Session, actor: str = "") -> Session:
    """End the session: open frames are cancelled, their suspensions expire, the working
    set goes, and the lifecycle passes through ``persisting`` to ``ended``. Returns the
    session as it stands at the commit, read inside the transaction with its agent (no
    frame of it is open any more, so its stack has no top); Conflict ``session_ended``
    if it had ended."""
    with transaction.atomic():
        session = session_lock(session)
        Session.objects.filter(pk=session.pk).update(lifecycle_state=Session.Lifecycle.PERSISTING)
        event_append(session=session, type="session.persisting", actor=actor)
        now = timezone.now()
        # Deepest first, so every frame closes after its children and settles with its parent.
        open_frames = list(
            Frame.objects.filter(session=session, status__in=Frame.OPEN_STATUSES)
            .order_by("-depth", "-created_at")
            .values_list("pk", flat=True)
        )
        for pk in open_frames:
            frame_close(
                session=session, frame=frame_lock(pk), status=Frame.Status.CANCELLED, actor=actor
            )
        suspensions_close(session=session, actor=actor)
        working_set_clear(session=session)
        Session.objects.filter(pk=session.pk).update(
            lifecycle_state=Session.Lifecycle.ENDED, ended_at=now, updated_at=now
        )
        event_append(
            session=session,
            type="session.ended",
            actor=actor,
            payload={"frames_cancelled": len(open_frames)},
        )
        ended = Session.objects.select_related("agent").get(pk=session.pk)
    return ended
