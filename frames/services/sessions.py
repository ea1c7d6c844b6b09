"""Writes to a session itself: starting it (and marking where one written from elsewhere
came from), its eviction policy, and the lifecycle moves its agent's first reads and
writes make (loading, bootstrap, active)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from contextops.errors import AuthorityTooLow, Invalid
from contextops.zones import zone_check

from ..events import event_append
from ..locks import session_lock
from ..models import Frame, Session
from ..selectors import top_frame


def session_create(
    *,
    organization,
    agent=None,
    identity: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    context_window_tokens: int = 200_000,
    model: str = "",
    title: str = "",
    compaction_threshold: float = 0.9,
    eviction_policy: str = Session.Eviction.LRU,
    actor: str = "",
) -> Session:
    """Start a session; its identity (layer 1) is fixed from here on.

    The identity's authority defaults to the agent's own and may not exceed it: an
    agent cannot start a session that speaks with more authority than its key has.
    """
    identity = dict(identity or {})
    environment = dict(environment or {})
    if environment.get("timezone"):
        zone_check(environment["timezone"], field="environment.timezone")
    if agent is not None:
        agent_authority = agent.authority
        claimed = identity.get("authority") or agent_authority
        if claimed not in organization.authority_ladder:
            raise Invalid(
                f"Unknown authority {claimed!r}; this organization's ladder is {', '.join(organization.authority_ladder)}.",
                field=("identity", "authority"),
            )
        if organization.authority_rank(claimed) < organization.authority_rank(agent_authority):
            raise AuthorityTooLow(
                f"This key speaks with {agent_authority} authority; it cannot start a session as {claimed}."
            )
        identity["authority"] = claimed
        identity.setdefault("organization", organization.name)
    with transaction.atomic():
        session = Session.objects.create(
            organization=organization,
            agent=agent,
            identity=identity,
            environment=dict(environment or {}),
            context_window_tokens=context_window_tokens,
            model=model,
            title=title or str(identity.get("user_name") or ""),
            compaction_threshold=compaction_threshold,
            eviction_policy=eviction_policy,
            # The session lifecycle (docs/concepts.md#session-lifecycle): loading until the
            # agent first reads its context back (resume or a context pack: bootstrap),
            # active from its first frame.
            lifecycle_state=Session.Lifecycle.LOADING,
        )
        event_append(
            session=session,
            type="session.created",
            actor=actor,
            payload={
                "identity": identity,
                "context_window_tokens": context_window_tokens,
                "model": model,
            },
        )
    return session


@dataclass(frozen=True)
class SessionRead:
    """A session with the top of its stack, both read inside the write's transaction."""

    session: Session
    top: Frame | None


def session_eviction_policy_set(*, session: Session, policy: str, actor: str = "") -> SessionRead:
    """Change the policy that orders the session's eviction candidates
    (docs/concepts.md#eviction), logging ``session.updated`` with the old and new policy; a policy
    equal to the current one changes nothing and logs nothing. Returns the session as it
    stands at the commit (its agent loaded) with the top of its stack."""
    if policy not in Session.Eviction.values:
        raise Invalid(
            f"eviction_policy must be one of {', '.join(Session.Eviction.values)}.",
            field="eviction_policy",
        )
    with transaction.atomic():
        locked = session_lock(session)
        previous = locked.eviction_policy
        if policy != previous:
            Session.objects.filter(pk=locked.pk).update(
                eviction_policy=policy, updated_at=timezone.now()
            )
            locked.eviction_policy = policy
            event_append(
                session=locked,
                type="session.updated",
                actor=actor,
                payload={"eviction_policy": policy, "from": {"eviction_policy": previous}},
            )
        locked.agent  # noqa: B018  # read inside the transaction: the answer names it
        return SessionRead(session=locked, top=top_frame(locked))


def session_source_set(
    *, session: Session, source: dict[str, Any], started_at: datetime | None
) -> None:
    """Mark a session written from elsewhere (an imported transcript, received traces)
    with where it came from, started when it started there (if that is known)."""
    fields: dict[str, Any] = {"source": source}
    if started_at is not None:
        fields["started_at"] = started_at
    Session.objects.filter(pk=session.pk).update(**fields)
    session.refresh_from_db()


def session_bootstrapped(*, session: Session, actor: str = "") -> None:
    """A loading session moves to bootstrap once its agent reads its context back (a
    resume or a context pack); any other state is left alone. One conditional UPDATE."""
    with transaction.atomic():
        moved = Session.objects.filter(
            pk=session.pk, lifecycle_state=Session.Lifecycle.LOADING
        ).update(lifecycle_state=Session.Lifecycle.BOOTSTRAP, updated_at=timezone.now())
        if moved:
            session.lifecycle_state = Session.Lifecycle.BOOTSTRAP
            event_append(session=session, type="session.bootstrapped", actor=actor)


def session_activated(*, session: Session, actor: str = "") -> None:
    """A loading or bootstrapping session moves to active once its agent stores work
    there other than a frame (a LangGraph checkpoint), as a first frame moves it; any
    other state is left alone. One conditional UPDATE."""
    with transaction.atomic():
        moved = Session.objects.filter(
            pk=session.pk,
            lifecycle_state__in=(Session.Lifecycle.LOADING, Session.Lifecycle.BOOTSTRAP),
        ).update(lifecycle_state=Session.Lifecycle.ACTIVE, updated_at=timezone.now())
        if moved:
            session.lifecycle_state = Session.Lifecycle.ACTIVE
            event_append(session=session, type="session.activated", actor=actor)


def actor_resumed_record(*, session: Session, current_frame, pending: int, actor: str = "") -> None:
    """Log that an actor rebuilt its stack from the database (``actor.resumed``,
    docs/concepts.md#resume)."""
    with transaction.atomic():
        session_bootstrapped(session=session, actor=actor)
        event_append(
            session=session,
            type="actor.resumed",
            frame=current_frame,
            actor=actor,
            payload={"pending_work": pending},
        )
