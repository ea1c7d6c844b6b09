"""LangGraph threads: ``/api/v1/langgraph`` (what ``contextops_client.langgraph`` calls)."""

from ninja import Query, Router
from ninja.responses import Status

from contextops.actors import agent_actor, request_actor
from contextops.auth import api_key_person
from contextops.errors import PermissionDenied
from contextops.http import ApiRequest
from frames.selectors import session_get_optional
from frames.suspensions.api import APPROVE_PERMISSION

from . import selectors, services
from .schemas import (
    GraphCheckpointFilters,
    GraphCheckpointIn,
    GraphCheckpointListOut,
    GraphCheckpointSavedOut,
    GraphInterruptListOut,
    GraphPruneIn,
    GraphRemovedOut,
    GraphRunsDeleteIn,
    GraphThreadCopyIn,
    GraphThreadFilters,
    GraphThreadListOut,
    GraphThreadOut,
    GraphWritesIn,
    GraphWritesOut,
    checkpoint_tuple_out,
    interrupt_out,
    thread_out,
)

router = Router(tags=["langgraph"])


@router.post(
    "/checkpoints",
    response={201: GraphCheckpointSavedOut},
    summary="Store a checkpoint and the channel values it changed (the saver's put)",
)
def checkpoint_put(request: ApiRequest, payload: GraphCheckpointIn):
    organization = request.organization
    session = session_get_optional(organization=organization, session_id=payload.session_id)
    saved = services.checkpoint_put(
        organization=organization,
        agent=request.agent,
        thread_id=payload.thread_id,
        checkpoint_ns=payload.checkpoint_ns,
        checkpoint_id=payload.checkpoint_id,
        parent_checkpoint_id=payload.parent_checkpoint_id or "",
        checkpoint=payload.checkpoint.as_blob(),
        channel_versions=payload.channel_versions,
        blobs=[b.as_channel_blob() for b in payload.blobs],
        metadata=payload.metadata,
        metadata_blob=payload.metadata_blob.as_blob() if payload.metadata_blob else None,
        session=session,
        actor=request_actor(request),
    )
    return Status(201, saved.__dict__)


@router.get(
    "/checkpoints",
    response=GraphCheckpointListOut,
    summary="Checkpoints newest first, with channel values and pending writes (list, get_tuple)",
)
def checkpoint_list(request: ApiRequest, filters: Query[GraphCheckpointFilters]):
    items = selectors.checkpoint_list(
        organization=request.organization,
        thread_id=filters.thread_id,
        checkpoint_ns=filters.checkpoint_ns,
        checkpoint_id=filters.checkpoint_id,
        before=filters.before,
        metadata=filters.metadata_filter(),
        limit=filters.limit,
    )
    return {"items": [checkpoint_tuple_out(item) for item in items]}


@router.post(
    "/writes",
    response=GraphWritesOut,
    summary="Store a task's pending writes (the saver's put_writes)",
)
def writes_put(request: ApiRequest, payload: GraphWritesIn):
    organization = request.organization
    session = session_get_optional(organization=organization, session_id=payload.session_id)
    stored = services.writes_put(
        organization=organization,
        agent=request.agent,
        session=session,
        thread_id=payload.thread_id,
        checkpoint_ns=payload.checkpoint_ns,
        checkpoint_id=payload.checkpoint_id,
        task_id=payload.task_id,
        task_path=payload.task_path,
        writes=[w.as_write() for w in payload.writes],
        actor=request_actor(request),
    )
    return {"stored": stored}


@router.get("/threads", response=GraphThreadListOut, summary="The organization's LangGraph threads")
def thread_list(request: ApiRequest, filters: Query[GraphThreadFilters]):
    threads = selectors.thread_list(
        organization=request.organization, session_id=filters.session_id
    )
    page = threads[filters.offset : filters.offset + filters.limit]
    return {
        "items": [thread_out(t, t.checkpoint_count) for t in page],  # type: ignore[attr-defined]
        "count": threads.count(),
    }


@router.post(
    "/threads/prune",
    response=GraphRemovedOut,
    summary="Prune threads: keep each namespace's latest checkpoint, or delete all (prune)",
)
def threads_prune(request: ApiRequest, payload: GraphPruneIn):
    removed = services.threads_prune(
        organization=request.organization,
        thread_ids=payload.thread_ids,
        strategy=payload.strategy,
        actor=request_actor(request),
    )
    return {"removed": removed}


# Before the routes of one thread: "prune" is not a thread id here.
@router.get("/threads/{thread_id}", response=GraphThreadOut, summary="A LangGraph thread")
def thread_get(request: ApiRequest, thread_id: str):
    thread = selectors.thread_get(organization=request.organization, thread_id=thread_id)
    return thread_out(thread, thread.checkpoints.count())


@router.get(
    "/threads/{thread_id}/interrupts",
    response=GraphInterruptListOut,
    summary="A thread's interrupts, newest first, with the inbox's decision on each",
)
def interrupt_list(request: ApiRequest, thread_id: str):
    """A raw resume token resumes the run: only the agent that suspended the frame and a
    person's key that may approve see it; any other key of the organization (another
    agent's, a read-only one) sees its hash."""
    thread = selectors.thread_get(organization=request.organization, thread_id=thread_id)
    approver = request.api_key.user_id is not None and _may_approve(request)
    me = agent_actor(request.agent)
    return {
        "items": [
            interrupt_out(i, show_token=approver or i.suspension.suspended_by == me)
            for i in selectors.interrupt_list(thread=thread)
        ]
    }


def _may_approve(request: ApiRequest) -> bool:
    try:
        api_key_person(request.api_key, permission=APPROVE_PERMISSION)
    except PermissionDenied:
        return False
    return True


@router.delete(
    "/threads/{thread_id}",
    response={204: None},
    summary="Delete a thread: every checkpoint and write (delete_thread)",
)
def thread_delete(request: ApiRequest, thread_id: str):
    services.thread_delete(
        organization=request.organization, thread_id=thread_id, actor=request_actor(request)
    )
    return Status(204, None)


@router.post(
    "/threads/{thread_id}/copy",
    response={201: GraphThreadOut},
    summary="Copy a thread's checkpoints and writes to another thread (copy_thread)",
)
def thread_copy(request: ApiRequest, thread_id: str, payload: GraphThreadCopyIn):
    target, checkpoints = services.thread_copy(
        organization=request.organization,
        source_thread_id=thread_id,
        target_thread_id=payload.target_thread_id,
        actor=request_actor(request),
    )
    return Status(201, thread_out(target, checkpoints))


@router.post(
    "/runs/delete",
    response=GraphRemovedOut,
    summary="Delete the checkpoints and writes of runs (delete_for_runs)",
)
def runs_delete(request: ApiRequest, payload: GraphRunsDeleteIn):
    removed = services.runs_delete(
        organization=request.organization,
        run_ids=payload.run_ids,
        actor=request_actor(request),
    )
    return {"removed": removed}
