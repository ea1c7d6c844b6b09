"""Expiry of suspension tokens, run by Celery beat (``expire-suspensions`` in settings)."""

from celery import shared_task

from .services import suspensions_expire as suspensions_expire_service

__all__ = ["suspensions_expire"]


@shared_task(name="frames.tasks.suspensions_expire", acks_late=True, ignore_result=True)
def suspensions_expire() -> int:
    """Idempotent: each overdue suspension is claimed by a conditional UPDATE once."""
    return suspensions_expire_service()
