"""The JSON bodies of ``/api/v1`` as the client returns them, one ``TypedDict`` per schema.

Each class mirrors a response schema of the server (named in its docstring) field for
field: the server answers every field of its schema, so every key is required, except in
the seed document of :class:`RlmExport`, whose optional properties are ``NotRequired``.
As JSON carries them, times are ISO 8601 strings and UUIDs are strings.
``tests/client/test_types.py`` compares the keys with real answers.

Standard library only, like the rest of the client. A ``TypedDict`` is a plain ``dict``
at run time: these only tell a type checker (and a reader) what the keys hold.
(No ``from __future__ import annotations`` here: on Python 3.11 a ``NotRequired`` in a
string annotation is not seen at run time, and ``__optional_keys__`` would be wrong.)
"""

from typing import Any, Literal, NotRequired, TypedDict

CompactionLevel = Literal["none", "light", "moderate", "aggressive", "critical"]
PressureLevel = Literal["low", "medium", "high", "critical"]
HandleState = Literal["cold", "loaded", "hot", "indexed", "offline"]


class Health(TypedDict):
    """``GET /health``."""

    status: str


# -- sessions, frames, events ------------------------------------------------------------


class SessionPressure(TypedDict):
    """``SessionPressureOut``: the window pressure of the session's top frame."""

    level: str
    utilization: float


class UsageTotals(TypedDict):
    """``UsageTotalsOut``: the sums over every model call of every frame of the session."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class SessionSource(TypedDict):
    """``SessionSourceOut``: where an imported session came from."""

    format: str
    file_name: str
    source_session_id: str
    tool_version: str | None


class SessionData(TypedDict):
    """``SessionOut``: what :class:`~contextops_client.Session` holds in ``.data``.

    ``effective_tokens`` is a cost figure: input and output at full price, cache writes
    at 1.25x, cache reads at a tenth. ``started_at`` is when the work began (an imported
    transcript's first timestamp), ``source`` where an imported session came from."""

    id: str
    title: str
    agent: str | None
    identity: dict[str, Any]
    environment: dict[str, Any]
    model: str
    context_window_tokens: int
    compaction_threshold: float
    eviction_policy: str
    lifecycle_state: str
    pressure: SessionPressure
    top_frame_id: str | None
    usage_totals: UsageTotals
    effective_tokens: int
    cost_usd: float
    unpriced_models: list[str]
    api_calls: int
    last_event_seq: int
    created_at: str
    started_at: str
    source: SessionSource | None
    ended_at: str | None
    dashboard_url: str


class SessionPage(TypedDict):
    """``SessionListOut``: one page of ``GET /sessions``, newest first."""

    items: list[SessionData]
    count: int
    next_offset: int | None


class FrameBudget(TypedDict):
    """``BudgetOut``."""

    total: int
    used: int
    reserved: int
    subcall_allocation: int
    available: int
    overrun: int
    max_subframe_depth: int
    reservations: dict[str, int]


class FrameData(TypedDict):
    """``FrameOut``: what :class:`~contextops_client.Frame` holds in ``.data``."""

    id: str
    session_id: str
    parent_frame_id: str | None
    depth: int
    goal: str
    inputs: dict[str, Any]
    status: str
    failure_reason: str | None
    budget: FrameBudget
    result_refs: list[Any]
    children_count: int
    pressure_level: str
    created_at: str
    completed_at: str | None
    dashboard_url: str


class FrameHandle(TypedDict):
    """``FrameHandleOut``: ``POST /frames/{id}/handles``."""

    id: str
    frame_id: str
    kind: str
    priority: str
    category: str
    ref: str
    tool_call_id: str
    estimated_tokens: int
    state: str
    attention_weight: float
    created_at: str


class PendingWork(TypedDict):
    """``PendingWorkOut``: ``work_type`` is tool_in_progress, waiting_for_subcall or suspended."""

    frame_id: str
    work_type: str
    description: str


class RecoverySummary(TypedDict):
    """``RecoverySummaryOut``."""

    frames_recovered: int
    pending_work_items: int
    last_event_seq: int
    recovery_time_ms: float


class Event(TypedDict):
    """``EventOut``: one entry of ``GET /sessions/{id}/events``."""

    seq: int
    type: str
    frame_id: str | None
    actor: str
    payload: dict[str, Any]
    created_at: str


class SuspensionData(TypedDict):
    """``SuspensionOut``: what :class:`~contextops_client.Suspension` holds in ``.data``;
    ``status`` is pending, approved, rejected, expired or resumed."""

    token: str
    frame_id: str
    session_id: str
    status: str
    requires_approval: bool
    reason: str
    suspended_by: str
    suspended_at: str
    expires_at: str | None
    decided_by: str | None
    decided_at: str | None
    decision_note: str
    resumed_at: str | None
    approve_url: str


# -- facts, constraints, working set, environment --------------------------------------


class Fact(TypedDict):
    """``FactOut``: one version of a fact."""

    id: int
    key: str
    subject: str
    value: Any
    source: str
    authority: str
    author: str
    memory_type: str
    scope: str
    scope_id: str
    is_valid: bool
    status: str
    timestamp: str
    observed_at: str | None
    valid_from: str
    valid_until: str | None
    version: int
    chain: str
    supersedes: str | None
    superseded_by: str | None
    supersession_rule: str
    contested: str | None
    depends_on: list[str]
    derived_facts: list[str]
    needs_review: bool
    is_constraint: bool
    constraint_type: str
    constraint: dict[str, Any] | None
    read_authority: str
    read_permission: str
    tokens: int


class FactWrite(Fact):
    """``FactWriteOut``: the fact written (or the current one, for ``unchanged``) and what
    happened: ``outcome`` created, superseded, proposal, outdated, unchanged or promoted."""

    outcome: str
    rule: str
    notice: str
    flagged_for_review: int
    detected_keywords: list[str]
    proposed_conflicts: list["FactConflict"]


class FactConflict(TypedDict):
    """``ConflictOut``: a proposed supersession (``fact`` would supersede ``other``) with
    its evidence; ``status`` proposed, accepted, rejected or distinct."""

    id: int
    status: str
    fact: str
    fact_subject: str
    fact_value: Any
    fact_source: str
    other: str
    other_subject: str
    other_value: Any
    other_source: str
    similarity: float
    matched_words: list[str]
    created_at: str
    decided_by: str
    decided_at: str | None


class FactPage(TypedDict):
    """``FactListOut``: one page of ``GET /facts``, newest first."""

    items: list[Fact]
    count: int
    next_offset: int | None


class LineageVersion(Fact):
    """``LineageVersionOut``: a version of the chain and the rule its successor won by."""

    superseded_by_rule: str


class FactDependent(TypedDict):
    """``DependentOut``: a fact that depends on a version of the chain."""

    key: str
    subject: str
    value: Any
    is_valid: bool
    status: str
    needs_review: bool
    depends_on: list[str]


class Lineage(TypedDict):
    """``LineageOut``: ``chain`` oldest first."""

    key: str
    chain: list[LineageVersion]
    contested: list[Fact]
    dependents: list[FactDependent]


class ConstraintViolation(TypedDict):
    """``ViolationOut``."""

    fact_key: str
    constraint: dict[str, Any]
    detail: str


class ConstraintCheck(TypedDict):
    """``ConstraintCheckOut``: ``checked`` names the constraint facts applied."""

    subject: str
    value: Any
    allowed: bool
    checked: list[str]
    violations: list[ConstraintViolation]


class WorkingSetItem(TypedDict):
    """``WorkingSetOut``."""

    key: str
    value: Any
    tokens: int
    created_at: str
    updated_at: str
    expires_at: str | None


class Environment(TypedDict):
    """``EnvironmentOut``: with the current time and date in the session's time zone."""

    timezone: str
    location: str | None
    external_data: dict[str, Any]
    current_time: str
    current_date: str


# -- context packs, pressure, handles ---------------------------------------------------


class TokenSummary(TypedDict):
    """``TokenSummaryOut``: ``used`` never exceeds ``budget``."""

    budget: int
    used: int
    remaining: int
    breakdown: dict[str, int]
    compaction_level: CompactionLevel


class Breadcrumb(TypedDict):
    """``BreadcrumbOut``: one frame of the stack, root first."""

    frame_id: str
    goal: str
    status: str
    depth: int
    tokens: int


class PackScore(TypedDict):
    """Why an item ranks where it does (docs/retrieval.md): ``total`` is the parts' sum."""

    total: float
    priority: float
    lexical: float
    semantic: float
    recency: float
    attention: float
    neighbour: float
    older: float


class PackFact(TypedDict):
    """``PackFactOut``: a fact as the pack renders it at its compaction level (``form``)."""

    id: str
    key: str
    value: Any
    source: str
    scope: str
    is_constraint: bool
    text: str
    tokens: int
    form: str
    rank: int | None  # its place in the pack's one ranking (1 = first)
    score: PackScore | None
    reason: str  # why it is in: critical, forced, constraint, ranked
    older_than: str | None  # the newer near-duplicate it ranks behind


class PackWorkingSetItem(TypedDict):
    """``PackWorkingOut``."""

    key: str
    text: str
    tokens: int
    form: str
    rank: int | None  # its place in the pack's one ranking (1 = first)
    score: PackScore | None
    reason: str  # why it is in: critical, forced, constraint, ranked
    older_than: str | None  # the newer near-duplicate it ranks behind


class PackSegment(TypedDict):
    """``SegmentOut``: a context handle's content in the pack."""

    handle_id: str
    kind: str
    priority: str
    state: str
    form: str
    content: str
    tokens: int
    rank: int | None  # its place in the pack's one ranking (1 = first)
    score: PackScore | None
    reason: str  # why it is in: critical, forced, constraint, ranked
    older_than: str | None  # the newer near-duplicate it ranks behind


class PackDropped(TypedDict):
    """``DroppedOut``: what the budget left out, why, at which compaction level, and
    where it ranked."""

    section: str
    id: str
    reason: str
    level: CompactionLevel
    tokens: int
    rank: int | None
    score: PackScore | None
    older_than: str | None


class PackResource(TypedDict):
    """``ResourceOut``: a cold (discovered, not loaded) handle, listed by name only."""

    handle_id: str
    name: str
    tokens: int


class ContextPack(TypedDict):
    """``ContextPackOut``: ``POST /sessions/{id}/context-pack``; ``format`` follows the
    session's pressure (verbose, dense, ultra_dense)."""

    id: str
    session_id: str
    frame_id: str | None
    query: str
    brief_context: str
    breadcrumbs: list[Breadcrumb]
    facts: list[PackFact]
    working_set: list[PackWorkingSetItem]
    segments: list[PackSegment]
    resources: list[PackResource]
    dropped: list[PackDropped]
    token_summary: TokenSummary
    format: Literal["verbose", "dense", "ultra_dense"]
    as_of_seq: int | None  # a replay: the pack as the session stood after this event


class ContextPackRecord(TypedDict):
    """``ContextPackRecordOut``: one of ``GET /sessions/{id}/context-packs``."""

    id: str
    frame_id: str | None
    budget: int
    used: int
    level: CompactionLevel
    min_compaction: CompactionLevel
    breakdown: dict[str, int]
    included: list[dict[str, Any]]
    dropped: list[PackDropped]
    query: str
    format: Literal["verbose", "dense", "ultra_dense"] | None  # None: recorded before formats
    as_of_seq: int | None
    created_at: str


class EvictionCandidate(TypedDict):
    """``EvictionCandidateOut``: first to go under the session's eviction policy."""

    handle_id: str
    kind: str
    category: str
    priority: str
    state: str
    attention_weight: float
    estimated_tokens: int
    last_access_at: str


class Pressure(TypedDict):
    """``PressureOut``: ``GET /sessions/{id}/pressure`` (of the top frame)."""

    level: PressureLevel
    utilization: float
    occupancy_tokens: int
    context_window_tokens: int
    frame_id: str | None
    eviction_policy: str
    recommended_actions: list[str]
    eviction_candidates: list[EvictionCandidate]


class HandleNote(TypedDict):
    """``NoteOut``: a note left on a handle."""

    note: str
    actor: str
    created_at: str


class Handle(TypedDict):
    """``HandleOut``: a context handle as the paging endpoints return it, with its notes."""

    id: str
    frame_id: str
    session_id: str
    kind: str
    priority: str
    category: str
    state: HandleState
    attention_weight: float
    estimated_tokens: int
    summary: str
    summary_tokens: int
    last_access_at: str
    notes: list[HandleNote]


class FrameCompaction(TypedDict):
    """``FrameCompactOut``: ``POST /frames/{id}/compact``."""

    frame_id: str
    strategy: str
    original_tokens: int
    final_tokens: int
    compaction_level: CompactionLevel
    items_removed: int
    items_summarized: int
    removed: list[str]
    summarized: list[str]


class HandlePageOut(TypedDict):
    """``PageOutOut``: the page-out is queued (202)."""

    status: Literal["queued"]
    handle: Handle


class HandlePageIn(TypedDict):
    """``PageInOut``: the handle's summary or full content."""

    mode: Literal["summary", "full"]
    content: str
    tokens: int
    handle: Handle


# -- conversation and compaction ---------------------------------------------------------


class Anchor(TypedDict):
    """``AnchorOut``: why a turn is kept through compaction."""

    type: str
    weight: float
    confidence: float
    description: str


class ToolCall(TypedDict):
    """``ToolCallOut``."""

    id: str
    name: str
    input: dict[str, Any]


class ToolResult(TypedDict):
    """``ToolResultOut``."""

    tool_use_id: str
    output: str
    is_error: bool


class Turn(TypedDict):
    """``TurnOut``: one user message and what answered it, in order."""

    index: int
    branch: str
    user_message: str
    tool_calls: list[ToolCall]
    tool_results: list[ToolResult]
    assistant_response: str
    tokens: int
    occupancy_tokens: int
    previous_error: bool
    anchor: Anchor | None
    summarized: bool
    truncated: bool
    summary_id: str | None


class MessagesAppended(TypedDict):
    """``MessagesOut``: ``messages`` stored, the turns created or extended, and the id of
    the compaction queued when the window passed its threshold."""

    messages: int
    turns: list[Turn]
    occupancy_tokens: int | None
    compaction_id: str | None


class CompactionQueued(TypedDict):
    """``CompactionQueuedOut``: ``POST /sessions/{id}/compactions`` (202)."""

    id: str
    status: str


class Compaction(TypedDict):
    """``CompactionOut``: ``status`` queued, running, completed, failed or reverted."""

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
    retry_at: str | None
    preserved_anchor_index: int | None
    warning: str | None
    error: str
    created_at: str
    started_at: str | None
    finished_at: str | None


# -- transcript imports ------------------------------------------------------------------


class ImportProgress(TypedDict):
    """``ImportProgressOut``: how many of the entries a run found new it has written."""

    done: int
    total: int


class ImportSummary(TypedDict):
    """What an import wrote: the JSON ``manage.py import_transcript --json`` prints, and
    the ``result`` of a completed import job (the session as it stands). ``unchanged`` is
    true when the same transcript had been imported before: nothing was written and
    ``session_id`` names the session it made then."""

    session_id: str
    frames: int
    turns: int
    api_calls: int
    tool_calls: int
    tool_errors: int
    compactions: int
    usage_totals: UsageTotals
    skipped_lines: int
    skipped: list[dict[str, Any]]
    unchanged: bool


class ImportFailure(TypedDict):
    """``ImportErrorOut``: why an import job failed, in the API's error format."""

    error: str
    detail: str


class ImportFile(TypedDict):
    """``ImportFileOut``: a subagent file of an upload and the bytes of it now held."""

    file_name: str
    received_bytes: int


class ImportQueued(TypedDict):
    """``ImportQueuedOut``: ``POST /imports`` (202), the job queued for a worker;
    ``received_bytes`` is how much of the file the server holds (where the next part
    starts)."""

    id: str
    status: str
    session_id: str | None
    source: SessionSource
    received_bytes: int
    subagents: list[ImportFile]


class ImportJob(TypedDict):
    """``ImportOut``: ``GET /imports/{id}``; ``status`` queued, running, completed or
    failed; ``result`` once completed, ``error`` once failed."""

    id: str
    status: str
    final: bool
    progress: ImportProgress
    session_id: str | None
    source: SessionSource
    received_bytes: int
    result: ImportSummary | None
    error: ImportFailure | None
    created_at: str
    started_at: str | None
    finished_at: str | None


# -- RLM state -------------------------------------------------------------------------


class RlmVariable(TypedDict):
    """``VariableOut``: ``PUT .../variables/{name}`` and the values of a state's ``variables``."""

    name: str
    type: str
    value: Any
    description: str
    source: str
    read_only: bool
    scope: str
    ttl_seconds: int | None
    expires_at: str | None
    access_count: int
    size_bytes: int
    in_file: bool
    created_at: str
    updated_at: str


class RlmVariableRead(RlmVariable):
    """``VariableReadOut``: ``state_id`` is the state holding the variable, another state
    of its scope when the one read does not define the name."""

    state_id: str


class RlmCheckpoint(TypedDict):
    """``CheckpointOut``."""

    checkpoint_id: str
    name: str
    description: str
    kind: str
    timestamp: str
    mutation_seq: int
    restorable: bool
    original_checkpoint_id: str


class RlmCheckpointDetail(RlmCheckpoint):
    """``CheckpointDetailOut``: with the snapshot's variables."""

    variables: list[dict[str, Any]]
    completion_status: str | None
    folded_mutations: list[dict[str, Any]]


class RlmMutation(TypedDict):
    """``MutationOut``: one entry of the mutation log (also what a delete returns)."""

    mutation_id: str
    seq: int
    operation: str
    variable_name: str
    old_value: Any
    new_value: Any
    source: str
    metadata: dict[str, Any]
    timestamp: str


class RlmStateSummary(TypedDict):
    """``StateSummaryOut``: an item of ``GET /rlm/states``."""

    state_id: str
    session_id: str | None
    tree_id: str | None
    frame_id: str | None
    completion_status: str
    variable_count: int
    mutation_count: int
    created_at: str
    updated_at: str


class RlmStatePage(TypedDict):
    """``StateListOut``."""

    items: list[RlmStateSummary]
    count: int
    next_offset: int | None


class RlmState(RlmStateSummary):
    """``StateOut``: ``Final`` is null until the state is complete."""

    version: str
    root_frame_id: str | None
    complete: bool
    completed_at: str | None
    tree_completed_at: str | None
    Final: Any
    prompt: Any
    variables: dict[str, RlmVariable]
    checkpoints: list[RlmCheckpoint]
    history_length: int
    checkpoint_count: int
    total_size_bytes: int


class RlmCompletion(TypedDict):
    """``CompletionOut``."""

    complete: bool
    completion_status: str
    final: Any


class RlmExportVariable(TypedDict):
    """A seed ``Variable``; ``metadata`` holds read_only, scope, ttl_seconds, ..."""

    name: str
    value: Any
    type: str
    description: NotRequired[str]
    source: NotRequired[str]
    created_at: str
    updated_at: str
    access_count: int
    metadata: dict[str, Any]


class RlmExportMutation(TypedDict):
    """A seed ``StateMutation`` (a rollback is an ``update`` of ``*``)."""

    mutation_id: str
    operation: str
    variable_name: str
    old_value: NotRequired[Any]
    new_value: NotRequired[Any]
    source: NotRequired[str]
    timestamp: str
    metadata: NotRequired[dict[str, Any]]


class RlmExportSnapshot(TypedDict):
    completion_status: str
    variables: dict[str, RlmExportVariable]


class RlmExportCheckpoint(TypedDict):
    """A seed ``StateCheckpoint``; ``snapshot`` only with ``?snapshots=true``."""

    checkpoint_id: str
    name: str
    timestamp: str
    snapshot_path: NotRequired[str]
    description: NotRequired[str]
    snapshot: NotRequired[RlmExportSnapshot]
    folded_mutations: NotRequired[list[RlmExportMutation]]


class RlmExportHistory(TypedDict):
    mutations: list[RlmExportMutation]
    checkpoints: list[RlmExportCheckpoint]


class RlmExportMetadata(TypedDict):
    created_at: str
    last_updated_at: str
    variable_count: int
    mutation_count: int
    checkpoint_count: int
    total_size_bytes: int
    completion_status: str
    execution_config: NotRequired[dict[str, Any]]


class RlmExport(TypedDict):
    """``GET /rlm/states/{id}/export``: the seed-schema document ``rlm_state_import`` takes
    back (an incomplete state has no ``Final`` among its ``variables``)."""

    version: str
    state_id: str
    session_id: NotRequired[str]
    tree_id: NotRequired[str]
    variables: dict[str, RlmExportVariable]
    history: RlmExportHistory
    metadata: RlmExportMetadata


__all__ = [
    "Anchor",
    "Breadcrumb",
    "Compaction",
    "CompactionLevel",
    "CompactionQueued",
    "ConstraintCheck",
    "ConstraintViolation",
    "ContextPack",
    "ContextPackRecord",
    "Environment",
    "Event",
    "EvictionCandidate",
    "Fact",
    "FactDependent",
    "FactPage",
    "FactWrite",
    "FrameBudget",
    "FrameData",
    "FrameHandle",
    "Handle",
    "HandlePageIn",
    "HandlePageOut",
    "HandleState",
    "Health",
    "ImportFailure",
    "ImportFile",
    "ImportJob",
    "ImportProgress",
    "ImportQueued",
    "ImportSummary",
    "Lineage",
    "LineageVersion",
    "MessagesAppended",
    "PackDropped",
    "PackFact",
    "PackSegment",
    "PackWorkingSetItem",
    "PendingWork",
    "Pressure",
    "PressureLevel",
    "RecoverySummary",
    "RlmCheckpoint",
    "RlmCheckpointDetail",
    "RlmCompletion",
    "RlmExport",
    "RlmExportCheckpoint",
    "RlmExportHistory",
    "RlmExportMetadata",
    "RlmExportMutation",
    "RlmExportSnapshot",
    "RlmExportVariable",
    "RlmMutation",
    "RlmState",
    "RlmStatePage",
    "RlmStateSummary",
    "RlmVariable",
    "RlmVariableRead",
    "SessionData",
    "SessionPage",
    "SessionPressure",
    "SessionSource",
    "SuspensionData",
    "TokenSummary",
    "ToolCall",
    "ToolResult",
    "Turn",
    "UsageTotals",
    "WorkingSetItem",
]
