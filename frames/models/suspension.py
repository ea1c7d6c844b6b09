"""Suspensions: opaque single-use tokens for suspended frames (docs/concepts.md#suspensions)."""

import hashlib

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .core import Frame, Session


def token_hash(token: str) -> str:
    """The SHA-256 hex digest of ``token``: what the log and the dashboard show instead."""
    return hashlib.sha256(token.encode()).hexdigest()


class Suspension(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        EXPIRED = "expired"
        RESUMED = "resumed"

    OPEN_STATUSES = (Status.PENDING, Status.APPROVED)

    token = models.CharField(max_length=64, primary_key=True)
    frame = models.ForeignKey(Frame, on_delete=models.CASCADE, related_name="suspensions")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="suspensions")
    reason = models.TextField()
    requires_approval = models.BooleanField(default=False)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    suspended_by = models.CharField(max_length=200)
    suspended_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    resumed_at = models.DateTimeField(null=True, blank=True)
    # Who resumed the frame (an actor: ``agent:<name>/key:<prefix>``, ``user:<name>``),
    # when the work went on without the token's resume (a LangGraph thread resumed past
    # its interrupt); empty otherwise.
    resumed_by = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["suspended_at"]
        permissions = [("approve_suspension", "Can approve or reject suspended frames")]
        constraints = [
            # One open suspension per frame: a frame waits on one decision at a time.
            models.UniqueConstraint(
                fields=["frame"],
                condition=Q(status__in=["pending", "approved"]),
                name="suspension_one_open_per_frame",
            )
        ]

    def __str__(self) -> str:
        return f"{self.status}: {self.reason[:40]}"

    def is_expired(self, now=None) -> bool:
        """True when an expiry is set and has passed; resolved suspensions never expire."""
        now = now or timezone.now()
        return (
            self.status in self.OPEN_STATUSES
            and self.expires_at is not None
            and self.expires_at <= now
        )
