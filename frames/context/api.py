"""Ending a session, context packs, window pressure and paging:
``/sessions/{id}/end``, ``/sessions/{id}/context-pack``, ``/sessions/{id}/pressure``,
``/handles/{id}/...``."""

from uuid import UUID

from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from contextops.actors import request_actor
from contextops.errors import NotFound
from contextops.http import ApiRequest
from frames.api import session_body_with_top
from frames.models import ContextHandle, Frame
from frames.schemas import SessionOut
from frames.selectors import context_packs_newest_first, session_cost, session_get

from .lifecycle import session_end as session_end_service
from .pack import context_pack_assemble
from .paging import handle_attention_set, handle_page_in, handle_page_out_request, handle_state_set
from .pressure_report import pressure_report
from .resources import INDEXED
from .schemas import (
    AttentionIn,
    ContextPackIn,
    ContextPackOut,
    ContextPackRecordOut,
    HandleOut,
    HandleStateIn,
    PageInOut,
    PageOutOut,
    PressureOut,
    context_pack_out,
    pressure_out,
)

router = Router(tags=["context"])


def _handle(request: ApiRequest, handle_id: UUID) -> ContextHandle:
    handle = ContextHandle.objects.filter(
        pk=handle_id, session__organization=request.organization
    ).first()
    if handle is None:
        raise NotFound("No such handle.")
    return handle


@router.post("/sessions/{session_id}/end", response=SessionOut, summary="End the session")
def session_end(request: ApiRequest, session_id: str):
    session = session_get(organization=request.organization, session_id=session_id)
    cost = session_cost(session)  # ending records no call: read before the write
    ended = session_end_service(session=session, actor=request_actor(request))
    # An ended session has no open frame, so no top of its stack to read after the commit.
    return session_body_with_top(ended, None, cost)


@router.post(
    "/sessions/{session_id}/context-pack",
    response=ContextPackOut,
    summary="Assemble a context pack within a budget",
)
def context_pack_create(request: ApiRequest, session_id: UUID, payload: ContextPackIn):
    session = session_get(organization=request.organization, session_id=session_id)
    frame = None
    if payload.frame_id is not None:
        frame = Frame.objects.filter(pk=payload.frame_id, session=session).first()
        if frame is None:
            raise NotFound("No such frame in this session.")
    pack = context_pack_assemble(
        session=session,
        frame=frame,
        budget_tokens=payload.budget_tokens,
        query=payload.query,
        include_handles=[str(h) for h in payload.include_handles],
        exclude_handles=[str(h) for h in payload.exclude_handles],
        min_compaction=payload.min_compaction,
        reader_authority=request.agent.authority,
        actor=request_actor(request),
    )
    return context_pack_out(pack)


class PackListFilters(Schema):
    limit: int = Field(20, ge=1, le=100)


@router.get(
    "/sessions/{session_id}/context-packs",
    response=list[ContextPackRecordOut],
    summary="Recent context packs, newest first",
)
def context_pack_list(request: ApiRequest, session_id: UUID, filters: Query[PackListFilters]):
    session = session_get(organization=request.organization, session_id=session_id)
    return list(context_packs_newest_first(session)[: filters.limit])


@router.get(
    "/sessions/{session_id}/pressure",
    response=PressureOut,
    summary="Window pressure of the top frame",
)
def pressure_get(request: ApiRequest, session_id: UUID):
    session = session_get(organization=request.organization, session_id=session_id)
    report = pressure_report(session=session)
    return pressure_out(report, eviction_policy=session.eviction_policy)


@router.post(
    "/handles/{handle_id}/page-out",
    response={202: PageOutOut},
    summary="Queue a page-out (summary, then indexed)",
)
def handle_page_out_create(request: ApiRequest, handle_id: UUID):
    handle = handle_page_out_request(
        handle=_handle(request, handle_id), actor=request_actor(request)
    )
    return Status(202, {"status": "queued", "handle": handle})


class PageInFilters(Schema):
    mode: str = Field("summary", pattern="^(summary|full)$")


@router.post(
    "/handles/{handle_id}/page-in",
    response=PageInOut,
    summary="Bring a handle back: its summary or full content",
)
def handle_page_in_create(request: ApiRequest, handle_id: UUID, filters: Query[PageInFilters]):
    page = handle_page_in(
        handle=_handle(request, handle_id), mode=filters.mode, actor=request_actor(request)
    )
    return {
        "mode": page.mode,
        "content": page.content,
        "tokens": page.tokens,
        "handle": page.handle,
    }


@router.post(
    "/handles/{handle_id}/attention", response=HandleOut, summary="Set attention (above 1 is hot)"
)
def handle_attention_create(request: ApiRequest, handle_id: UUID, payload: AttentionIn):
    return handle_attention_set(
        handle=_handle(request, handle_id), weight=payload.weight, actor=request_actor(request)
    )


@router.post(
    "/handles/{handle_id}/state",
    response={200: HandleOut, 202: PageOutOut},
    summary="An explicit lifecycle transition",
)
def handle_state_create(request: ApiRequest, handle_id: UUID, payload: HandleStateIn):
    handle = handle_state_set(
        handle=_handle(request, handle_id), to=payload.to, actor=request_actor(request)
    )
    if payload.to == INDEXED and handle.state != INDEXED:
        return Status(202, {"status": "queued", "handle": handle})
    return Status(200, handle)
