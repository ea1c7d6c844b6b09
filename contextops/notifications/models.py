"""Where an organization's notifications go (destinations) and each one sent (deliveries)."""

import uuid

from django.db import models
from django.utils import timezone

from contextops.models import Organization

EVENTS = (
    ("approval.pending", "A frame waits for a person's approval"),
    ("approval.decided", "An approval was decided (approved or rejected)"),
    ("approval.expiring", "An approval expires soon and nobody decided"),
    ("approval.expired", "An approval expired without a decision"),
    ("compaction.failed", "A compaction run failed"),
)
EVENT_NAMES = tuple(name for name, _ in EVENTS)
DEFAULT_EVENTS = EVENT_NAMES[:4]


def default_events() -> list[str]:
    return list(DEFAULT_EVENTS)


class Destination(models.Model):
    """A webhook, a Slack-compatible incoming webhook or the organization's approvers by
    e-mail, for the events it lists. A webhook's ``secret`` signs its bodies; it is shown
    once, when the destination is made."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "Webhook (signed JSON)"
        SLACK = "slack", "Slack-compatible incoming webhook"
        EMAIL = "email", "E-mail to the organization's approvers"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="notification_destinations"
    )
    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    url = models.URLField(max_length=2000, blank=True)
    secret = models.CharField(max_length=100, blank=True, editable=False)
    events = models.JSONField(default=default_events)
    active = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["organization", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"], name="destination_unique_name_per_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def secret_hint(self) -> str:
        """The secret's last four characters: enough to tell which one a receiver holds."""
        return f"…{self.secret[-4:]}" if self.secret else ""


class Delivery(models.Model):
    """One event sent to one destination: every attempt counted, the last answer kept."""

    class Status(models.TextChoices):
        PENDING = "pending"  # queued, or waiting for its next attempt
        DELIVERED = "delivered"
        FAILED = "failed"  # attempts exhausted, or a refusal no retry would change

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    destination = models.ForeignKey(
        Destination, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=40)
    # What makes the event one: a second notice of it (the expiry sweep running twice)
    # adds no delivery.
    event_key = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["destination", "event_key"], name="delivery_unique_event"
            )
        ]
        indexes = [models.Index(fields=["organization", "-created_at"], name="delivery_org_recent")]

    def __str__(self) -> str:
        return f"{self.event} → {self.destination_id} ({self.status})"
