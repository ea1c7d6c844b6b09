"""Spans received over OTLP, kept whole: what they became (session, frame, model call) and
every attribute they carried, known to us or not."""

from django.db import models
from django.utils import timezone

from contextops.models import Organization
from frames.models import Frame, Session, Usage


class ReceivedSpan(models.Model):
    """One span as an exporter sent it. A span sent again (an exporter's retry) matches its
    row by ``(organization, trace_id, span_id)`` and is counted once."""

    class Kind(models.TextChoices):
        AGENT = "agent"  # an agent, chain or workflow: a frame
        MODEL_CALL = "model_call"  # a model call: usage, messages
        TOOL = "tool"  # a tool's execution: a tool call and its result
        OTHER = "other"  # kept, and read for its attributes only

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=300, blank=True)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    status_code = models.CharField(max_length=8, blank=True)  # "", "ok" or "error"
    status_message = models.TextField(blank=True)
    # Every attribute as sent (OTLP values as JSON), the span's events, its resource's
    # attributes and its instrumentation scope: nothing the exporter said is dropped.
    attributes = models.JSONField(default=dict, blank=True)
    events = models.JSONField(default=list, blank=True)
    resource = models.JSONField(default=dict, blank=True)
    scope = models.JSONField(default=dict, blank=True)
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    frame = models.ForeignKey(
        Frame, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    usage = models.ForeignKey(
        Usage, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["received_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "trace_id", "span_id"], name="received_span_unique"
            )
        ]
        indexes = [models.Index(fields=["organization", "trace_id"], name="received_span_trace")]

    def __str__(self) -> str:
        return f"{self.name or self.span_id} ({self.kind})"
