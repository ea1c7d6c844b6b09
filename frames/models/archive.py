"""Where an ended session's archived events went (the retention policy, frames.archive)."""

import uuid

from django.db import models
from django.utils import timezone

from .core import Session


class EventArchive(models.Model):
    """One JSON Lines file in the default storage holding events ``first_seq``..``last_seq``.

    Written once, never changed; the events it holds are no longer in the event table.
    A session may have several (events appended after one archive go to the next).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="event_archives")
    file_name = models.CharField(max_length=500)
    first_seq = models.BigIntegerField()
    last_seq = models.BigIntegerField()
    events = models.PositiveIntegerField()
    size_bytes = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session", "first_seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "first_seq"], name="event_archive_unique_first_seq"
            )
        ]

    def __str__(self) -> str:
        return f"events #{self.first_seq}-#{self.last_seq} in {self.file_name}"
