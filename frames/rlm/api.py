"""RLM state: ``/api/v1/rlm/states`` (variables, mutation log, checkpoints, rollback, export)."""

from typing import Any

from ninja import Body, Query, Router
from ninja.responses import Status

from contextops.actors import request_actor
from contextops.http import ApiRequest
from contextops.pages import queryset_page
from frames.selectors import frame_get_optional, session_get_optional

from . import interchange, protocol, selectors, snapshots
from .models import RlmState
from .schemas import (
    CheckpointDetailOut,
    CheckpointIn,
    CheckpointOut,
    CompletionOut,
    MutationFilters,
    MutationOut,
    RollbackIn,
    StateFilters,
    StateIn,
    StateListOut,
    StateOut,
    VariableIn,
    VariableOut,
    VariableReadOut,
    checkpoint_detail_out,
    checkpoint_out,
    mutation_out,
    state_out,
    state_summary_out,
    variable_out,
)

router = Router(tags=["rlm state"])


def _state(request: ApiRequest, state_id: str) -> RlmState:
    return selectors.state_get(organization=request.organization, state_id=state_id)


@router.get("/states", response=StateListOut, summary="The organization's RLM states, newest first")
def state_list(request: ApiRequest, filters: Query[StateFilters]):
    states = selectors.state_list(
        organization=request.organization,
        session_id=filters.session_id,
        tree_id=filters.tree_id,
        completion_status=filters.completion_status,
    )
    return queryset_page(states, offset=filters.offset, limit=filters.limit, out=state_summary_out)


@router.post(
    "/states",
    response={201: StateOut},
    summary="Initialize a state: prompt set, Final null, initial checkpoint",
)
def state_create(request: ApiRequest, payload: StateIn):
    organization = request.organization
    session = session_get_optional(organization=organization, session_id=payload.session_id)
    frame = frame_get_optional(organization=organization, frame_id=payload.frame_id)
    view = protocol.state_initialize_viewed(
        organization=organization,
        prompt=payload.prompt,
        session=session,
        frame=frame,
        tree_id=payload.tree_id or "",
        execution_config=payload.execution_config,
        actor=request_actor(request),
    )
    return Status(201, state_out(view))


@router.post("/states/import", response={201: StateOut}, summary="Import a seed-schema document")
def state_import(request: ApiRequest, document: Body[dict[str, Any]]):
    view = interchange.state_import(
        organization=request.organization, document=document, actor=request_actor(request)
    )
    return Status(201, state_out(view))


@router.get(
    "/states/{state_id}", response=StateOut, summary="A state with its variables and checkpoints"
)
def state_get(request: ApiRequest, state_id: str):
    return state_out(selectors.state_view(_state(request, state_id)))


@router.get(
    "/states/{state_id}/export",
    response=dict[str, Any],
    summary="The state as a seed-schema document",
)
def state_export(request: ApiRequest, state_id: str, snapshots: bool = False):
    """``?snapshots=true`` adds every checkpoint's snapshot, so an import can roll back to them."""
    return interchange.state_export(_state(request, state_id), with_snapshots=snapshots)


@router.get("/states/{state_id}/completion", response=CompletionOut, summary="Whether Final is set")
def state_completion(request: ApiRequest, state_id: str):
    return protocol.completion_check(state=_state(request, state_id))


@router.get(
    "/states/{state_id}/variables/{name}",
    response=VariableReadOut,
    summary="Read a variable (counts as an access), resolving through scopes",
)
def variable_get(request: ApiRequest, state_id: str, name: str):
    """The state's own variable ``name`` when it has one (a temporary one until its TTL runs out).

    Otherwise the name resolves through the scopes of the organization's other states,
    narrowest first: a ``tree`` variable of a state of the same task tree, then a
    ``session`` variable of a state of the same session, then a ``global`` variable of any
    state of the organization; within one scope the most recently written wins. States of
    other organizations are never looked at, ``temporary`` variables are never shared, and
    ``Final`` and ``prompt`` always belong to the state read. ``state_id`` in the answer
    names the state that holds the variable; that variable's access count goes up. 404 when
    no variable of that name is visible. Writes and deletes act on the state named in the
    path only.
    """
    variable, value = protocol.variable_read(state=_state(request, state_id), name=name)
    return {**variable_out(variable, value), "state_id": variable.state.state_id}


@router.put(
    "/states/{state_id}/variables/{name}",
    response=VariableOut,
    summary="Write a variable (logged as a mutation)",
)
def variable_put(request: ApiRequest, state_id: str, name: str, payload: VariableIn):
    actor = request_actor(request)
    variable = protocol.variable_write(
        state=_state(request, state_id),
        name=name,
        value=payload.value,
        type=payload.type,
        description=payload.description,
        source=payload.source or actor,
        read_only=payload.read_only,
        scope=payload.scope,
        ttl_seconds=payload.ttl_seconds,
        actor=actor,
    )
    return variable_out(variable)


@router.delete(
    "/states/{state_id}/variables/{name}",
    response=MutationOut,
    summary="Delete a variable (logged)",
)
def variable_delete(request: ApiRequest, state_id: str, name: str):
    actor = request_actor(request)
    mutation = protocol.variable_delete(
        state=_state(request, state_id), name=name, source=actor, actor=actor
    )
    return mutation_out(mutation)


@router.get(
    "/states/{state_id}/mutations",
    response=list[MutationOut],
    summary="The mutation log, oldest first",
)
def mutation_list(request: ApiRequest, state_id: str, filters: Query[MutationFilters]):
    mutations = selectors.mutation_list(
        state=_state(request, state_id), after=filters.after, limit=filters.limit
    )
    return [mutation_out(m) for m in mutations]


@router.get(
    "/states/{state_id}/checkpoints",
    response=list[CheckpointOut],
    summary="Checkpoints, oldest first",
)
def checkpoint_list(request: ApiRequest, state_id: str):
    return [checkpoint_out(c) for c in selectors.checkpoint_list(_state(request, state_id))]


@router.post(
    "/states/{state_id}/checkpoints", response={201: CheckpointOut}, summary="Snapshot the state"
)
def checkpoint_create(request: ApiRequest, state_id: str, payload: CheckpointIn):
    checkpoint = snapshots.checkpoint_create(
        state=_state(request, state_id),
        name=payload.name,
        description=payload.description,
        actor=request_actor(request),
    )
    return Status(201, checkpoint_out(checkpoint))


@router.get(
    "/states/{state_id}/checkpoints/{checkpoint_id}",
    response=CheckpointDetailOut,
    summary="A checkpoint with its full snapshot",
)
def checkpoint_get(request: ApiRequest, state_id: str, checkpoint_id: str):
    state = _state(request, state_id)
    checkpoint = selectors.checkpoint_get(state=state, checkpoint_id=checkpoint_id)
    return checkpoint_detail_out(
        checkpoint, snapshots.checkpoint_snapshots(state, [checkpoint])[checkpoint.pk]
    )


@router.post(
    "/states/{state_id}/rollback",
    response=StateOut,
    summary="Restore a checkpoint exactly (logged)",
)
def state_rollback(request: ApiRequest, state_id: str, payload: RollbackIn):
    view = snapshots.state_rollback(
        state=_state(request, state_id),
        checkpoint_id=payload.checkpoint_id,
        actor=request_actor(request),
    )
    return state_out(view)
