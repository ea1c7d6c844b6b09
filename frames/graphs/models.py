"""LangGraph threads: checkpoints, channel values and pending writes, as the saver sends them.

A thread belongs to one organization and one session. Checkpoints, channel blobs and
writes are stored as LangGraph's serializer produced them (a type name and bytes), so the
client reads back exactly what it wrote; beside each blob the client sends a JSON
rendering (``preview``) that the dashboard shows and diffs. Metadata is kept twice: as
JSON, which list filters match, and as the serializer's blob, which round-trips exactly.
"""

import uuid

from django.db import models
from django.utils import timezone

from contextops.models import Organization
from frames.models import Frame, Session, Suspension


class GraphThread(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="graph_threads")
    thread_id = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-updated_at", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "thread_id"], name="graph_thread_unique_id"
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "-updated_at"], name="graph_thread_org_recent"),
        ]

    def __str__(self) -> str:
        return self.thread_id


class GraphCheckpoint(models.Model):
    thread = models.ForeignKey(GraphThread, on_delete=models.CASCADE, related_name="checkpoints")
    checkpoint_ns = models.CharField(max_length=255, blank=True)
    checkpoint_id = models.CharField(max_length=64)
    parent_checkpoint_id = models.CharField(max_length=64, blank=True)
    # The checkpoint without its channel values, as the serializer wrote it.
    type = models.CharField(max_length=40)
    data = models.BinaryField()
    # {channel: version}: which blob of each channel this checkpoint holds.
    channel_versions = models.JSONField(default=dict)
    metadata = models.JSONField(default=dict)
    metadata_type = models.CharField(max_length=40, blank=True)
    metadata_data = models.BinaryField(null=True, blank=True)
    # From the metadata, for ``delete_for_runs`` and the dashboard's history.
    run_id = models.CharField(max_length=255, blank=True, db_index=True)
    step = models.IntegerField(null=True, blank=True)
    source = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-checkpoint_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id"],
                name="graph_checkpoint_unique_id",
            ),
        ]

    def __str__(self) -> str:
        return self.checkpoint_id


class GraphBlob(models.Model):
    """One channel's value at one version; checkpoints share a blob until the channel changes."""

    thread = models.ForeignKey(GraphThread, on_delete=models.CASCADE, related_name="blobs")
    checkpoint_ns = models.CharField(max_length=255, blank=True)
    channel = models.CharField(max_length=255)
    version = models.CharField(max_length=80)
    type = models.CharField(max_length=40)
    data = models.BinaryField()
    preview = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "channel", "version"],
                name="graph_blob_unique_version",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel}@{self.version}"


class GraphWrite(models.Model):
    """A pending write of a task against a checkpoint (``put_writes``).

    Keyed by the checkpoint's id, not a foreign key: LangGraph sends a step's writes while
    the checkpoint before them may still be on its way.
    """

    thread = models.ForeignKey(GraphThread, on_delete=models.CASCADE, related_name="writes")
    checkpoint_ns = models.CharField(max_length=255, blank=True)
    checkpoint_id = models.CharField(max_length=64)
    task_id = models.CharField(max_length=255)
    task_path = models.CharField(max_length=1000, blank=True)
    idx = models.IntegerField()
    channel = models.CharField(max_length=255)
    type = models.CharField(max_length=40)
    data = models.BinaryField()
    preview = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task_id", "idx"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                name="graph_write_unique_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}[{self.idx}] {self.channel}"


class GraphInterrupt(models.Model):
    """A task that called LangGraph's ``interrupt()``: a frame of the thread's session,
    suspended until a person decides in the approval inbox."""

    thread = models.ForeignKey(GraphThread, on_delete=models.CASCADE, related_name="interrupts")
    checkpoint_ns = models.CharField(max_length=255, blank=True)
    checkpoint_id = models.CharField(max_length=64)
    task_id = models.CharField(max_length=255)
    node = models.CharField(max_length=255, blank=True)
    value = models.JSONField(null=True, blank=True)
    frame = models.ForeignKey(Frame, on_delete=models.CASCADE, related_name="+")
    suspension = models.ForeignKey(Suspension, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id", "task_id"],
                name="graph_interrupt_unique_task",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread} {self.node}"
