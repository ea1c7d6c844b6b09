"""The conversation API's pydantic schemas: messages and usage in, turns and compaction runs out."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Field, Schema

from contextops.bodies import BodyIn
from frames.schemas import UsageIn
from frames.strategies import CONVERSATION, MAX_NAME_LENGTH, strategy_enum

from .importing.receiving import Received, source_of
from .models import Import
from .selection import MAX_KEEP_TURNS, MAX_TARGET_TOKENS


# A model call's usage sent with its messages: ``UsageIn``, with counts of at most a
# hundred million tokens.
class CallUsageIn(UsageIn):
    input_tokens: int = Field(ge=0, le=100_000_000)
    output_tokens: int = Field(ge=0, le=100_000_000)
    cache_creation_input_tokens: int = Field(0, ge=0, le=100_000_000)
    cache_read_input_tokens: int = Field(0, ge=0, le=100_000_000)


class MessageIn(BodyIn):
    role: Literal["user", "assistant"]
    content: str | list[Any]


class MessagesIn(BodyIn):
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


class CompactionIn(BodyIn):
    # Checked by the service against the built-in and registered strategies (422 lists them).
    strategy: str = Field(
        "anchor_point",
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        json_schema_extra=strategy_enum(CONVERSATION),
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


# -- Imports ----------------------------------------------------------------------------------

MAX_OFFSET = 2**62


class ImportFileIn(BodyIn):
    file_name: str = Field(
        min_length=1, max_length=500, description="The subagent file's name (agent-<id>.jsonl)."
    )
    content: str = Field(description="The file's text, or its part from ``offset`` on.")
    offset: int = Field(0, ge=0, le=MAX_OFFSET, description="UTF-8 byte offset of ``content``.")


class ImportIn(BodyIn):
    file_name: str = Field(
        min_length=1,
        max_length=500,
        description="The transcript's file name (its base name), kept as its source.",
    )
    content: str = Field(description="The transcript's text, or the part of the file from offset.")
    offset: int = Field(
        0,
        ge=0,
        le=MAX_OFFSET,
        description="The UTF-8 byte offset in the file where content starts: an upload may "
        "send only what was appended since the last one.",
    )
    format: Literal["claude_code", "anthropic", "openai"] | None = Field(
        None, description="Detected from the file name and content when left out."
    )
    final: bool = Field(
        True,
        description="The transcript is complete: once imported, its session ends. Until "
        "then the trailing entries that may still change wait for the next upload.",
    )
    subagents: list[ImportFileIn] = Field(
        default_factory=list,
        max_length=1000,
        description="Claude Code 2.x subagents/agent-*.jsonl files of the same session.",
    )
    title: str | None = Field(None, max_length=300, description="Overrides the derived title.")


class ImportSourceOut(Schema):
    format: str
    file_name: str
    source_session_id: str
    tool_version: str | None


class ImportFileOut(Schema):
    file_name: str
    received_bytes: int


class ImportQueuedOut(Schema):
    id: str
    status: str
    session_id: str | None
    source: ImportSourceOut
    received_bytes: int = Field(
        description="The bytes of the file now held: where the next part starts."
    )
    subagents: list[ImportFileOut]


class ImportProgressOut(Schema):
    done: int
    total: int


class ImportErrorOut(Schema):
    error: str
    detail: str


class ImportOut(Schema):
    id: str
    status: str
    final: bool
    progress: ImportProgressOut
    session_id: str | None
    source: ImportSourceOut
    received_bytes: int
    result: dict[str, Any] | None = Field(
        description="The summary manage.py import_transcript --json prints, once completed."
    )
    error: ImportErrorOut | None
    created_at: Any
    started_at: Any
    finished_at: Any


def import_queued_out(received: Received) -> dict[str, Any]:
    job = received.job
    return {
        "id": job.pk,
        "status": job.status,
        "session_id": str(job.session_id) if job.session_id else None,
        "source": source_of(received.source),
        "received_bytes": job.received_bytes,
        "subagents": [
            {"file_name": name, "received_bytes": received.sizes.get(name, 0)}
            for name in received.subagents
        ],
    }


def import_out(job: Import) -> dict[str, Any]:
    return {
        "id": job.pk,
        "status": job.status,
        "final": job.final,
        "progress": {"done": job.progress_done, "total": job.progress_total},
        "session_id": str(job.session_id) if job.session_id else None,
        "source": source_of(job.source),
        "received_bytes": job.received_bytes,
        "result": job.result,
        "error": job.error,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


# -- the counterfactual -----------------------------------------------------------------


class CounterfactualAnchorOut(Schema):
    turn: int
    type: str


class CounterfactualStrategyOut(Schema):
    strategy: str
    kept: list[list[int]] = Field(description="Inclusive [first, last] turn ranges it keeps.")
    summarized: list[list[int]]
    removed: list[list[int]] = Field(description="Turns it drops without a summary (truncate_at).")
    tokens_after: int = Field(description="The window after it, summary estimate included.")
    summary_tokens: int = Field(description="The estimated size of its summary (none is written).")
    anchor: CounterfactualAnchorOut | None
    cut_at: int | None = Field(description="The first turn it keeps after what it took out.")


class CounterfactualActualOut(Schema):
    basis: Literal["window", "history"] = Field(
        description="What pre_tokens and tokens_after measure, as the strategies' figures "
        "beside them do: 'window', the whole window with the system prompt and tools (a "
        "transcript's compaction); 'history', the conversation history alone as our "
        "tokenizer counts it (one of our runs)."
    )
    pre_tokens: int = Field(
        description="Before it: the agent's own figure, or the history our run found."
    )
    tokens_after: int | None = Field(
        description="After it: the next model call's full input, or the history our run left."
    )
    next_input_tokens: int | None = Field(
        description="The full input of the next model call (system prompt and tools "
        "included), whatever the basis; null without a later call."
    )
    summary_tokens: int | None
    replaced_tokens: int | None = Field(
        description="What its summary replaced, the figure the session's summary_ratio "
        "divides summary_tokens by: a transcript's, pre_tokens (the whole window); one of "
        "our runs', the turns it summarized and the earlier summaries it folded in (not "
        "the turns it kept or truncated). Null when it has no summary to measure (none, "
        "or the generic continuation message after summary generation failed)."
    )
    trigger: str
    strategy: str = Field(
        description="The strategy one of our runs ran; empty for a transcript's compaction."
    )
    kept: list[list[int]] = Field(
        description="Inclusive [first, last] turn ranges of the window it kept; none for a "
        "transcript's compaction, which keeps only its summary."
    )
    summarized: list[list[int]] = Field(description="Turns of the window it summarized.")
    removed: list[list[int]] = Field(
        description="Turns it took out without a summary (one of our truncate_at runs)."
    )


class CounterfactualCompactionOut(Schema):
    turn: int = Field(description="It came before this turn (one turn per model call).")
    conversation_turn: int
    at: datetime | None
    origin: Literal["transcript", "contextops"]
    id: str
    turns_in_window: list[list[int]]
    actual: CounterfactualActualOut
    strategies: list[CounterfactualStrategyOut]


class CounterfactualFireOut(Schema):
    turn: int
    occupancy: int
    at: datetime | None


class CounterfactualPolicyOut(Schema):
    policy: str = Field(description="'actual', or a strategy under our trigger.")
    compactions: int
    tokens_sent: int = Field(description="The full input of every model call, added up.")
    fires: list[CounterfactualFireOut]


class CounterfactualPointOut(Schema):
    turn: int
    occupancy: int


class CounterfactualOut(Schema):
    session_id: UUID
    threshold: float
    window_tokens: int
    threshold_tokens: int
    unit: Literal["call", "turn"]
    summary_ratio: float
    summary_ratio_source: Literal["session", "default"]
    fixed_tokens: int
    compactions: list[CounterfactualCompactionOut]
    trigger: CounterfactualFireOut | None
    policies: list[CounterfactualPolicyOut]
    curve: list[CounterfactualPointOut]
    uncompacted_curve: list[CounterfactualPointOut] = Field(
        description="The curve with every real compaction undone, the agent's and our runs'."
    )
    call_numbers: list[int] = Field(
        description="Per turn when unit is 'call', the number its model call has on the call "
        "pages ('Model call N of M'), which count a subagent's calls too; empty otherwise."
    )


class CounterfactualQuery(Schema):
    threshold: float | None = Field(
        None, gt=0, le=1, description="The trigger's share of the window; the session's by default."
    )
