"""Schemas of the context-pack, pressure and paging endpoints, and the answers built
for them (``context_pack_out``, ``pressure_out``)."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Schema
from pydantic import AwareDatetime, Field

from contextops.bodies import BodyIn
from frames.models.context import SCORE_PARTS
from frames.strategies import FRAME, MAX_NAME_LENGTH, strategy_enum

from .annotations import NOTE_MAX_CHARS
from .compaction import MAX_MESSAGE_COUNT, MAX_TARGET_TOKENS
from .pack import ContextPack
from .packing import MIN_BUDGET, FactItem, PackedItem
from .pressure_report import PressureReport

CompactionLevel = Literal["none", "light", "moderate", "aggressive", "critical"]
HandleState = Literal["cold", "loaded", "hot", "indexed", "offline"]


class ContextPackIn(BodyIn):
    frame_id: UUID | None = None
    # Strict: "4000" is refused as a string, not read as a number. Under MIN_BUDGET the
    # service answers budget_too_small (with the minimum); the schema states that bound.
    budget_tokens: int = Field(
        ..., ge=0, le=10_000_000, strict=True, json_schema_extra={"minimum": MIN_BUDGET}
    )
    query: str = Field("", max_length=2000)
    include_handles: list[UUID] = Field(default_factory=list, max_length=1000)
    exclude_handles: list[UUID] = Field(default_factory=list, max_length=1000)
    min_compaction: CompactionLevel = "none"
    as_of_seq: int | None = Field(
        None,
        ge=1,
        le=2**62,
        strict=True,
        description="Replay: the pack as it would have been right after this event of the session.",
    )
    valid_at: AwareDatetime | None = Field(
        None,
        description="Valid time: the facts that held at this time instead of the current ones; the other sections as now.",
    )


class TokenSummaryOut(Schema):
    budget: int
    used: int
    remaining: int
    breakdown: dict[str, int]
    compaction_level: CompactionLevel


class ScoreOut(Schema):
    """Why an item ranks where it does: ``total`` is the sum of the parts (docs/retrieval.md)."""

    total: float
    priority: float
    lexical: float
    semantic: float
    recency: float
    attention: float
    neighbour: float = 0.0
    older: float = 0.0


class BreadcrumbOut(Schema):
    frame_id: str
    goal: str
    status: str
    depth: int
    tokens: int


class PackFactOut(Schema):
    id: str
    key: str
    value: object = None
    source: str = ""
    scope: str = ""
    is_constraint: bool = False
    text: str
    tokens: int
    form: str
    rank: int | None = None
    score: ScoreOut | None = None
    reason: str = ""
    older_than: str | None = None


class PackWorkingOut(Schema):
    key: str
    text: str
    tokens: int
    form: str
    rank: int | None = None
    score: ScoreOut | None = None
    reason: str = ""
    older_than: str | None = None


class SegmentOut(Schema):
    handle_id: str
    kind: str
    priority: str
    state: str
    form: str
    content: str
    tokens: int
    rank: int | None = None
    score: ScoreOut | None = None
    reason: str = ""
    older_than: str | None = None


class ResourceOut(Schema):
    handle_id: str
    name: str
    tokens: int


class DroppedOut(Schema):
    section: str
    id: str
    reason: str
    level: CompactionLevel
    tokens: int = 0
    rank: int | None = None
    score: ScoreOut | None = None
    older_than: str | None = None


class ContextPackOut(Schema):
    id: str
    session_id: str
    frame_id: str | None
    as_of_seq: int | None = None
    query: str
    brief_context: str
    breadcrumbs: list[BreadcrumbOut]
    facts: list[PackFactOut]
    working_set: list[PackWorkingOut]
    segments: list[SegmentOut]
    resources: list[ResourceOut]
    dropped: list[DroppedOut]
    token_summary: TokenSummaryOut
    format: Literal["verbose", "dense", "ultra_dense"]


class ContextPackRecordOut(Schema):
    id: UUID
    frame_id: UUID | None
    budget: int
    used: int
    level: CompactionLevel
    min_compaction: CompactionLevel
    breakdown: dict[str, int]
    included: list[dict]
    dropped: list[DroppedOut]
    query: str
    format: str | None = Field(
        None,
        description="verbose, dense or ultra_dense; null for a pack recorded before formats "
        "were kept.",
    )
    as_of_seq: int | None = None
    created_at: object

    @staticmethod
    def resolve_format(record: Any) -> str | None:
        return record.format or None


class EvictionCandidateOut(Schema):
    handle_id: str
    kind: str
    category: str
    priority: str
    state: str
    attention_weight: float
    estimated_tokens: int
    last_access_at: object


class PressureOut(Schema):
    level: Literal["low", "medium", "high", "critical"]
    utilization: float
    occupancy_tokens: int
    context_window_tokens: int
    frame_id: str | None
    eviction_policy: str
    recommended_actions: list[str]
    eviction_candidates: list[EvictionCandidateOut]


class NoteOut(Schema):
    note: str
    actor: str
    created_at: datetime


class HandleOut(Schema):
    id: UUID
    frame_id: UUID
    session_id: UUID
    kind: str
    priority: str
    category: str
    state: HandleState
    attention_weight: float
    estimated_tokens: int
    summary: str
    summary_tokens: int
    last_access_at: object
    notes: list[NoteOut]

    @staticmethod
    def resolve_notes(obj) -> list:
        """The notes read with the write that answers, else the handle's notes now."""
        notes = getattr(obj, "notes", None)
        return notes if notes is not None else list(obj.annotations.all())


class AnnotationIn(BodyIn):
    note: str = Field(..., min_length=1, max_length=NOTE_MAX_CHARS)


class ResourceMapOut(Schema):
    id: UUID
    from_session_id: UUID
    created_at: datetime
    resources: list[dict]
    text: str

    @staticmethod
    def resolve_from_session_id(obj) -> UUID:
        return obj.session_id


class BootstrapOut(Schema):
    session_id: UUID
    lifecycle_state: str
    resource_map: ResourceMapOut | None


class PageOutOut(Schema):
    status: Literal["queued"]
    handle: HandleOut


class PageInOut(Schema):
    mode: Literal["summary", "full"]
    content: str
    tokens: int
    handle: HandleOut


class AttentionIn(BodyIn):
    weight: float = Field(..., ge=0, le=100)


class HandleStateIn(BodyIn):
    to: HandleState


class FrameCompactIn(BodyIn):
    target_tokens: int = Field(..., ge=0, le=MAX_TARGET_TOKENS)
    # Checked by the service against the built-in and registered strategies (422 lists them).
    strategy: str = Field(
        ..., min_length=1, max_length=MAX_NAME_LENGTH, json_schema_extra=strategy_enum(FRAME)
    )
    message_count: int | None = Field(None, ge=0, le=MAX_MESSAGE_COUNT)


class FrameCompactOut(Schema):
    frame_id: UUID
    strategy: str
    original_tokens: int
    final_tokens: int
    compaction_level: CompactionLevel
    items_removed: int
    items_summarized: int
    removed: list[str]
    summarized: list[str]


def context_pack_out(pack: ContextPack) -> dict[str, Any]:
    """The ``ContextPackOut`` answer for ``pack`` (see docs/api.md: context packs), as
    plain dicts in the schemas' field order, for ``prebuilt_json_response``.

    Every value comes from the packer's own dataclasses with the schema's types already,
    and a large pack holds thousands of nested items: neither validation nor a model per
    item would find anything to change. ``dropped`` is the stored record's own list."""
    result = pack.result
    breakdown = result.breakdown
    used = sum(breakdown.values())
    return {
        "id": str(pack.record.pk),
        "session_id": str(pack.record.session_id),
        "frame_id": str(pack.frame.pk) if pack.frame else None,
        "as_of_seq": pack.record.as_of_seq,
        "query": pack.query,
        "brief_context": result.brief_context,
        "breadcrumbs": [
            {
                "frame_id": i.id,
                "goal": i.source.goal,
                "status": i.source.status,
                "depth": i.source.depth,
                "tokens": i.tokens,
            }
            for i in result.breadcrumbs
        ],
        "facts": [_pack_fact_out(i) for i in result.facts],
        "working_set": [
            {"key": i.id, "text": i.text, "tokens": i.tokens, "form": i.form, **_ranked(i)}
            for i in result.working_set
        ],
        "segments": [
            {
                "handle_id": i.id,
                "kind": i.source.kind,
                "priority": i.source.priority,
                "state": i.source.state,
                "form": i.form,
                "content": i.text,
                "tokens": i.tokens,
                **_ranked(i),
            }
            for i in result.segments
        ],
        "resources": [
            {"handle_id": i.id, "name": i.text, "tokens": i.tokens} for i in result.resources
        ],
        "dropped": pack.record.dropped,
        "token_summary": {
            "budget": result.budget,
            "used": used,
            "remaining": result.budget - used,
            "breakdown": breakdown,
            "compaction_level": result.level,
        },
        "format": pack.format,
    }


def _pack_fact_out(item: PackedItem[FactItem]) -> dict[str, Any]:
    """A ``PackFactOut``: the fact's own fields (``extra``) with the schema's defaults."""
    extra = item.source.fields()
    return {
        "id": item.id,
        "key": extra.get("key", item.source.key),
        "value": extra.get("value"),
        "source": extra.get("source", ""),
        "scope": extra.get("scope", ""),
        "is_constraint": extra.get("is_constraint", False),
        "text": item.text,
        "tokens": item.tokens,
        "form": item.form,
        **_ranked(item),
    }


def _ranked(item: PackedItem[Any]) -> dict[str, Any]:
    """An item's place in the pack's ranking and why (``ScoreOut``)."""
    return {
        "rank": item.rank,
        "score": dict(zip(SCORE_PARTS, item.score, strict=True)) if item.score else None,
        "reason": item.reason,
        "older_than": item.older_than,
    }


def pressure_out(report: PressureReport, *, eviction_policy: str) -> dict[str, Any]:
    """The ``PressureOut`` answer for ``report``."""
    pressure, frame = report.pressure, report.frame
    return {
        "level": pressure.level,
        "utilization": round(pressure.utilization, 4),
        "occupancy_tokens": pressure.occupancy_tokens,
        "context_window_tokens": pressure.window_tokens,
        "frame_id": str(frame.pk) if frame else None,
        "eviction_policy": eviction_policy,
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
            for c in report.candidates
        ],
    }


class PackFiguresOut(Schema):
    id: UUID
    frame_id: UUID | None
    budget: int
    used: int
    remaining: int
    level: str
    format: str | None
    breakdown: dict[str, int]
    created_at: datetime
    as_of_seq: int | None
    query: str = Field("", description="The query the pack was assembled for; empty for none.")


class PackItemShownOut(Schema):
    form: str = ""
    tokens: int
    level: str
    rank: int | None = None
    score: ScoreOut | None = None
    reason: str | None = Field(
        None, description="Why that pack took it in: critical, forced, constraint, ranked, ..."
    )


class PackItemChangeOut(Schema):
    section: str
    id: str
    reason: str = Field(
        description="over_budget, superseded, paged_out, excluded_by_hint, pressure_format, "
        "scope, content or (added items) query"
    )
    before: PackItemShownOut | None
    after: dict[str, Any] | None = Field(
        description="How the later pack shows it, or its drop {reason, level, tokens, rank, score}."
    )
    detail: str
    superseded_by: str | None
    priority: str | None
    earlier_drop: dict[str, Any] | None = Field(
        None,
        description="An added item the earlier pack dropped: that drop "
        "{reason, level, tokens, rank, score}.",
    )


class PackDiffOut(Schema):
    a: PackFiguresOut
    b: PackFiguresOut
    added: list[PackItemChangeOut]
    dropped: list[PackItemChangeOut]
    changed: list[PackItemChangeOut]
