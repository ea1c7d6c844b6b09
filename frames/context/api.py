"""Ending a session, context packs, window pressure and paging:
``/sessions/{id}/end``, ``/sessions/{id}/context-pack``, ``/sessions/{id}/pressure``,
``/handles/{id}/...``."""

from uuid import UUID

from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from contextops import tracing
from contextops.actors import request_actor
from contextops.collector import cyclic_collector_paused
from contextops.errors import NotFound
from contextops.http import ApiRequest, prebuilt_json_response
from contextops.pages import Offset
from frames.api import session_body_with_top
from frames.models import ContextHandle
from frames.schemas import SessionOut
from frames.selectors import (
    context_packs_newest_first,
    frame_get,
    session_cost,
    session_frame_get,
    session_get,
)

from .annotations import handle_annotate
from .compaction import frame_compact
from .lifecycle import resource_map_offered, session_persist
from .lifecycle import session_end as session_end_service
from .pack import context_pack_assemble
from .paging import handle_attention_set, handle_page_in, handle_page_out_request, handle_state_set
from .pressure_report import pressure_report
from .resources import INDEXED
from .schemas import (
    AnnotationIn,
    AttentionIn,
    BootstrapOut,
    ContextPackIn,
    ContextPackOut,
    ContextPackRecordOut,
    FrameCompactIn,
    FrameCompactOut,
    HandleOut,
    HandleStateIn,
    PackDiffOut,
    PageInOut,
    PageOutOut,
    PressureOut,
    ResourceMapOut,
    context_pack_out,
    pressure_out,
)
from .selectors import context_pack_diff, context_pack_get

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
    "/sessions/{session_id}/persist",
    response=ResourceMapOut,
    summary="Save the map of the session's resources for the agent's next session",
)
def session_persist_create(request: ApiRequest, session_id: str):
    session = session_get(organization=request.organization, session_id=session_id)
    return session_persist(session=session, actor=request_actor(request))


@router.get(
    "/sessions/{session_id}/bootstrap",
    response=BootstrapOut,
    summary="The resource map an earlier session of this agent left",
)
def session_bootstrap_get(request: ApiRequest, session_id: str):
    session = session_get(organization=request.organization, session_id=session_id)
    offer = resource_map_offered(session=session, actor=request_actor(request))
    return {
        "session_id": offer.session.pk,
        "lifecycle_state": offer.session.lifecycle_state,
        "resource_map": offer.resource_map,
    }


@router.post(
    "/sessions/{session_id}/context-pack",
    response=ContextPackOut,
    summary="Assemble a context pack within a budget",
)
def context_pack_create(request: ApiRequest, session_id: UUID, payload: ContextPackIn):
    session = session_get(organization=request.organization, session_id=session_id)
    frame = None
    if payload.frame_id is not None:
        frame = session_frame_get(session=session, frame_id=payload.frame_id)
    searched = {"gen_ai.operation.name": "search_memory", "gen_ai.conversation.id": str(session.pk)}
    # The pack and its answer make tens of thousands of objects, none in a cycle: they are
    # let go before the collector is back, which then finds none of them to scan.
    with tracing.span("search_memory", searched) as current, cyclic_collector_paused():
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
            as_of_seq=payload.as_of_seq,
            valid_at=payload.valid_at,
        )
        body = context_pack_out(pack)
        tracing.span_set(
            current, tracing.memory_search_attributes(session_id=session.pk, pack=body)
        )
        response = prebuilt_json_response(request, body)
        del pack, body
    return response


class PackListFilters(Schema):
    limit: int = Field(20, ge=1, le=100)
    offset: Offset = 0


@router.get(
    "/sessions/{session_id}/context-packs",
    response=list[ContextPackRecordOut],
    summary="Recent context packs, newest first",
)
def context_pack_list(request: ApiRequest, session_id: UUID, filters: Query[PackListFilters]):
    session = session_get(organization=request.organization, session_id=session_id)
    packs = context_packs_newest_first(session)
    # A bare array, as before paging (docs/api.md#compatibility): the next page is at
    # offset + limit while a page comes back full.
    return list(packs[filters.offset : filters.offset + filters.limit])


@router.get(
    "/context-packs/{pack_id}",
    response=ContextPackRecordOut,
    summary="One recorded context pack",
)
def context_pack_record_get(request: ApiRequest, pack_id: str):
    """The organization's recorded pack, as the list shows it; 404 for any other id."""
    return context_pack_get(organization=request.organization, pack_id=pack_id)


@router.get(
    "/context-packs/{a}/diff/{b}",
    response=PackDiffOut,
    summary="Why a pack changed: items added, dropped and changed, each with its reason",
)
def context_pack_diff_get(request: ApiRequest, a: str, b: str):
    """Two recorded packs of one session (422 ``packs_of_other_sessions`` otherwise): the
    items ``b`` added, dropped and shows differently from ``a``, each with its reason,
    and the budget figures of both."""
    return context_pack_diff(organization=request.organization, a_id=a, b_id=b).as_dict()


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


@router.post(
    "/frames/{frame_id}/compact",
    response=FrameCompactOut,
    summary="Compact the frame's handles toward a token target",
)
def frame_compact_create(request: ApiRequest, frame_id: UUID, payload: FrameCompactIn):
    return frame_compact(
        frame=frame_get(organization=request.organization, frame_id=frame_id),
        target_tokens=payload.target_tokens,
        strategy=payload.strategy,
        message_count=payload.message_count,
        actor=request_actor(request),
    )


@router.post(
    "/handles/{handle_id}/annotations",
    response={201: HandleOut},
    summary="Leave a note on a handle",
)
def handle_annotation_create(request: ApiRequest, handle_id: UUID, payload: AnnotationIn):
    handle = handle_annotate(
        handle=_handle(request, handle_id), note=payload.note, actor=request_actor(request)
    )
    return Status(201, handle)
