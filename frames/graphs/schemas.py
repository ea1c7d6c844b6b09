"""Request and response bodies of the LangGraph API (``/api/v1/langgraph``)."""

import base64
import json
from datetime import datetime
from typing import Any
from uuid import UUID

from ninja import Schema
from pydantic import Field, field_validator

from contextops.bodies import BodyIn
from contextops.pages import Offset
from frames.models import token_hash
from frames.suspensions.selectors import suspension_status

from .models import GraphBlob, GraphInterrupt, GraphThread, GraphWrite
from .selectors import CheckpointTuple
from .services import PRUNE_STRATEGIES, Blob, ChannelBlob, PendingWrite

ID = 255
MAX_ITEMS = 10_000


class GraphBlobIn(BodyIn):
    """A value as LangGraph's serializer wrote it: its type and its bytes in base64."""

    type: str = Field(..., min_length=1, max_length=40)
    data: str = Field(..., description="base64")

    def as_blob(self) -> Blob:
        return Blob(type=self.type, data=self.data)


class GraphChannelBlobIn(GraphBlobIn):
    channel: str = Field(..., min_length=1, max_length=ID)
    version: str = Field(..., min_length=1, max_length=80)
    preview: Any = Field(None, description="The value as JSON, for the dashboard")

    def as_channel_blob(self) -> ChannelBlob:
        return ChannelBlob(
            channel=self.channel, version=self.version, blob=self.as_blob(), preview=self.preview
        )


class GraphCheckpointRefIn(BodyIn):
    """The checkpoint a body is about, its first fields."""

    thread_id: str = Field(..., min_length=1, max_length=ID)
    checkpoint_ns: str = Field("", max_length=ID)
    checkpoint_id: str = Field(..., min_length=1, max_length=64)


class GraphCheckpointIn(GraphCheckpointRefIn):
    parent_checkpoint_id: str | None = Field(None, max_length=64)
    checkpoint: GraphBlobIn = Field(..., description="The checkpoint without its channel values")
    channel_versions: dict[str, int | float | str] = Field(default_factory=dict)
    blobs: list[GraphChannelBlobIn] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="The channels that changed (LangGraph's new_versions)",
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Filterable JSON")
    metadata_blob: GraphBlobIn | None = Field(None, description="The metadata, exactly")
    session_id: UUID | None = Field(
        None, description="The session a new thread belongs to (default: a new session)"
    )


class GraphCheckpointSavedOut(Schema):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    session_id: str


class GraphWriteIn(GraphBlobIn):
    idx: int = Field(..., ge=-(2**31), le=2**31 - 1)
    channel: str = Field(..., min_length=1, max_length=ID)
    preview: Any = None

    def as_write(self) -> PendingWrite:
        return PendingWrite(
            idx=self.idx, channel=self.channel, blob=self.as_blob(), preview=self.preview
        )


class GraphWritesIn(GraphCheckpointRefIn):
    task_id: str = Field(..., min_length=1, max_length=ID)
    task_path: str = Field("", max_length=1000)
    writes: list[GraphWriteIn] = Field(..., max_length=MAX_ITEMS)
    session_id: UUID | None = Field(
        None, description="The session a new thread belongs to (default: a new session)"
    )


class GraphWritesOut(Schema):
    stored: int


class GraphCheckpointFilters(Schema):
    thread_id: str | None = Field(None, max_length=ID)
    checkpoint_ns: str | None = Field(None, max_length=ID, description="absent: every namespace")
    checkpoint_id: str | None = Field(None, max_length=64)
    before: str | None = Field(None, max_length=64, description="only ids below this one")
    metadata: str | None = Field(
        None, max_length=10_000, description='a JSON object: {"source": "input", "step": 1}'
    )
    limit: int = Field(100, ge=1, le=1000)

    @field_validator("metadata")
    @classmethod
    def _json_object(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            parsed = json.loads(value)
        except ValueError:
            raise ValueError("metadata must be a JSON object") from None
        if not isinstance(parsed, dict):
            raise ValueError("metadata must be a JSON object")
        return value

    def metadata_filter(self) -> dict[str, Any] | None:
        return json.loads(self.metadata) if self.metadata is not None else None


class GraphBlobOut(Schema):
    type: str
    data: str


class GraphChannelValueOut(GraphBlobOut):
    channel: str
    version: str


class GraphPendingWriteOut(GraphBlobOut):
    task_id: str
    task_path: str
    idx: int
    channel: str


class GraphCheckpointTupleOut(Schema):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: GraphBlobOut
    metadata: dict[str, Any]
    metadata_blob: GraphBlobOut | None
    channel_versions: dict[str, Any]
    channel_values: list[GraphChannelValueOut]
    pending_writes: list[GraphPendingWriteOut]
    created_at: datetime


class GraphCheckpointListOut(Schema):
    items: list[GraphCheckpointTupleOut]


def _b64(raw: bytes | memoryview | None) -> str:
    return base64.b64encode(bytes(raw or b"")).decode("ascii")


def _blob_out(blob: GraphBlob) -> dict[str, Any]:
    return {
        "channel": blob.channel,
        "version": blob.version,
        "type": blob.type,
        "data": _b64(blob.data),
    }


def _write_out(write: GraphWrite) -> dict[str, Any]:
    return {
        "task_id": write.task_id,
        "task_path": write.task_path,
        "idx": write.idx,
        "channel": write.channel,
        "type": write.type,
        "data": _b64(write.data),
    }


def checkpoint_tuple_out(item: CheckpointTuple) -> dict[str, Any]:
    cp = item.checkpoint
    return {
        "thread_id": cp.thread.thread_id,
        "checkpoint_ns": cp.checkpoint_ns,
        "checkpoint_id": cp.checkpoint_id,
        "parent_checkpoint_id": cp.parent_checkpoint_id or None,
        "checkpoint": {"type": cp.type, "data": _b64(cp.data)},
        "metadata": cp.metadata,
        "metadata_blob": (
            {"type": cp.metadata_type, "data": _b64(cp.metadata_data)} if cp.metadata_type else None
        ),
        "channel_versions": cp.channel_versions,
        "channel_values": [_blob_out(b) for b in item.blobs],
        "pending_writes": [_write_out(w) for w in item.writes],
        "created_at": cp.created_at,
    }


class GraphThreadOut(Schema):
    thread_id: str
    session_id: str
    checkpoints: int
    created_at: datetime
    updated_at: datetime
    dashboard_url: str


class GraphThreadListOut(Schema):
    items: list[GraphThreadOut]
    count: int


class GraphThreadFilters(Schema):
    session_id: str | None = Field(None, max_length=200)
    limit: int = Field(50, ge=1, le=200)
    offset: Offset = 0


def thread_out(thread: GraphThread, checkpoints: int) -> dict[str, Any]:
    return {
        "thread_id": thread.thread_id,
        "session_id": str(thread.session_id),
        "checkpoints": checkpoints,
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
        "dashboard_url": f"/langgraph/{thread.pk}/",
    }


class GraphThreadCopyIn(BodyIn):
    target_thread_id: str = Field(..., min_length=1, max_length=ID)


class GraphPruneIn(BodyIn):
    thread_ids: list[str] = Field(..., max_length=1000)
    strategy: str = Field("keep_latest", max_length=40, description=" | ".join(PRUNE_STRATEGIES))


class GraphRunsDeleteIn(BodyIn):
    run_ids: list[str] = Field(..., max_length=1000)


class GraphRemovedOut(Schema):
    removed: int


class GraphInterruptOut(Schema):
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    node: str
    value: Any
    frame_id: str
    token: str | None = Field(
        description="The raw resume token: only for the agent that suspended the frame and "
        "for a person's key that may approve; null for every other key (see token_hash)."
    )
    token_hash: str
    status: str
    decided_by: str | None
    decision_note: str
    created_at: datetime


class GraphInterruptListOut(Schema):
    items: list[GraphInterruptOut]


def interrupt_out(interrupt: GraphInterrupt, *, show_token: bool = True) -> dict[str, Any]:
    """``show_token``: whether the reader may have the raw resume token (else its hash)."""
    suspension = interrupt.suspension
    return {
        "checkpoint_ns": interrupt.checkpoint_ns,
        "checkpoint_id": interrupt.checkpoint_id,
        "task_id": interrupt.task_id,
        "node": interrupt.node,
        "value": interrupt.value,
        "frame_id": str(interrupt.frame_id),
        "token": suspension.token if show_token else None,
        "token_hash": token_hash(suspension.token),
        "status": suspension_status(suspension),
        "decided_by": suspension.decided_by.get_username() if suspension.decided_by else None,
        "decision_note": suspension.decision_note,
        "created_at": interrupt.created_at,
    }
