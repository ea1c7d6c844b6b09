"""Conversation storage: messages as they arrived, turns grouped from them, compaction runs
and summaries, and the transcripts imported into sessions.

Nothing here is ever deleted by a compaction: summarized turns are marked and linked to
the summary that stands in for them, so a run can be reverted and the full history read.
"""

import secrets
import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from contextops.models import Agent, Organization
from frames.models import Frame, Session

MAIN_BRANCH = ""


class Summary(models.Model):
    """The text that stands in the window for a run of summarized turns."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="conversation_summaries"
    )
    content = models.TextField()
    tokens = models.PositiveIntegerField(default=0)
    provider = models.CharField(max_length=40)
    model = models.CharField(max_length=120, blank=True)
    failed = models.BooleanField(
        default=False, help_text="The generic continuation message, after every attempt failed."
    )
    first_turn_index = models.PositiveIntegerField(null=True, blank=True)
    last_turn_index = models.PositiveIntegerField(null=True, blank=True)
    handle_id = models.UUIDField(
        null=True, blank=True, help_text="The summary's ContextHandle in the top frame, if any."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        verbose_name_plural = "summaries"

    def __str__(self) -> str:
        return f"summary of turns {self.first_turn_index}–{self.last_turn_index}"


class Turn(models.Model):
    """User message, tool calls, tool results paired by id, assistant response
    (docs/concepts.md#turns).

    ``branch`` is "" for the session's own conversation and the agent id for a subagent's.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    frame = models.ForeignKey(
        Frame, on_delete=models.SET_NULL, null=True, blank=True, related_name="turns"
    )
    branch = models.CharField(max_length=120, blank=True, default=MAIN_BRANCH)
    index = models.PositiveIntegerField()
    user_message = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)  # [{id, name, input}]
    tool_results = models.JSONField(default=list, blank=True)  # [{tool_use_id, output, is_error}]
    assistant_response = models.TextField(blank=True)
    thinking = models.TextField(blank=True)
    tokens = models.PositiveIntegerField(default=0)
    previous_error = models.BooleanField(default=False)
    has_error = models.BooleanField(default=False)
    # Window occupancy of the latest model call made in this turn (0 when none reported).
    occupancy_tokens = models.PositiveIntegerField(default=0)
    anchor_type = models.CharField(max_length=20, blank=True)
    anchor_weight = models.FloatField(null=True, blank=True)
    anchor_confidence = models.FloatField(null=True, blank=True)
    anchor_description = models.CharField(max_length=500, blank=True)
    summarized = models.BooleanField(default=False)
    truncated = models.BooleanField(
        default=False, help_text="Left the window without a summary (truncate-at)."
    )
    summary = models.ForeignKey(
        Summary, on_delete=models.SET_NULL, null=True, blank=True, related_name="turns"
    )
    compaction_run = models.ForeignKey(
        "CompactionRun", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session", "branch", "index"]
        constraints = [
            models.UniqueConstraint(fields=["session", "branch", "index"], name="turn_unique_index")
        ]

    def __str__(self) -> str:
        return f"turn {self.index}"

    @property
    def in_window(self) -> bool:
        return not (self.summarized or self.truncated)

    @property
    def anchor(self) -> dict | None:
        if not self.anchor_type:
            return None
        return {
            "type": self.anchor_type,
            "weight": self.anchor_weight,
            "confidence": self.anchor_confidence,
            "description": self.anchor_description,
        }


class Message(models.Model):
    """One Anthropic-format message as received, with its token count."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="conversation_messages"
    )
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=12)
    content = models.JSONField(default=list)
    tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_unique_seq")
        ]

    def __str__(self) -> str:
        return f"{self.role} message {self.seq}"

    @property
    def number(self) -> int:
        """The message's place in the session counted from 0, as pages number it next to
        turns (which count from 0); ``seq`` counts from 1."""
        return self.seq - 1


class ToolUse(models.Model):
    """Which turn a tool_use id belongs to, so a result that arrives later finds it."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    tool_use_id = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "tool_use_id"], name="tool_use_unique_id")
        ]

    def __str__(self) -> str:
        return self.tool_use_id


class CompactionRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        REVERTED = "reverted"

    OPEN_STATUSES = (Status.QUEUED, Status.RUNNING)

    class Trigger(models.TextChoices):
        MANUAL = "manual"
        THRESHOLD = "threshold"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compaction_runs")
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    strategy = models.CharField(max_length=60)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    target_tokens = models.PositiveIntegerField(null=True, blank=True)
    keep_turns = models.PositiveIntegerField(null=True, blank=True)
    level = models.CharField(max_length=12, blank=True)
    original_tokens = models.PositiveIntegerField(null=True, blank=True)
    final_tokens = models.PositiveIntegerField(null=True, blank=True)
    items_removed = models.PositiveIntegerField(default=0)
    items_summarized = models.PositiveIntegerField(default=0)
    compression_ratio = models.FloatField(null=True, blank=True)
    warning = models.CharField(max_length=300, blank=True)
    preserved_anchor_index = models.PositiveIntegerField(null=True, blank=True)
    summary = models.ForeignKey(
        Summary, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    summarizer = models.CharField(max_length=40, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    retries = models.PositiveIntegerField(
        default=0, help_text="Jobs sent again because the summary provider failed every attempt."
    )
    retry_at = models.DateTimeField(
        null=True, blank=True, help_text="When the pending retry is due; the sweep waits for it."
    )
    error = models.TextField(blank=True)
    occupancy_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Window occupancy that triggered it."
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One job at a time per session.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status__in=["queued", "running"]),
                name="compaction_one_open_per_session",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.strategy} {self.status}"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES


class TranscriptSource(models.Model):
    """One transcript as uploaded so far, and the session it is written into.

    One per organization, format and source session id (Claude Code's ``sessionId``; the
    file name and a hash of its first KB for the other formats). Its files hold the text
    received; each file knows through which of its lines it is written.
    """

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    format = models.CharField(
        max_length=20
    )  # as the readers name it: claude-code, anthropic, openai
    source_session_id = models.CharField(max_length=300)
    file_name = models.CharField(max_length=500)
    tool_version = models.CharField(max_length=60, blank=True)
    title = models.CharField(
        max_length=300, blank=True, help_text="The title an upload gave, over the derived one."
    )
    final = models.BooleanField(
        default=False, help_text="The latest upload said the transcript is complete."
    )
    context_window_tokens = models.PositiveIntegerField(default=200_000)
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    frames = models.JSONField(default=dict, blank=True)  # branch ("" for the main one) -> frame id
    skipped = models.JSONField(default=list, blank=True)  # [[line, reason]] of entries not written
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "format", "source_session_id"],
                name="transcript_source_unique",
            )
        ]

    def __str__(self) -> str:
        return self.file_name


class TranscriptFile(models.Model):
    """A file of a transcript (the session file, or a Claude Code subagent file) as received."""

    source = models.ForeignKey(TranscriptSource, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=500)
    main = models.BooleanField(default=False)
    text = models.TextField(blank=True)
    size = models.BigIntegerField(default=0, help_text="UTF-8 bytes of text: the next offset.")
    written_through = models.PositiveIntegerField(
        default=0, help_text="The file's entries up to this line are written."
    )
    digest = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the written messages, in order."
    )

    class Meta:
        ordering = ["-main", "name"]
        constraints = [
            models.UniqueConstraint(fields=["source", "name"], name="transcript_file_unique")
        ]

    def __str__(self) -> str:
        return self.name


def import_id_new() -> str:
    return f"imp-{secrets.token_hex(8)}"


class Import(models.Model):
    """One upload of a transcript and the job that writes what it brought."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    id = models.CharField(primary_key=True, max_length=24, default=import_id_new, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    source = models.ForeignKey(TranscriptSource, on_delete=models.CASCADE, related_name="imports")
    session = models.ForeignKey(
        Session, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    final = models.BooleanField(default=True)
    received_bytes = models.BigIntegerField(default=0)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.pk} {self.status}"
