"""The event log's retention, run by Celery beat (``archive-ended-session-events`` in settings)."""

from celery import shared_task

from .archive import events_archive_due

__all__ = ["events_archive"]


@shared_task(name="frames.events_archive", acks_late=True, ignore_result=True)
def events_archive(days: int | None = None) -> int:
    """Idempotent: a session's events are archived under its lock, once. Returns how many
    sessions had events moved; ``days`` overrides the configured retention."""
    return len(events_archive_due(days=days))
