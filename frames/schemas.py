"""Schemas of the session, frame, handle, resume and event endpoints."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Schema
from pydantic import Field, model_validator

from contextops.bodies import BodyIn
from contextops.pages import Page

from .budget import MAX_SUBFRAME_DEPTH
from .costs import CostTotal
from .models import FAILURE_REASON_MAX, ContextHandle, Frame, Session

MAX_BUDGET = 1_000_000_000


class IdentityIn(BodyIn):
    user_name: str = Field("", max_length=200)
    user_id: str = Field("", max_length=200)
    authority: str = Field("", max_length=64)
    department: str = Field("", max_length=200)
    organization: str = Field("", max_length=200)
    permissions: list[str] = Field(default_factory=list, max_length=200)


class SessionEnvironmentIn(BodyIn):
    timezone: str = Field("", max_length=64, description="An IANA name, e.g. Europe/Paris")
    location: str = Field("", max_length=200)
    external_data: dict[str, Any] = Field(default_factory=dict)


class SessionIn(BodyIn):
    identity: IdentityIn = Field(default_factory=lambda: IdentityIn.model_validate({}))
    environment: SessionEnvironmentIn = Field(
        default_factory=lambda: SessionEnvironmentIn.model_validate({})
    )
    context_window_tokens: int = Field(200_000, ge=1_000, le=10_000_000)
    model: str = Field("", max_length=120)
    title: str = Field("", max_length=300)
    compaction_threshold: float = Field(0.9, gt=0, le=1)
    eviction_policy: Literal["lru", "size_first", "keep_relational", "keep_technical"] = "lru"


class SessionPressureOut(Schema):
    level: str
    utilization: float


class UsageTotalsOut(Schema):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class SessionSourceOut(Schema):
    format: str
    file_name: str
    source_session_id: str
    tool_version: str | None


class SessionOut(Schema):
    id: UUID
    title: str
    agent: str | None
    identity: dict[str, Any]
    environment: dict[str, Any]
    model: str
    context_window_tokens: int
    compaction_threshold: float
    eviction_policy: str
    lifecycle_state: str
    pressure: SessionPressureOut
    top_frame_id: UUID | None
    usage_totals: UsageTotalsOut
    effective_tokens: int = Field(
        ...,
        description="What the session's model calls cost, in tokens: input and output at full "
        "price, cache writes at 1.25x, cache reads at a tenth. A cost figure: window "
        "occupancy and the compaction trigger use the full counts.",
    )
    cost_usd: float = Field(
        ...,
        description="What the session's model calls cost in US dollars, from the price "
        "table; calls on a model without a price are left out (see unpriced_models).",
    )
    unpriced_models: list[str] = Field(
        ..., description="Models of this session's calls that have no price: unknown cost."
    )
    api_calls: int
    last_event_seq: int
    created_at: datetime
    started_at: datetime = Field(
        ...,
        description="When the work began: an imported transcript's first timestamp, "
        "else when the session was created.",
    )
    source: SessionSourceOut | None = Field(
        ..., description="Where an imported session came from; null for one an agent started."
    )
    ended_at: datetime | None
    dashboard_url: str


class SessionListOut(Page[SessionOut]):
    """A page of sessions."""


class BudgetIn(BodyIn):
    total: int = Field(..., ge=0, le=MAX_BUDGET)
    max_subframe_depth: int | None = Field(None, ge=0, le=MAX_SUBFRAME_DEPTH)


class FrameIn(BodyIn):
    parent_frame_id: UUID | None = None
    goal: str = Field(..., min_length=1, max_length=10_000)
    inputs: dict[str, Any] = Field(default_factory=dict)
    budget: BudgetIn


class BudgetOut(Schema):
    total: int
    used: int
    reserved: int
    subcall_allocation: int
    available: int
    overrun: int = Field(
        ...,
        description="How far the frame went past its total: "
        "max(0, used + reserved + subcall_allocation - total).",
    )
    max_subframe_depth: int
    reservations: dict[str, int]


class FrameOut(Schema):
    id: UUID
    session_id: UUID
    parent_frame_id: UUID | None
    depth: int
    goal: str
    inputs: dict[str, Any]
    status: str
    failure_reason: str | None = Field(
        ...,
        description=(
            "Why the frame failed: the agent's own words given with its pop, or the "
            'system\'s ("suspension_expired"); null otherwise.'
        ),
    )
    budget: BudgetOut
    result_refs: list[Any]
    children_count: int
    pressure_level: str
    created_at: datetime
    completed_at: datetime | None
    dashboard_url: str


class FrameDetailOut(FrameOut):
    cost_usd: float = Field(
        ...,
        description="What the frame's model calls and all its descendants' cost in US dollars; "
        "calls on a model without a price are left out (see unpriced_models).",
    )
    unpriced_models: list[str]


class ReserveIn(BodyIn):
    purpose: str = Field(..., min_length=1, max_length=200)
    amount: int = Field(..., ge=1, le=MAX_BUDGET)


class UsageIn(BodyIn):
    input_tokens: int = Field(..., ge=0, le=MAX_BUDGET)
    output_tokens: int = Field(..., ge=0, le=MAX_BUDGET)
    cache_creation_input_tokens: int = Field(0, ge=0, le=MAX_BUDGET)
    cache_read_input_tokens: int = Field(0, ge=0, le=MAX_BUDGET)
    model: str = Field("", max_length=120)
    message_id: str = Field("", max_length=200)
    started_at: datetime | None = Field(None, description="When the call was sent")
    latency_ms: int | None = Field(
        None, ge=0, le=86_400_000, description="How long its answer took, in milliseconds"
    )


class PopIn(BodyIn):
    status: Literal["completed", "failed"]
    result_refs: list[Any] = Field(default_factory=list, max_length=1000)
    failure_reason: str | None = Field(
        None,
        max_length=FAILURE_REASON_MAX,
        description="Why the frame failed (with `failed` only), shown on its page.",
    )


class ResultsIn(BodyIn):
    result_refs: list[Any] = Field(..., min_length=1, max_length=1000)


class HandleIn(BodyIn):
    kind: Literal[tuple(ContextHandle.Kind.values)]  # type: ignore[valid-type]
    priority: Literal[tuple(ContextHandle.Priority.values)] = "medium"  # type: ignore[valid-type]
    content: str | None = Field(None, max_length=1_000_000)
    ref: str | None = Field(None, max_length=2000)
    category: str = Field("", max_length=40)
    tool_call_id: str = Field("", max_length=200)
    estimated_tokens: int | None = Field(None, ge=0, le=MAX_BUDGET)
    # "cold": discovered, not loaded (docs/concepts.md#resources): it costs the window
    # nothing until paged in.
    state: Literal["loaded", "cold"] = "loaded"

    @model_validator(mode="after")
    def _content_or_ref(self) -> "HandleIn":
        # An empty content (a tool's empty output) is content; neither at all is no handle.
        if self.content is None and self.ref is None:
            raise ValueError("A handle needs its content or a ref (what it points to).")
        return self


class FrameHandleOut(Schema):
    id: UUID
    frame_id: UUID
    kind: str
    priority: str
    category: str
    ref: str
    tool_call_id: str
    estimated_tokens: int
    state: str
    attention_weight: float
    created_at: datetime


class PendingWorkOut(Schema):
    frame_id: str
    work_type: str
    description: str


class RecoverySummaryOut(Schema):
    frames_recovered: int
    pending_work_items: int
    last_event_seq: int
    recovery_time_ms: float


class ResumeOut(Schema):
    current_frame: FrameOut | None
    frame_stack: list[FrameOut]
    pending_work: list[PendingWorkOut]
    recovery_summary: RecoverySummaryOut


class EventOut(Schema):
    seq: int
    type: str
    frame_id: UUID | None
    actor: str
    payload: dict[str, Any]
    created_at: datetime


def frame_out(frame: Frame) -> dict[str, Any]:
    return {
        "id": frame.pk,
        "session_id": frame.session_id,
        "parent_frame_id": frame.parent_id,
        "depth": frame.depth,
        "goal": frame.goal,
        "inputs": frame.inputs,
        "status": frame.status,
        "failure_reason": frame.failure_reason or None,
        "budget": {
            "total": frame.budget_total,
            "used": frame.budget_used,
            "reserved": frame.budget_reserved,
            "subcall_allocation": frame.subcall_allocation,
            "available": frame.budget_available,
            "overrun": frame.budget.overrun,
            "max_subframe_depth": frame.max_subframe_depth,
            "reservations": frame.reservations,
        },
        "result_refs": frame.result_refs,
        "children_count": frame.children_count,
        "pressure_level": frame.pressure_level,
        "created_at": frame.created_at,
        "completed_at": frame.completed_at,
        "dashboard_url": f"/frames/{frame.pk}/",
    }


def session_out(session: Session, *, pressure, top_frame_id, cost: CostTotal) -> dict[str, Any]:
    return {
        "id": session.pk,
        "title": session.title,
        "agent": session.agent.name if session.agent is not None else None,
        "identity": session.identity,
        "environment": session.environment,
        "model": session.model,
        "context_window_tokens": session.context_window_tokens,
        "compaction_threshold": session.compaction_threshold,
        "eviction_policy": session.eviction_policy,
        "lifecycle_state": session.lifecycle_state,
        "pressure": {"level": pressure.level, "utilization": round(pressure.utilization, 4)},
        "top_frame_id": top_frame_id,
        "usage_totals": session.usage_totals,
        "effective_tokens": session.effective_tokens,
        "cost_usd": cost.usd_float,
        "unpriced_models": list(cost.unpriced_models),
        "api_calls": session.api_calls_total,
        "last_event_seq": session.last_event_seq,
        "created_at": session.created_at,
        "started_at": session.started_at,
        "source": session.source or None,
        "ended_at": session.ended_at,
        "dashboard_url": f"/sessions/{session.pk}/",
    }


class SessionPatchIn(BodyIn):
    """What may change on a running session: its eviction policy
    (docs/concepts.md#eviction)."""

    eviction_policy: Literal["lru", "size_first", "keep_relational", "keep_technical"]


class BudgetAtOut(Schema):
    total: int
    used: int
    reserved: int
    subcall_allocation: int
    available: int
    overrun: int


class FrameAtOut(Schema):
    id: UUID
    parent_frame_id: UUID | None
    depth: int
    goal: str
    status: str
    failure_reason: str | None
    children_count: int
    budget: BudgetAtOut
    pressure_level: str
    occupancy_tokens: int


class SessionAtOut(Schema):
    session_id: UUID
    seq: int = Field(..., description="The last event applied")
    last_event_seq: int = Field(..., description="The session's newest event now")
    frames: list[FrameAtOut] = Field(..., description="Frames pushed up to seq, in push order")
    top_frame_id: UUID | None
    pressure: SessionPressureOut
    usage_totals: UsageTotalsOut


class CallOut(Schema):
    id: int
    frame_id: UUID | None
    started_at: datetime | None = Field(..., description="When the call was sent, if recorded")
    latency_ms: int | None
    recorded_at: datetime
    model: str
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cost_usd: float | None = Field(..., description="null: the model has no price")


class FrameListOut(Page[FrameOut]):
    """A page of a session's frames."""


class CallListOut(Page[CallOut]):
    """A page of a session's model calls."""


def call_out(call, cost) -> dict[str, Any]:
    return {
        "id": call.pk,
        "frame_id": call.frame_id,
        "started_at": call.started_at,
        "latency_ms": call.latency_ms,
        "recorded_at": call.created_at,
        "model": call.model,
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
        "cache_creation_input_tokens": call.cache_creation_input_tokens,
        "cache_read_input_tokens": call.cache_read_input_tokens,
        "cost_usd": float(round(cost, 6)) if cost is not None else None,
    }
