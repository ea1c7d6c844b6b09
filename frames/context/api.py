"""Context packs, window pressure and paging: ``/sessions/{id}/context-pack``, ``/handles/{id}/...``."""

from uuid import UUID

from django.db import transaction
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from contextops.actors import request_actor as _actor
from contextops.errors import NotFound
from frames import selectors
from frames.api import session_body
from frames.models import ContextHandle, Frame, Session
from frames.schemas import SessionOut
from frames.selectors import session_pressure, top_frame

from . import lifecycle
from .eviction import eviction_candidates
from .pack import context_pack_assemble, context_pack_body
from .paging import handle_attention_set, handle_page_in, handle_page_out_request, handle_state_set
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
)

router = Router(tags=["context"])


def _session(request, session_id: UUID) -> Session:
    session = Session.objects.filter(pk=session_id, organization=request.organization).first()
    if session is None:
        raise NotFound("No such session.")
    return session


def _handle(request, handle_id: UUID) -> ContextHandle:
    handle = ContextHandle.objects.filter(
        pk=handle_id, session__organization=request.organization
    ).first()
    if handle is None:
        raise NotFound("No such handle.")
    return handle


@router.post("/sessions/{session_id}/end", response=SessionOut, summary="End the session")
def session_end(request, session_id: str):
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    with transaction.atomic():
        return session_body(lifecycle.session_end(session=session, actor=_actor(request)))


@router.post(
    "/sessions/{session_id}/context-pack",
    response=ContextPackOut,
    summary="Assemble a context pack within a budget",
)
def context_pack_create(request, session_id: UUID, payload: ContextPackIn):
    session = _session(request, session_id)
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
        actor=_actor(request),
    )
    return context_pack_body(pack)


class PackListFilters(Schema):
    limit: int = Field(20, ge=1, le=100)


@router.get(
    "/sessions/{session_id}/context-packs",
    response=list[ContextPackRecordOut],
    summary="Recent context packs, newest first",
)
def context_pack_list(request, session_id: UUID, filters: Query[PackListFilters]):
    session = _session(request, session_id)
    return list(selectors.context_packs_newest_first(session)[: filters.limit])


@router.get(
    "/sessions/{session_id}/pressure",
    response=PressureOut,
    summary="Window pressure of the top frame",
)
def pressure_get(request, session_id: UUID):
    session = _session(request, session_id)
    frame = top_frame(session)
    pressure = session_pressure(session)
    candidates = eviction_candidates(session=session, frame=frame) if frame is not None else []
    return {
        "level": pressure.level,
        "utilization": round(pressure.utilization, 4),
        "occupancy_tokens": pressure.occupancy_tokens,
        "context_window_tokens": pressure.window_tokens,
        "frame_id": str(frame.pk) if frame else None,
        "eviction_policy": session.eviction_policy,
        "recommended_actions": pressure.recommended_actions,
        "eviction_candidates": [
            {
                "handle_id": c.id,
                "kind": c.kind,
                "category": c.category,
                "priority": c.priority,
                "state": c.state,
                "attention_weight": c.attention_weight,
                "estimated_tokens": c.estimated_tokens,
                "last_access_at": c.last_access_at,
            }
            for c in candidates
        ],
    }


@router.post(
    "/handles/{handle_id}/page-out",
    response={202: PageOutOut},
    summary="Queue a page-out (summary, then indexed)",
)
def handle_page_out_create(request, handle_id: UUID):
    handle = _handle(request, handle_id)
    with transaction.atomic():
        handle = handle_page_out_request(handle=handle, actor=_actor(request))
    return Status(202, {"status": "queued", "handle": handle})


class PageInFilters(Schema):
    mode: str = Field("summary", pattern="^(summary|full)$")


@router.post(
    "/handles/{handle_id}/page-in",
    response=PageInOut,
    summary="Bring a handle back: its summary or full content",
)
def handle_page_in_create(request, handle_id: UUID, filters: Query[PageInFilters]):
    page = handle_page_in(
        handle=_handle(request, handle_id), mode=filters.mode, actor=_actor(request)
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
def handle_attention_create(request, handle_id: UUID, payload: AttentionIn):
    return handle_attention_set(
        handle=_handle(request, handle_id), weight=payload.weight, actor=_actor(request)
    )


@router.post(
    "/handles/{handle_id}/state",
    response={200: HandleOut, 202: PageOutOut},
    summary="An explicit lifecycle transition",
)
def handle_state_create(request, handle_id: UUID, payload: HandleStateIn):
    handle = _handle(request, handle_id)
    with transaction.atomic():
        handle = handle_state_set(handle=handle, to=payload.to, actor=_actor(request))
    if payload.to == INDEXED and handle.state != INDEXED:
        return Status(202, {"status": "queued", "handle": handle})
    return Status(200, handle)
