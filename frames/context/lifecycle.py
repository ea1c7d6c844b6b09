"""The session lifecycle of seed 003: loading, bootstrap, active, persisting, ended.

Ending a session reaches every layer a session owns (its frames, their suspensions, its
working set), so it sits here, above frames and facts. A session that persists or ends
saves the map of its resources (``ResourceMap``); the next session of the same agent is
offered it while it loads (``resource_map_offered``).
"""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from facts.services import working_set_clear
from frames.events import event_append
from frames.locks import frame_lock, session_lock
from frames.models import ContextHandle, Frame, ResourceMap, Session
from frames.services.expiry import suspensions_close
from frames.services.sessions import session_bootstrapped
from frames.services.stack import frame_close

from .annotations import notes_by_handle
from .resources import resource_name

MAP_RESOURCES = 200
MAP_SUMMARY_CHARS = 300
# Seed 003's symbols for the resource states, the ultra-dense map's first column.
STATE_SYMBOLS = {"cold": "○", "loaded": "✓", "hot": "◆", "indexed": "●", "offline": "✗"}


def _resource_map(session: Session) -> tuple[list[dict], str]:
    """The session's resources, most attended and most recently used first (at most
    MAP_RESOURCES), and their ultra-dense rendering, one line each."""
    handles = list(
        ContextHandle.objects.filter(session=session)
        .exclude(kind=ContextHandle.Kind.SYSTEM_PROMPT)
        .order_by("-attention_weight", "-last_access_at", "id")
        .only(
            "id",
            "kind",
            "priority",
            "state",
            "estimated_tokens",
            "ref",
            "content",
            "category",
            "summary",
        )[:MAP_RESOURCES]
    )
    notes = notes_by_handle([h.pk for h in handles])
    resources, lines = [], []
    for handle in handles:
        name = resource_name(
            ref=handle.ref, content=handle.content, category=handle.category, kind=handle.kind
        )
        handle_notes = notes.get(str(handle.pk), [])
        entry = {
            "handle_id": str(handle.pk),
            "name": name,
            "kind": handle.kind,
            "priority": handle.priority,
            "state": handle.state,
            "tokens": handle.estimated_tokens,
            "ref": handle.ref,
            "summary": handle.summary[:MAP_SUMMARY_CHARS],
            "notes": handle_notes,
        }
        resources.append(entry)
        line = f"{STATE_SYMBOLS.get(handle.state, '?')} {name} [{handle.kind}]"
        if handle_notes:
            line += " — " + "; ".join(handle_notes)
        lines.append(line)
    return resources, "\n".join(lines)


def _resource_map_save(session: Session) -> ResourceMap:
    resources, text = _resource_map(session)
    return ResourceMap.objects.create(
        organization_id=session.organization_id,
        agent_id=session.agent_id,
        session=session,
        resources=resources,
        text=text,
    )


def session_persist(*, session: Session, actor: str = "") -> ResourceMap:
    """Save the map of ``session``'s resources now, without ending it (seed 003
    ``PERSISTING``); Conflict ``session_ended`` once it has ended."""
    with transaction.atomic():
        session = session_lock(session)
        saved = _resource_map_save(session)
        event_append(
            session=session,
            type="session.persisted",
            actor=actor,
            payload={"resource_map_id": str(saved.pk), "resources": len(saved.resources)},
        )
    return saved


@dataclass(frozen=True)
class BootstrapOffer:
    """What a session is offered at loading: the newest map an earlier session of its
    agent saved (None when there is none), and its lifecycle state after reading it."""

    session: Session
    resource_map: ResourceMap | None


def resource_map_offered(*, session: Session, actor: str = "") -> BootstrapOffer:
    """The newest map saved by another session of the same agent in the same
    organization; reading it moves a loading session to bootstrap (seed 003)."""
    offered = None
    if session.agent_id is not None:
        offered = (
            ResourceMap.objects.filter(
                organization_id=session.organization_id, agent_id=session.agent_id
            )
            .exclude(session_id=session.pk)
            .order_by("-created_at")
            .first()
        )
    if session.lifecycle_state == Session.Lifecycle.LOADING:
        session_bootstrapped(session=session, actor=actor)
    return BootstrapOffer(session=session, resource_map=offered)


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
        saved = _resource_map_save(session)
        Session.objects.filter(pk=session.pk).update(
            lifecycle_state=Session.Lifecycle.ENDED, ended_at=now, updated_at=now
        )
        event_append(
            session=session,
            type="session.ended",
            actor=actor,
            payload={"frames_cancelled": len(open_frames), "resource_map_id": str(saved.pk)},
        )
        ended = Session.objects.select_related("agent").get(pk=session.pk)
    return ended
