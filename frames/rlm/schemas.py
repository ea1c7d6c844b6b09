"""Request and response bodies of the RLM state API (``/api/v1/rlm``)."""

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field

from contextops.bodies import BodyIn
from contextops.pages import Offset, Page

from . import selectors
from .models import RlmCheckpoint, RlmMutation, RlmState, RlmVariable
from .selectors import StateView
from .values import FINAL, MAX_TTL, PROMPT, stored_value

MAX_TEXT = 10_000


class StateIn(BodyIn):
    prompt: str = Field(..., min_length=1, max_length=1_000_000)
    session_id: str | None = Field(None, max_length=200)
    tree_id: str | None = Field(None, max_length=40)
    frame_id: str | None = Field(None, max_length=200)
    execution_config: dict[str, Any] | None = None


class VariableIn(BodyIn):
    value: Any
    type: str | None = Field(None, max_length=20)
    description: str | None = Field(None, max_length=MAX_TEXT)
    source: str = Field("", max_length=200)
    read_only: bool | None = None
    scope: str | None = Field(
        None,
        max_length=20,
        description="Which other states read it when they do not define the name: global "
        "(the organization), session (the default: the same session), tree (the same task "
        "tree) or temporary (none; needs ttl_seconds)",
    )
    ttl_seconds: int | None = Field(None, ge=0, le=MAX_TTL)


class CheckpointIn(BodyIn):
    name: str = Field(..., min_length=1, max_length=200)
    description: str = Field("", max_length=MAX_TEXT)


class RollbackIn(BodyIn):
    checkpoint_id: str = Field(..., min_length=1, max_length=40)


class StateFilters(Schema):
    session_id: str | None = Field(None, max_length=200)
    tree_id: str | None = Field(None, max_length=40)
    completion_status: str | None = Field(None, max_length=20)
    limit: int = Field(50, ge=1, le=200)
    offset: Offset = 0


class MutationFilters(Schema):
    after: int = Field(0, ge=0, le=2**62)
    limit: int = Field(100, ge=1, le=500)


class VariableOut(Schema):
    name: str
    type: str
    value: Any
    description: str
    source: str
    read_only: bool
    scope: str
    ttl_seconds: int | None
    expires_at: datetime | None
    access_count: int
    size_bytes: int
    in_file: bool
    created_at: datetime
    updated_at: datetime


class VariableReadOut(VariableOut):
    state_id: str = Field(
        ...,
        description="The state that holds the variable: the one read, or the state sharing "
        "the name through its scope when the one read does not define it",
    )


class CheckpointOut(Schema):
    checkpoint_id: str
    name: str
    description: str
    kind: str
    timestamp: datetime
    mutation_seq: int
    restorable: bool
    original_checkpoint_id: str


class CheckpointDetailOut(CheckpointOut):
    variables: list[dict[str, Any]]
    completion_status: str | None
    folded_mutations: list[dict[str, Any]]


class MutationOut(Schema):
    mutation_id: str
    seq: int
    operation: str
    variable_name: str
    old_value: Any
    new_value: Any
    source: str
    metadata: dict[str, Any]
    timestamp: datetime


class StateSummaryOut(Schema):
    state_id: str
    session_id: str | None
    tree_id: str | None
    frame_id: str | None
    completion_status: str
    variable_count: int
    mutation_count: int
    created_at: datetime
    updated_at: datetime


class StateListOut(Page[StateSummaryOut]):
    """A page of RLM states."""


class StateOut(StateSummaryOut):
    version: str
    root_frame_id: str | None
    complete: bool
    completed_at: datetime | None
    tree_completed_at: datetime | None
    Final: Any = Field(..., description="Final's value, null until the state is complete")
    prompt: Any
    variables: dict[str, VariableOut]
    checkpoints: list[CheckpointOut]
    history_length: int
    checkpoint_count: int
    total_size_bytes: int


class CompletionOut(Schema):
    complete: bool
    completion_status: str
    final: Any


def variable_out(variable: RlmVariable, value: Any = ...) -> dict[str, Any]:
    return {
        "name": variable.name,
        "type": variable.type,
        "value": stored_value(variable.value, variable.file_name) if value is ... else value,
        "description": variable.description,
        "source": variable.source,
        "read_only": variable.read_only,
        "scope": variable.scope,
        "ttl_seconds": variable.ttl_seconds,
        "expires_at": variable.expires_at,
        "access_count": variable.access_count,
        "size_bytes": variable.size_bytes,
        "in_file": variable.in_file,
        "created_at": variable.created_at,
        "updated_at": variable.updated_at,
    }


def checkpoint_out(checkpoint: RlmCheckpoint) -> dict[str, Any]:
    restorable = getattr(checkpoint, "has_snapshot", None)
    return {
        "checkpoint_id": checkpoint.checkpoint_id,
        "name": checkpoint.name,
        "description": checkpoint.description,
        "kind": checkpoint.kind,
        "timestamp": checkpoint.timestamp,
        "mutation_seq": checkpoint.mutation_seq,
        "restorable": checkpoint.restorable if restorable is None else restorable,
        "original_checkpoint_id": checkpoint.original_checkpoint_id,
    }


def checkpoint_detail_out(
    checkpoint: RlmCheckpoint, snapshot: dict[str, Any] | None
) -> dict[str, Any]:
    """The checkpoint with its full ``snapshot`` (``snapshots.checkpoint_snapshots``)."""
    snapshot = snapshot or {}
    return {
        **checkpoint_out(checkpoint),
        "variables": snapshot.get("variables", []),
        "completion_status": snapshot.get("completion_status"),
        "folded_mutations": checkpoint.folded_mutations,
    }


def mutation_out(mutation: RlmMutation) -> dict[str, Any]:
    old, new = selectors.mutation_values(mutation)
    return {
        "mutation_id": mutation.mutation_id,
        "seq": mutation.seq,
        "operation": mutation.operation,
        "variable_name": mutation.variable_name,
        "old_value": old,
        "new_value": new,
        "source": mutation.source,
        "metadata": mutation.metadata,
        "timestamp": mutation.timestamp,
    }


def state_summary_out(state: RlmState, *, variable_count: int | None = None) -> dict[str, Any]:
    """The state's summary; the live variable count is ``variable_count``, else the
    ``live_variable_count`` that ``selectors.state_list`` annotates, else counted now."""
    if variable_count is None:
        variable_count = getattr(state, "live_variable_count", None)
    if variable_count is None:
        variable_count = len(selectors.state_variables(state))
    return {
        "state_id": state.state_id,
        "session_id": state.session_label or None,
        "tree_id": state.tree_id or None,
        "frame_id": str(state.frame_id) if state.frame_id else None,
        "completion_status": state.completion_status,
        "variable_count": variable_count,
        "mutation_count": state.mutation_total,
        "created_at": state.created_at,
        "updated_at": state.updated_at,
    }


def state_out(view: StateView) -> dict[str, Any]:
    """The whole state, from what ``view`` read: nothing is queried here."""
    state = view.state
    variables = {v.name: variable_out(v) for v in view.variables}
    final = variables.get(FINAL)
    prompt = variables.get(PROMPT)
    return {
        **state_summary_out(state, variable_count=len(variables)),
        "version": state.version,
        "root_frame_id": str(state.root_frame_id) if state.root_frame_id else None,
        "complete": state.is_complete,
        "completed_at": state.completed_at,
        "tree_completed_at": state.tree_completed_at,
        "Final": final["value"] if final else None,
        "prompt": prompt["value"] if prompt else None,
        "variables": variables,
        "checkpoints": [checkpoint_out(c) for c in view.checkpoints],
        "history_length": state.history_length,
        "total_size_bytes": view.total_size_bytes,
        "checkpoint_count": len(view.checkpoints),
    }
