"""The conversation API's pydantic schemas: messages and usage in, turns and compaction runs out."""

from typing import Any, Literal
from uuid import UUID

from ninja import Field, Schema

from .selection import MAX_KEEP_TURNS, MAX_TARGET_TOKENS


class CallUsageIn(Schema):
    input_tokens: int = Field(ge=0, le=100_000_000)
    output_tokens: int = Field(ge=0, le=100_000_000)
    cache_creation_input_tokens: int = Field(0, ge=0, le=100_000_000)
    cache_read_input_tokens: int = Field(0, ge=0, le=100_000_000)
    model: str = Field("", max_length=120)
    message_id: str = Field("", max_length=200)


class MessageIn(Schema):
    role: Literal["user", "assistant"]
    content: str | list[Any]


class MessagesIn(Schema):
    messages: list[MessageIn] = Field(min_length=1, max_length=500)
    usage: CallUsageIn | None = None
    frame_id: UUID | None = Field(
        None,
        description="The frame the call belongs to and is charged to: an active or waiting "
        "frame of this session. Default: the top of the session's stack.",
    )


class AnchorOut(Schema):
    type: str
    weight: float
    confidence: float
    description: str


class ToolCallOut(Schema):
    id: str
    name: str
    input: dict


class ToolResultOut(Schema):
    tool_use_id: str
    output: str
    is_error: bool


class TurnOut(Schema):
    index: int
    branch: str
    user_message: str
    tool_calls: list[ToolCallOut]
    tool_results: list[ToolResultOut]
    assistant_response: str
    tokens: int
    occupancy_tokens: int
    previous_error: bool
    anchor: AnchorOut | None
    summarized: bool
    truncated: bool
    summary_id: str | None

    @staticmethod
    def resolve_summary_id(obj) -> str | None:
        return str(obj.summary_id) if obj.summary_id else None


class MessagesOut(Schema):
    messages: int
    turns: list[TurnOut]
    occupancy_tokens: int | None
    compaction_id: str | None


class CompactionIn(Schema):
    strategy: Literal["anchor_point", "priority_based", "summarize_oldest", "truncate_at"] = (
        "anchor_point"
    )
    target_tokens: int | None = Field(None, ge=1, le=MAX_TARGET_TOKENS)
    keep_turns: int | None = Field(None, ge=0, le=MAX_KEEP_TURNS)


class CompactionQueuedOut(Schema):
    id: str
    status: str


class CompactionOut(Schema):
    id: str
    session_id: str
    status: str
    strategy: str
    trigger: str
    level: str | None
    original_tokens: int | None
    final_tokens: int | None
    items_removed: int
    items_summarized: int
    compression_ratio: float | None
    summary: str | None
    summary_id: str | None
    summary_failed: bool
    summarizer: str
    attempts: int
    retries: int
    retry_at: Any
    preserved_anchor_index: int | None
    warning: str | None
    error: str
    created_at: Any
    started_at: Any
    finished_at: Any

    @staticmethod
    def resolve_id(obj) -> str:
        return str(obj.pk)

    @staticmethod
    def resolve_session_id(obj) -> str:
        return str(obj.session_id)

    @staticmethod
    def resolve_level(obj) -> str | None:
        return obj.level or None

    @staticmethod
    def resolve_summary(obj) -> str | None:
        return obj.summary.content if obj.summary_id else None

    @staticmethod
    def resolve_summary_id(obj) -> str | None:
        return str(obj.summary_id) if obj.summary_id else None

    @staticmethod
    def resolve_summary_failed(obj) -> bool:
        return bool(obj.summary_id and obj.summary.failed)

    @staticmethod
    def resolve_warning(obj) -> str | None:
        return obj.warning or None
