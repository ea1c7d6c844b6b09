"""Reads of RLM states, always scoped to one organization.

A state of another organization, or an id that is not even well formed, is NotFound.
Listing and detail reads never count as variable reads: only ``protocol.variable_read``
(the protocol's read_variable) increments access counts.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Case, Count, Exists, OuterRef, Q, QuerySet, Value, When
from django.utils import timezone

from contextops.errors import NotFound
from contextops.ids import uuid_or_none

from .models import RlmCheckpoint, RlmMutation, RlmState, RlmVariable, Scope
from .values import FINAL, PROMPT, STATE_ID_PATTERN, stored_value


@dataclass(frozen=True)
class StateView:
    """A state with everything its API answer and its dashboard page show, read in one go.

    A write that answers with a state reads this inside its own transaction, so the
    answer needs no query after the commit.
    """

    state: RlmState  # its session and frame loaded
    variables: list[RlmVariable]  # the live ones, by name
    checkpoints: list[RlmCheckpoint]  # oldest first, see ``checkpoint_list``
    total_size_bytes: int  # of every variable row, expired temporaries not yet purged too
    mutations: list[RlmMutation]  # the newest entries of the log asked for, newest first


def state_get(*, organization, state_id: Any) -> RlmState:
    if not isinstance(state_id, str) or not STATE_ID_PATTERN.fullmatch(state_id):
        raise NotFound("No such RLM state.")
    try:
        return RlmState.objects.get(organization=organization, state_id=state_id)
    except RlmState.DoesNotExist:
        raise NotFound("No such RLM state.") from None


def state_list(
    *,
    organization,
    session_id: str | None = None,
    tree_id: str | None = None,
    completion_status: str | None = None,
) -> QuerySet[RlmState]:
    """The organization's states, newest first, with ``live_variable_count`` annotated."""
    now = timezone.now()
    states = RlmState.objects.filter(organization=organization).annotate(
        live_variable_count=Count(
            "variables",
            filter=Q(variables__expires_at__isnull=True) | Q(variables__expires_at__gt=now),
        )
    )
    if session_id:
        match = Q(session_ref=session_id)
        if (session_pk := uuid_or_none(session_id)) is not None:
            match |= Q(session_id=session_pk)
        states = states.filter(match)
    if tree_id:
        states = states.filter(tree_id=tree_id)
    if completion_status:
        states = states.filter(completion_status=completion_status)
    return states.order_by("-created_at", "-id")


def state_variables(state: RlmState) -> list[RlmVariable]:
    """Live variables by name (temporary ones past their TTL are left out)."""
    now = timezone.now()
    return [v for v in state.variables.order_by("name") if not v.is_expired(now)]


def variable_resolve(
    *, state: RlmState, name: str, now: datetime | None = None
) -> RlmVariable | None:
    """The variable a read of ``name`` on ``state`` sees, or None when no state shares one.

    The state's own variable comes first. A name the state does not define (or whose
    temporary variable has expired) resolves to a variable of another state of the same
    organization whose scope reaches this one, narrowest scope first:

    1. ``tree``: a tree-scoped variable of a state of the same task tree;
    2. ``session``: a session-scoped variable of a state of the same session;
    3. ``global``: a global variable of any state of the organization.

    Within one scope the most recently written variable wins. ``temporary`` variables
    are seen by their own state only, and ``Final`` and ``prompt`` never resolve to
    another state's: each state has its own. A tree variable of a state outside any tree,
    or a session variable of a state outside any session, is its own state's only. The
    returned variable's ``state`` is the state that holds it.
    """
    now = now or timezone.now()
    own = state.variables.filter(name=name).first()
    if own is not None and not own.is_expired(now):
        return own
    if name in (FINAL, PROMPT):
        return None
    levels = []
    if state.tree_id:
        levels.append(When(scope=Scope.TREE, state__tree_id=state.tree_id, then=Value(1)))
    if state.session_id:
        levels.append(When(scope=Scope.SESSION, state__session_id=state.session_id, then=Value(2)))
    elif state.session_ref:
        levels.append(
            When(scope=Scope.SESSION, state__session_ref=state.session_ref, then=Value(2))
        )
    levels.append(When(scope=Scope.GLOBAL, then=Value(3)))
    return (
        RlmVariable.objects.filter(
            name=name,
            scope__in=[Scope.TREE, Scope.SESSION, Scope.GLOBAL],
            state__organization_id=state.organization_id,
        )
        .exclude(state_id=state.pk)
        .annotate(resolution=Case(*levels, default=None))
        .filter(resolution__isnull=False)
        .select_related("state")
        .order_by("resolution", "-updated_at", "-id")
        .first()
    )


def state_view(state: RlmState, *, mutations: int = 0, locked: bool = False) -> StateView:
    """``state`` with its variables, checkpoints and the newest ``mutations`` entries of
    its log (none by default).

    ``locked``: the caller has just locked and read the state row in this transaction
    (session and frame loaded), so it is not read again; otherwise it is read afresh.
    """
    if not locked:
        state = RlmState.objects.select_related("session", "frame").get(pk=state.pk)
    now = timezone.now()
    variables = list(state.variables.order_by("name"))
    return StateView(
        state=state,
        variables=[v for v in variables if not v.is_expired(now)],
        checkpoints=checkpoint_list(state),
        total_size_bytes=sum(v.size_bytes for v in variables),
        mutations=(
            mutation_list(state=state, limit=mutations, newest_first=True) if mutations else []
        ),
    )


def checkpoint_list(state: RlmState) -> list[RlmCheckpoint]:
    """Checkpoints oldest first, without loading their snapshots (``has_snapshot``
    annotated: true for every restorable one, positional or with a stored snapshot)."""
    has_snapshot = RlmCheckpoint.objects.filter(
        Q(snapshot__isnull=False) | Q(position__isnull=False), pk=OuterRef("pk")
    )
    return list(
        state.checkpoints.defer("snapshot", "folded_mutations", "position")
        .annotate(has_snapshot=Exists(has_snapshot))
        .order_by("timestamp", "id")
    )


def checkpoint_get(*, state: RlmState, checkpoint_id: str) -> RlmCheckpoint:
    checkpoint = state.checkpoints.filter(checkpoint_id=checkpoint_id).first()
    if checkpoint is None:
        raise NotFound("No such checkpoint in this state.")
    return checkpoint


def mutation_list(
    *, state: RlmState, after: int = 0, limit: int = 100, newest_first: bool = False
) -> list[RlmMutation]:
    mutations = state.mutations.filter(seq__gt=after)
    mutations = mutations.order_by("-seq") if newest_first else mutations.order_by("seq")
    return list(mutations[:limit])


def mutation_values(mutation: RlmMutation) -> tuple[Any, Any]:
    """``(old value, new value)`` as readers see them, loaded from files when needed."""
    return (
        stored_value(mutation.old_value, mutation.old_file),
        stored_value(mutation.new_value, mutation.new_file),
    )
