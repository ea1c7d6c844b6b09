"""The seed's agent protocol, step by step: initialize a state, read, write and delete
variables, ``Final`` and completion, and the sweep of expired temporaries.

Every write locks the state row and logs its mutation (``snapshots``), in one
transaction it owns.

Special variables: ``prompt`` is set at initialization and read-only afterwards;
``Final`` is absent (the seed's "null or undefined") until the task is complete. Writing
a non-null ``Final`` completes the state and runs the completion handlers: the state's
frame is popped as completed, a leaf's Final is returned to the parent frame's states as
``child_<hex>_final``, and the root's Final marks every state of the tree as complete.
A state attached to a frame with open children cannot set Final (the seed: "Parent can
set Final when all children complete"). Final is read-only once set.

Scopes (the seed's ``scopes``) decide which other states read a variable: writes and
deletes always act on the caller's state, but a read of a name the state does not define
resolves, narrowest first, to a ``tree`` variable of a state of the same task tree, a
``session`` variable of a state of the same session, then a ``global`` variable of any
state of the organization (``selectors.variable_resolve``). A variable of the state
itself shadows them all.

Temporary variables are their own state's only and expire ``ttl_seconds`` after their
last write: readers no longer see them, and the next write to the state deletes them
with a logged ``delete`` mutation (source ``ttl_expired``).
"""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ParamSpec
from uuid import UUID

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from contextops.actors import system_actor
from contextops.errors import Conflict, Invalid, NotFound
from contextops.models import Organization
from frames.locks import session_require_not_ended
from frames.models import Frame, Session
from frames.services.stack import frame_pop

from .models import RlmCheckpoint, RlmMutation, RlmState, RlmVariable, Scope, VariableType
from .schema import execution_config_check
from .selectors import StateView, state_view, variable_resolve
from .snapshots import (
    checkpoint_id_new,
    mutation_log,
    state_event_append,
    state_expired_purge,
    state_lock,
    state_position,
    state_save,
    variable_snapshot,
)
from .values import (
    FINAL,
    MAX_VARIABLES,
    PROMPT,
    TREE_ID_PATTERN,
    check_type,
    fits_type,
    infer_type,
    state_id_new,
    stored_value,
    validate_name,
    value_store,
)

P = ParamSpec("P")

# --- initialize ---------------------------------------------------------------------


def tree_id_for(frame: Frame) -> tuple[str, Frame]:
    """``(tree id, root frame)`` of the tree ``frame`` belongs to; the id comes from the root's UUID."""
    root = frame
    while root.parent_id is not None:
        root = Frame.objects.only("id", "parent_id").get(pk=root.parent_id)
    return f"tree-{root.pk.hex[:8]}", root


def _check_session_and_frame(
    *, organization: Organization, session: Session | None, frame: Frame | None
) -> None:
    if session is not None and session.organization_id != organization.pk:
        raise NotFound("No such session.")
    if frame is not None and frame.organization_id != organization.pk:
        raise NotFound("No such frame.")
    if session is not None and frame is not None and frame.session_id != session.pk:
        raise Invalid("The frame belongs to another session.", field="frame_id")
    if session is not None:
        session_require_not_ended(session)
    elif frame is not None:
        session_require_not_ended(frame.session)


def state_initialize(
    *,
    organization: Organization,
    prompt: str,
    session: Session | None = None,
    frame: Frame | None = None,
    tree_id: str = "",
    execution_config: dict | None = None,
    actor: str = "",
) -> RlmState:
    """Create a state: new id, read-only ``prompt``, no ``Final``, an initial checkpoint.

    A frame puts the state in the frame's task tree (and session). 422 for an
    ``execution_config`` the seed's ExecutionConfig refuses, an empty prompt, a frame of
    another session or tree, or a malformed tree id; 404 for a session or frame of another
    organization; 409 ``session_ended`` for an ended session.
    """
    if execution_config is not None:
        execution_config_check(execution_config)
    if not isinstance(prompt, str) or not prompt.strip():
        raise Invalid("The prompt is required.", field="prompt")
    _check_session_and_frame(organization=organization, session=session, frame=frame)
    root = None
    if frame is not None:
        session = session or frame.session
        frame_tree, root = tree_id_for(frame)
        if tree_id and tree_id != frame_tree:
            raise Invalid(f"The frame belongs to tree {frame_tree}.", field="tree_id")
        tree_id = frame_tree
    if tree_id and not TREE_ID_PATTERN.fullmatch(tree_id):
        raise Invalid("A tree id is tree- and 8 hex digits.", field="tree_id")
    now = timezone.now()
    with transaction.atomic():
        state = RlmState.objects.create(
            organization=organization,
            state_id=state_id_new(organization),
            session=session,
            tree_id=tree_id,
            root_frame=root,
            frame=frame,
            execution_config=execution_config or {},
            created_at=now,
            updated_at=now,
        )
        state = state_lock(state)
        value, file_name, size = value_store(state, PROMPT, prompt, field="prompt")
        RlmVariable.objects.create(
            state=state,
            name=PROMPT,
            type=VariableType.TEXT,
            value=value,
            file_name=file_name,
            size_bytes=size,
            source="user_input",
            read_only=True,
            created_at=now,
            updated_at=now,
        )
        mutation_log(
            state,
            operation="create",
            name=PROMPT,
            new=(value, file_name),
            source="user_input",
            timestamp=now,
            actor=actor,
            before={PROMPT: None},
        )
        RlmCheckpoint.objects.create(
            state=state,
            checkpoint_id=checkpoint_id_new(state),
            name="initial_state",
            description="State initialized with user prompt",
            kind=RlmCheckpoint.Kind.INITIAL,
            position=state_position(state),
            mutation_seq=state.mutation_total,
            timestamp=now,
        )
        state_save(state, now)
        state_event_append(state, "rlm.state_initialized", actor)
    return state


def _viewed(create: Callable[P, RlmState]) -> Callable[P, StateView]:
    """``create`` (with its own arguments, which mypy checks), answering with the new
    state's view read before the commit."""

    def viewed(*args: P.args, **kwargs: P.kwargs) -> StateView:
        with transaction.atomic():
            return state_view(create(*args, **kwargs))

    return viewed


state_initialize_viewed = _viewed(state_initialize)


# --- read ---------------------------------------------------------------------------


def variable_read(*, state: RlmState, name: str) -> tuple[RlmVariable, Any]:
    """``(variable, value)``: the access count goes up by one, the value comes from its file if needed.

    A name the state does not define resolves through the scopes of other states of the
    organization (``selectors.variable_resolve``); the variable returned then belongs to
    that state (``variable.state``), and its access count is the one that goes up.
    NotFound when no variable of that name is visible to this state.
    """
    variable = variable_resolve(state=state, name=name)
    if variable is None:
        raise NotFound(f"No variable {name!r} in this state or any state sharing it.")
    RlmVariable.objects.filter(pk=variable.pk).update(access_count=F("access_count") + 1)
    variable.access_count += 1
    return variable, stored_value(variable.value, variable.file_name)


def completion_check(*, state: RlmState) -> dict[str, Any]:
    """``{complete, completion_status, final}``: complete when ``Final`` is set (non-null)."""
    final = state.variables.filter(name=FINAL).first()
    value = stored_value(final.value, final.file_name) if final else None
    return {
        "complete": final is not None and value is not None,
        "completion_status": state.completion_status,
        "final": value,
    }


# --- write and delete ---------------------------------------------------------------


def _write_locked(
    state: RlmState,
    *,
    name: str,
    value: Any,
    type_: str | None,
    description: str | None,
    source: str,
    read_only: bool | None,
    scope: str | None,
    ttl_seconds: int | None,
    actor: str,
    now: datetime,
    existing: RlmVariable | None = None,
    existing_read: bool = False,
    save_state: bool = False,
) -> RlmVariable:
    """Write ``name`` on a locked state, log it, and complete the state when it is ``Final``.

    ``existing`` (with ``existing_read``): the variable of that name as the caller just
    read it under the lock, None when there is none; read here otherwise. With
    ``save_state`` (not for ``Final``, whose completion changes the state afterwards) the
    state is stored with the mutation's entry, and the caller has no ``state_save`` left.
    """
    if not existing_read:
        existing = state.variables.filter(name=name).first()
    if existing is not None and existing.read_only:
        raise Conflict("read_only_variable", f"{name!r} is read-only.", variable=name)
    if name == FINAL and value is None:
        raise Invalid(
            "Final stays unset until the task is complete; set it to the answer.", field="value"
        )
    if existing is None and state.variables.count() >= MAX_VARIABLES:
        raise Conflict(
            "variable_limit_reached",
            f"A state holds at most {MAX_VARIABLES} variables; delete one first.",
            limit=MAX_VARIABLES,
        )
    if type_ is None:
        keep = existing is not None and fits_type(existing.type, value)
        type_ = existing.type if existing is not None and keep else infer_type(value)
    check_type(type_, value, field="type")
    scope = scope or (existing.scope if existing is not None else Scope.SESSION)
    if scope not in Scope.values:
        raise Invalid(f"Unknown scope {scope!r}.", field="scope")
    if scope == Scope.TEMPORARY:
        ttl_seconds = (
            ttl_seconds if ttl_seconds is not None else (existing.ttl_seconds if existing else None)
        )
        if ttl_seconds is None:
            raise Invalid("A temporary variable needs ttl_seconds.", field="ttl_seconds")
    elif ttl_seconds is not None:
        raise Invalid("Only temporary variables have a TTL.", field="ttl_seconds")
    if ttl_seconds is not None and ttl_seconds < 0:
        raise Invalid("ttl_seconds cannot be negative.", field="ttl_seconds")
    if name == FINAL and state.frame_id:
        open_children = Frame.objects.filter(
            parent_id=state.frame_id, status__in=Frame.OPEN_STATUSES
        )
        if open_children.exists():
            raise Conflict(
                "children_incomplete",
                "This state's frame still has open children; Final is set when all of them complete.",
            )
    old = (existing.value, existing.file_name) if existing is not None else (None, "")
    before = {name: variable_snapshot(existing) if existing is not None else None}
    stored, file_name, size = value_store(state, name, value, field="value")
    variable = existing or RlmVariable(state=state, name=name, created_at=now)
    variable.type = type_
    variable.value = stored
    variable.file_name = file_name
    variable.size_bytes = size
    if description is not None:
        variable.description = description
    variable.source = source or variable.source
    variable.read_only = bool(read_only) if read_only is not None else variable.read_only
    variable.scope = scope
    variable.ttl_seconds = ttl_seconds
    variable.expires_at = now + timedelta(seconds=ttl_seconds) if ttl_seconds is not None else None
    variable.updated_at = now
    if name in (FINAL, PROMPT):
        variable.read_only = True  # prompt once it exists, Final once it is set
    variable.save()
    mutation = mutation_log(
        state,
        operation="update" if existing is not None else "create",
        name=name,
        old=old,
        new=(stored, file_name),
        source=source,
        timestamp=now,
        actor=actor,
        before=before,
        state_saved_at=now if save_state else None,
    )
    state_event_append(
        state, "rlm.variable_written", actor, name=name, mutation_id=mutation.mutation_id
    )
    if name == FINAL:
        _complete(state, value=value, type_=type_, now=now, actor=actor)
    return variable


def variable_write(
    *,
    state: RlmState,
    name: str,
    value: Any,
    type: str | None = None,
    description: str | None = None,
    source: str = "",
    read_only: bool | None = None,
    scope: str | None = None,
    ttl_seconds: int | None = None,
    actor: str = "",
) -> RlmVariable:
    """Create or update ``name`` and log the mutation; writing ``Final`` completes the state.

    409 ``read_only_variable`` for ``prompt``, a set ``Final`` or any read-only variable;
    409 ``variable_limit_reached`` past the seed's variable limit; 422 for a bad name,
    a value that does not fit its type, or a null ``Final``.
    """
    validate_name(name, field="name")
    with transaction.atomic():
        state = state_lock(state)
        now = timezone.now()
        existing = state_expired_purge(state, now, actor, also=name)
        variable = _write_locked(
            state,
            existing=existing,
            existing_read=True,
            name=name,
            value=value,
            type_=type,
            description=description,
            source=source,
            read_only=read_only,
            scope=scope,
            ttl_seconds=ttl_seconds,
            actor=actor,
            now=now,
            save_state=name != FINAL,
        )
        if name == FINAL:
            state_save(state, now)
    return variable


def variable_delete(
    *, state: RlmState, name: str, source: str = "", actor: str = ""
) -> RlmMutation:
    """Delete ``name`` with a logged ``delete`` mutation; 409 for read-only, 404 when absent."""
    validate_name(name, field="name")
    with transaction.atomic():
        state = state_lock(state)
        now = timezone.now()
        # The read that finds the expired temporaries brings ``name`` back too: one query.
        variable = state_expired_purge(state, now, actor, also=name)
        if variable is None:
            raise NotFound(f"No variable {name!r} in this state.")
        if variable.read_only:
            raise Conflict("read_only_variable", f"{name!r} is read-only.", variable=name)
        mutation = mutation_log(
            state,
            operation="delete",
            name=name,
            old=(variable.value, variable.file_name),
            source=source,
            timestamp=now,
            actor=actor,
            before={name: variable_snapshot(variable)},
            state_saved_at=now,
        )
        variable.delete()
        state_event_append(
            state, "rlm.variable_deleted", actor, name=name, mutation_id=mutation.mutation_id
        )
    return mutation


# --- completion ---------------------------------------------------------------------


def _complete(state: RlmState, *, value: Any, type_: str, now: datetime, actor: str) -> None:
    """The completion handlers of ``Final``: pop the frame, return the answer up, end the tree."""
    state.completion_status = RlmState.Completion.COMPLETE
    state.completed_at = now
    payload: dict[str, Any] = {}
    frame = state.frame
    if frame is not None:
        frame.refresh_from_db(fields=["status", "parent"])
        if frame.status in (Frame.Status.ACTIVE, Frame.Status.WAITING):
            frame_pop(
                frame=frame, status="completed", result_refs=[f"rlm:{state.state_id}"], actor=actor
            )
            payload["frame_popped"] = str(frame.pk)
        if frame.parent_id is not None:
            payload["returned_to"] = _return_to_parent(
                state,
                frame,
                parent_id=frame.parent_id,
                value=value,
                type_=type_,
                now=now,
                actor=actor,
            )
        elif state.tree_id:
            RlmState.objects.filter(
                organization_id=state.organization_id, tree_id=state.tree_id
            ).update(tree_completed_at=now)
            state.tree_completed_at = now
            payload["tree_completed"] = state.tree_id
    state_event_append(state, "rlm.completed", actor, **payload)


def _return_to_parent(
    state: RlmState,
    frame: Frame,
    *,
    parent_id: UUID,
    value: Any,
    type_: str,
    now: datetime,
    actor: str,
) -> list[str]:
    """Write a leaf's Final into every state of its parent frame as ``child_<hex>_final``."""
    returned = []
    name = f"child_{state.state_id.removeprefix('state-')}_final"
    parents = RlmState.objects.filter(
        organization_id=state.organization_id, frame_id=parent_id
    ).exclude(pk=state.pk)
    for parent_pk in parents.values_list("pk", flat=True):
        parent = state_lock(RlmState(pk=parent_pk))
        try:
            with transaction.atomic():
                _write_locked(
                    parent,
                    name=name,
                    value=value,
                    type_=type_,
                    description=f"Final of child state {state.state_id} (frame {frame.pk}).",
                    source=state.state_id,
                    read_only=None,
                    scope=None,
                    ttl_seconds=None,
                    actor=actor,
                    now=now,
                )
                state_save(parent, now)
        except Conflict:
            continue  # a full or read-only parent keeps its state; the child is still complete
        returned.append(parent.state_id)
    return returned


# --- temporaries --------------------------------------------------------------------


def temporaries_purge(*, now: datetime | None = None, actor: str = system_actor("ttl")) -> int:
    """Delete every temporary variable whose TTL has run out, each logged as a mutation.

    Readers never see an expired variable (every read and write purges its state first);
    this sweep removes the rows of states nobody touches any more. Returns how many went.
    """
    now = now or timezone.now()
    purged = 0
    state_ids = (
        RlmVariable.objects.filter(expires_at__lte=now)
        .values_list("state_id", flat=True)
        .distinct()
    )
    for state_id in list(state_ids[:1000]):
        with transaction.atomic():
            state = state_lock(RlmState(pk=state_id))
            before = state.variables.count()
            state_expired_purge(state, now, actor)
            purged += before - state.variables.count()
            state_save(state, now)
    return purged
