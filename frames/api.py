"""Sessions, frames, budgets, handles, resume and the event log: ``/sessions``, ``/frames``."""

from datetime import date, datetime
from decimal import Decimal
from typing import Literal
from uuid import UUID

from ninja import Path, Query, Router, Schema
from ninja.responses import Status
from pydantic import Field, field_validator

from contextops.actors import request_actor
from contextops.errors import Conflict, NotFound
from contextops.http import ApiRequest
from contextops.pages import Offset, page_body

from . import projections, selectors
from .costs import CostTotal
from .models import Frame, Session
from .pressure import LEVELS
from .schemas import (
    CallListOut,
    EventOut,
    FrameDetailOut,
    FrameHandleOut,
    FrameIn,
    FrameListOut,
    FrameOut,
    HandleIn,
    PopIn,
    ReserveIn,
    ResultsIn,
    ResumeOut,
    SessionAtOut,
    SessionIn,
    SessionListOut,
    SessionOut,
    SessionPatchIn,
    UsageIn,
    call_out,
    frame_out,
    session_out,
)
from .services import expiry, handles, sessions, stack, usage

router = Router(tags=["sessions and frames"])


actor_of = request_actor


def session_body(session: Session) -> dict:
    """The ``SessionOut`` answer: the session with its pressure and the top of its stack."""
    return session_body_with_top(session, selectors.top_frame(session))


def session_body_with_top(
    session: Session, top: Frame | None, cost: CostTotal | None = None
) -> dict:
    """``session_body`` for a caller that has read the top of the stack already (the
    sessions list reads a whole page's in one query), and maybe the cost (a write reads
    it before its commit: nothing is read after it)."""
    return session_out(
        session,
        pressure=selectors.pressure_of(session, top),
        top_frame_id=top.pk if top is not None else None,
        cost=selectors.session_cost(session) if cost is None else cost,
    )


@router.post("/sessions", response={201: SessionOut}, summary="Start a session")
def session_create(request: ApiRequest, payload: SessionIn):
    session = sessions.session_create(
        organization=request.organization,
        agent=request.agent,
        identity=payload.identity.model_dump(exclude_defaults=True),
        environment=payload.environment.model_dump(exclude_defaults=True),
        context_window_tokens=payload.context_window_tokens,
        model=payload.model,
        title=payload.title,
        compaction_threshold=payload.compaction_threshold,
        eviction_policy=payload.eviction_policy,
        actor=actor_of(request),
    )
    # A new session has no frame and no call yet: its answer needs no read after the commit.
    return Status(201, session_body_with_top(session, None, CostTotal(Decimal(0))))


class SessionFilters(Schema):
    search: str = Field("", max_length=200)
    status: Literal[tuple(Session.Lifecycle.values)] | None = Field(  # type: ignore[valid-type]
        None, description="The lifecycle state, e.g. ended"
    )
    pressure: Literal[LEVELS] | None = Field(  # type: ignore[valid-type]
        None, description="The level the session's gauge shows (the top of its stack)"
    )
    agent: str = Field("", max_length=200, description="The agent's name")
    since: datetime | date | None = Field(
        None, description="Started at or after; a date alone: from the start of that day"
    )
    until: datetime | date | None = Field(
        None, description="Started before; a date alone: through the end of that day"
    )
    order: Literal["newest", "oldest", "last_activity", "tokens", "calls"] = "newest"
    limit: int = Field(50, ge=1, le=200)
    offset: Offset = 0

    @field_validator("since", "until", mode="before")
    @classmethod
    def _date_alone(cls, value: object) -> object:
        """``2026-11-27`` is that day (``selectors.day_start``), not its first instant."""
        if isinstance(value, str) and len(value) == 10:
            try:
                return date.fromisoformat(value)
            except ValueError:
                return value
        return value


@router.get(
    "/sessions",
    response=SessionListOut,
    summary="The organization's sessions, filtered and ordered (newest first by default)",
)
def session_list(request: ApiRequest, filters: Query[SessionFilters]):
    found = selectors.session_list(
        organization=request.organization,
        search=filters.search,
        status=filters.status or "",
        pressure=filters.pressure or "",
        agent=filters.agent,
        since=filters.since,
        until=filters.until,
        order=filters.order,
    )
    count = found.count()
    page = selectors.top_frames(found, slice(filters.offset, filters.offset + filters.limit))
    costs = selectors.sessions_costs([session.pk for session, _ in page])
    items = [session_body_with_top(session, top, costs[session.pk]) for session, top in page]
    return page_body(items, count=count, offset=filters.offset, limit=filters.limit)


@router.get(
    "/sessions/{session_id}",
    response=SessionOut,
    summary="A session with its pressure and usage totals",
)
def session_get(request: ApiRequest, session_id: str):
    return session_body(
        selectors.session_get(organization=request.organization, session_id=session_id)
    )


@router.patch(
    "/sessions/{session_id}",
    response=SessionOut,
    summary="Change a running session's eviction policy",
)
def session_patch(request: ApiRequest, session_id: str, payload: SessionPatchIn) -> dict:
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    cost = selectors.session_cost(session)  # a policy changes no cost: read before the write
    updated = sessions.session_eviction_policy_set(
        session=session, policy=payload.eviction_policy, actor=actor_of(request)
    )
    return session_body_with_top(updated.session, updated.top, cost)


@router.put(
    "/sessions/{session_id}/identity",
    response={409: dict},
    summary="Identity is read-only once set",
)
def session_identity_put(request: ApiRequest, session_id: str):
    selectors.session_get(organization=request.organization, session_id=session_id)
    raise Conflict(
        "identity_read_only",
        "A session's identity is set when it starts and cannot change afterwards.",
    )


@router.post(
    "/sessions/{session_id}/frames",
    response={201: FrameOut},
    summary="Push a frame (root or child)",
)
def frame_push(request: ApiRequest, session_id: str, payload: FrameIn):
    frame = stack.frame_push(
        organization=request.organization,
        session=session_id,
        parent=payload.parent_frame_id,
        goal=payload.goal,
        inputs=payload.inputs,
        budget_total=payload.budget.total,
        max_subframe_depth=payload.budget.max_subframe_depth,
        actor=actor_of(request),
    )
    return Status(201, frame_out(frame))


class FrameFilters(Schema):
    limit: int = Field(200, ge=1, le=1000)
    offset: Offset = 0
    status: Literal[tuple(Frame.Status.values)] | None = Field(  # type: ignore[valid-type]
        None, description="That status's frames alone"
    )


@router.get(
    "/sessions/{session_id}/frames",
    response=FrameListOut,
    summary="The session's frames in the order they were pushed",
)
def frame_list(request: ApiRequest, session_id: str, filters: Query[FrameFilters]):
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    frames, count = selectors.frame_list(
        session=session, limit=filters.limit, offset=filters.offset, status=filters.status or ""
    )
    items = [frame_out(frame) for frame in frames]
    return page_body(items, count=count, offset=filters.offset, limit=filters.limit)


@router.get(
    "/frames/{frame_id}", response=FrameDetailOut, summary="A frame with its budget and cost"
)
def frame_get(request: ApiRequest, frame_id: str):
    frame = selectors.frame_get(organization=request.organization, frame_id=frame_id)
    if expiry.frame_suspension_expire_if_overdue(frame):  # a read applies an expiry at once
        frame = selectors.frame_get(organization=request.organization, frame_id=frame_id)
    cost = selectors.frame_cost(frame)
    return {
        **frame_out(frame),
        "cost_usd": cost.usd_float,
        "unpriced_models": list(cost.unpriced_models),
    }


@router.get(
    "/frames/{frame_id}/ancestry",
    response=list[FrameOut],
    summary="The frame's ancestors and itself, root first",
)
def frame_ancestry(request: ApiRequest, frame_id: str):
    frame = selectors.frame_get(organization=request.organization, frame_id=frame_id)
    return [frame_out(f) for f in selectors.frame_ancestry(frame)]


class ChildrenFilters(Schema):
    limit: int = Field(200, ge=1, le=1000)
    offset: Offset = 0


@router.get(
    "/frames/{frame_id}/children", response=list[FrameOut], summary="One page of a frame's children"
)
def frame_children(request: ApiRequest, frame_id: str, filters: Query[ChildrenFilters]):
    frame = selectors.frame_get(organization=request.organization, frame_id=frame_id)
    children = selectors.frame_children(
        frame=frame, session=frame.session, limit=filters.limit, offset=filters.offset
    )
    return [frame_out(f) for f in children]


@router.post(
    "/frames/{frame_id}/reserve", response=FrameOut, summary="Reserve tokens for a purpose"
)
def frame_reserve(request: ApiRequest, frame_id: str, payload: ReserveIn):
    frame = selectors.frame_get(organization=request.organization, frame_id=frame_id)
    return frame_out(
        stack.frame_reserve(
            frame=frame, purpose=payload.purpose, amount=payload.amount, actor=actor_of(request)
        )
    )


@router.post("/frames/{frame_id}/usage", response=FrameOut, summary="Record one model call's usage")
def usage_record(request: ApiRequest, frame_id: str, payload: UsageIn):
    recorded = usage.usage_record(
        organization=request.organization,
        frame=frame_id,
        actor=actor_of(request),
        **payload.model_dump(),
    )
    assert recorded.frame is not None  # charged to this frame, read as it stood at the commit
    return frame_out(recorded.frame)


@router.post(
    "/frames/{frame_id}/results",
    response=FrameOut,
    summary="Record results an open frame has produced so far",
)
def frame_results_add(request: ApiRequest, frame_id: str, payload: ResultsIn):
    frame = selectors.frame_get(organization=request.organization, frame_id=frame_id)
    return frame_out(
        stack.frame_results_add(
            frame=frame, result_refs=payload.result_refs, actor=actor_of(request)
        )
    )


@router.post(
    "/frames/{frame_id}/pop",
    response=FrameOut,
    summary="Pop a frame and settle its budget with the parent",
)
def frame_pop(request: ApiRequest, frame_id: str, payload: PopIn):
    return frame_out(
        stack.frame_pop(
            organization=request.organization,
            frame=frame_id,
            status=payload.status,
            result_refs=payload.result_refs,
            actor=actor_of(request),
            failure_reason=payload.failure_reason or "",
        )
    )


@router.post(
    "/frames/{frame_id}/handles", response={201: FrameHandleOut}, summary="Add a context handle"
)
def handle_add(request: ApiRequest, frame_id: str, payload: HandleIn):
    frame = selectors.frame_get(organization=request.organization, frame_id=frame_id)
    handle = handles.handle_add(
        frame=frame,
        kind=payload.kind,
        priority=payload.priority,
        content=payload.content or "",
        ref=payload.ref or "",
        category=payload.category,
        tool_call_id=payload.tool_call_id,
        estimated_tokens=payload.estimated_tokens,
        state=payload.state,
        actor=actor_of(request),
    )
    return Status(201, handle)


@router.get(
    "/sessions/{session_id}/resume",
    response=ResumeOut,
    summary="Rebuild the frame stack and pending work",
    description="Also appends `actor.resumed` to the session's event log: who resumed, when, "
    "at which frame, with how much pending work.",
)
def session_resume(request: ApiRequest, session_id: str):
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    state = selectors.session_resume_state(session)
    sessions.actor_resumed_record(
        session=session,
        current_frame=state.current_frame,
        pending=len(state.pending_work),
        actor=actor_of(request),
    )
    return {
        "current_frame": frame_out(state.current_frame) if state.current_frame else None,
        "frame_stack": [frame_out(f) for f in state.frame_stack],
        "pending_work": [vars(p) for p in state.pending_work],
        "recovery_summary": state.recovery_summary,
    }


@router.get(
    "/sessions/{session_id}/at/{seq}",
    response=SessionAtOut,
    summary="The session as it stood after event seq, rebuilt from its event log",
)
def session_at(request: ApiRequest, session_id: str, seq: int = Path(..., ge=0, le=2**62)):
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    if seq > session.last_event_seq:
        raise NotFound(f"The session has no event {seq}; its newest is {session.last_event_seq}.")
    at = projections.session_at(session, seq)
    return {
        "session_id": session.pk,
        "seq": at.seq,
        "last_event_seq": session.last_event_seq,
        "frames": at.frames,
        "top_frame_id": at.top_frame_id,
        "pressure": {"level": at.pressure_level, "utilization": at.utilization},
        "usage_totals": at.usage_totals,
    }


class CallFilters(Schema):
    limit: int = Field(100, ge=1, le=500)
    offset: Offset = 0
    frame_id: UUID | None = Field(None, description="That frame's calls alone")


@router.get(
    "/sessions/{session_id}/calls",
    response=CallListOut,
    summary="The session's model calls in order: timing, model, tokens and cost",
)
def call_list(request: ApiRequest, session_id: str, filters: Query[CallFilters]):
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    frame = None
    if filters.frame_id is not None:
        frame = selectors.session_frame_get(session=session, frame_id=filters.frame_id)
    calls, count = selectors.call_list(
        session=session, limit=filters.limit, offset=filters.offset, frame=frame
    )
    prices = selectors.price_table()
    items = [call_out(call, selectors.usage_cost(call, prices)) for call in calls]
    return page_body(items, count=count, offset=filters.offset, limit=filters.limit)


class EventFilters(Schema):
    after: int = Field(0, ge=0, le=2**62)
    limit: int = Field(500, ge=1, le=1000)
    frame_id: UUID | None = None


@router.get(
    "/sessions/{session_id}/events",
    response=list[EventOut],
    summary="The session's events in order",
)
def event_list(request: ApiRequest, session_id: str, filters: Query[EventFilters]):
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    frame = None
    if filters.frame_id is not None:
        frame = selectors.frame_get(organization=request.organization, frame_id=filters.frame_id)
    return selectors.event_list(
        session=session, after=filters.after, limit=filters.limit, frame=frame
    )
