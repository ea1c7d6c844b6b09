"""The retention of whole sessions (``CONTEXTOPS_SESSION_RETENTION_DAYS``): beat's hourly job."""

from celery import shared_task

from .services import sessions_delete_expired as _sessions_delete_expired

__all__ = ["sessions_delete_expired"]


@shared_task(name="frames.sessions_delete_expired", acks_late=True, ignore_result=True)
def sessions_delete_expired(days: int | None = None) -> int:
    """Idempotent: each session is deleted under its lock, once; a second run finds it
    gone. Returns how many sessions were deleted; ``days`` overrides the setting."""
    return len(_sessions_delete_expired(days=days))
