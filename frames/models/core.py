"""Sessions, frames, context handles, model-call usage and the event log."""

import uuid

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from contextops.models import Agent, Organization

from .. import pressure
from ..budget import (
    DEFAULT_MAX_SUBFRAME_DEPTH,
    USAGE_TOTALS,
    Budget,
    call_occupancy,
    cost_weighted_tokens,
    full_input_tokens,
)
from ..priorities import Priority

# The longest reason a failed frame keeps (an agent's words, or the system's code).
FAILURE_REASON_MAX = 2000


class Session(models.Model):
    """One agent's conversation: the scope of its frames (docs/concepts.md#frames)."""

    class Lifecycle(models.TextChoices):
        LOADING = "loading"
        BOOTSTRAP = "bootstrap"
        ACTIVE = "active"
        ACTIVE_PRESSURE = "active_pressure", "Active under pressure"
        PERSISTING = "persisting"
        ENDED = "ended"

    class Eviction(models.TextChoices):
        LRU = "lru"
        SIZE_FIRST = "size_first"
        KEEP_RELATIONAL = "keep_relational"
        KEEP_TECHNICAL = "keep_technical"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="sessions"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="sessions"
    )
    title = models.CharField(max_length=300, blank=True)
    # Layer 1: set once when the session starts, read-only afterwards.
    identity = models.JSONField(default=dict, blank=True)
    # Layer 4: updated through the API, read-only to the conversation.
    environment = models.JSONField(default=dict, blank=True)
    model = models.CharField(max_length=120, blank=True)
    context_window_tokens = models.PositiveIntegerField(default=200_000)
    compaction_threshold = models.FloatField(default=0.9)
    pressure_level = models.CharField(max_length=16, choices=pressure.CHOICES, default=pressure.LOW)
    eviction_policy = models.CharField(
        max_length=20, choices=Eviction.choices, default=Eviction.LRU
    )
    lifecycle_state = models.CharField(
        max_length=20, choices=Lifecycle.choices, default=Lifecycle.ACTIVE
    )
    # Running totals over every model call of every frame, kept in the usage transaction.
    input_tokens_total = models.BigIntegerField(default=0)
    output_tokens_total = models.BigIntegerField(default=0)
    cache_creation_tokens_total = models.BigIntegerField(default=0)
    cache_read_tokens_total = models.BigIntegerField(default=0)
    api_calls_total = models.PositiveIntegerField(default=0)
    # The log's sequence: the last event number handed out in this session.
    last_event_seq = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When the work began: an imported transcript's first timestamp, else the creation.
    started_at = models.DateTimeField(default=timezone.now)
    # Where an imported session came from: {format, file_name, source_session_id,
    # tool_version}; empty for a session an agent started.
    source = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "-created_at"], name="session_org_recent")]

    def __str__(self) -> str:
        return self.title or str(self.id)

    @property
    def usage_totals(self) -> dict[str, int]:
        return {name: getattr(self, total) for name, total in USAGE_TOTALS.items()}

    @property
    def effective_tokens(self) -> int:
        """What the session's calls cost, in tokens (cache writes at 1.25x, reads at a
        tenth): a cost, never room in the window (see the design's note)."""
        return round(cost_weighted_tokens(**self.usage_totals))

    SOURCE_FORMATS = {
        "claude_code": "Claude Code",
        "anthropic": "Anthropic Messages",
        "openai": "OpenAI chat",
    }

    @property
    def source_label(self) -> str:
        """What an imported session came from, as a person reads it ("Claude Code 2.1.39
        transcript"); "" for a session an agent started."""
        if not self.source:
            return ""
        name = self.SOURCE_FORMATS.get(self.source.get("format", ""), "Imported")
        version = self.source.get("tool_version") or ""
        return f"{name} {version} transcript" if version else f"{name} transcript"


class Frame(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        WAITING = "waiting"
        SUSPENDED = "suspended"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    OPEN_STATUSES = (Status.ACTIVE, Status.WAITING, Status.SUSPENDED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="frames")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    parent = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="children"
    )
    depth = models.PositiveIntegerField(default=0)
    goal = models.TextField()
    inputs = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True
    )
    budget_total = models.BigIntegerField()
    budget_used = models.BigIntegerField(default=0)
    budget_reserved = models.BigIntegerField(default=0)
    subcall_allocation = models.BigIntegerField(default=0)
    max_subframe_depth = models.PositiveIntegerField(default=DEFAULT_MAX_SUBFRAME_DEPTH)
    reservations = models.JSONField(default=dict, blank=True)
    result_refs = models.JSONField(default=list, blank=True)
    # Why a failed frame failed when no agent said so ("suspension_expired"); "" otherwise.
    failure_reason = models.CharField(max_length=FAILURE_REASON_MAX, blank=True)
    children_count = models.PositiveIntegerField(default=0)
    # Window occupancy of this frame's latest model call: full input + output.
    last_occupancy_tokens = models.BigIntegerField(default=0)
    pressure_level = models.CharField(max_length=16, default=pressure.LOW)
    created_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["session", "parent", "created_at"], name="frame_children"),
            models.Index(fields=["session", "status", "-created_at"], name="frame_top_of_stack"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(budget_total__gte=0)
                & Q(budget_used__gte=0)
                & Q(budget_reserved__gte=0)
                & Q(subcall_allocation__gte=0),
                name="frame_budget_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(budget_reserved__lte=F("budget_total") - F("subcall_allocation")),
                name="frame_budget_commitments_within_total",
            ),
        ]

    def __str__(self) -> str:
        return self.goal[:60]

    @property
    def budget(self) -> Budget:
        """The frame's budget figures as the budget rules read them."""
        return Budget(
            self.budget_total, self.budget_used, self.budget_reserved, self.subcall_allocation
        )

    @property
    def budget_available(self) -> int:
        """total - used - reserved - subcall_allocation, never below zero."""
        return self.budget.available

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES


class ContextHandle(models.Model):
    class Kind(models.TextChoices):
        SYSTEM_PROMPT = "system_prompt"
        MESSAGE = "message"
        TOOL_CALL = "tool_call"
        TOOL_RESULT = "tool_result"
        DOCUMENT = "document"
        SUMMARY = "summary"

    Priority = Priority

    class State(models.TextChoices):
        COLD = "cold"
        LOADED = "loaded"
        HOT = "hot"
        INDEXED = "indexed"
        OFFLINE = "offline"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    frame = models.ForeignKey(Frame, on_delete=models.CASCADE, related_name="handles")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="handles")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    priority = models.CharField(max_length=12, choices=Priority.choices, default=Priority.MEDIUM)
    category = models.CharField(max_length=40, blank=True)
    content = models.TextField(blank=True)
    ref = models.CharField(max_length=2000, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True, db_index=True)
    estimated_tokens = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.LOADED)
    attention_weight = models.FloatField(default=1.0)
    summary = models.TextField(blank=True)
    summary_tokens = models.PositiveIntegerField(default=0)
    last_access_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    # When a page-out's job was sent, until it ran: the sweep sends it again when the
    # broker lost it (frames.context.paging.handles_page_out_requeue).
    page_out_requested_at = models.DateTimeField(null=True, blank=True)
    # The vector of ``content`` (of ``ref`` when there is none), float16 bytes computed
    # when the text is written (contextops.embeddings); NULL until the backfill when the
    # provider was off or failed.
    embedding = models.BinaryField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["frame", "created_at"], name="handle_frame_order"),
            models.Index(
                fields=["page_out_requested_at"],
                name="handle_page_out_pending",
                condition=models.Q(page_out_requested_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} ({self.estimated_tokens} tokens)"

    @property
    def embedding_text(self) -> str:
        """The text ``embedding`` is the vector of: the content, or the reference when the
        handle has no content (a cold resource not loaded yet)."""
        return self.content or self.ref


class Usage(models.Model):
    """One model call's token usage. ``input_tokens`` excludes both cache fields.

    ``message_id`` (the provider's id of the response) makes the record idempotent.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="usage_records")
    frame = models.ForeignKey(
        Frame, on_delete=models.CASCADE, null=True, blank=True, related_name="usage_records"
    )
    model = models.CharField(max_length=120, blank=True)
    message_id = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_creation_input_tokens = models.PositiveIntegerField(default=0)
    cache_read_input_tokens = models.PositiveIntegerField(default=0)
    # When the call was sent and how long its answer took, as the caller measured them;
    # null for a record that did not say.
    started_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["session", "created_at"], name="usage_session_order")]
        constraints = [
            # A model call is charged once: a retried record of the same message is a replay.
            models.UniqueConstraint(
                fields=["session", "message_id"],
                condition=~Q(message_id=""),
                name="usage_unique_message",
            )
        ]

    def __str__(self) -> str:
        return f"{self.model or 'model call'}: {self.occupancy_tokens} tokens"

    @property
    def window_input_tokens(self) -> int:
        """Everything the call put in the window: uncached, cache-written and cache-read input."""
        return full_input_tokens(
            input_tokens=self.input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens,
        )

    @property
    def occupancy_tokens(self) -> int:
        """Everything the call put in the window: its full input plus its output."""
        return call_occupancy(self)


class Event(models.Model):
    """The append-only log; frames and budgets are projections of it."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    seq = models.BigIntegerField()
    type = models.CharField(max_length=40)
    frame_id = models.UUIDField(null=True, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="event_unique_seq")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"
