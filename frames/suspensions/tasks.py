"""Expiry of suspension tokens, run by Celery beat (``expire-suspensions`` in settings)."""

from celery import shared_task

from frames.services.expiry import suspensions_expire as suspensions_expire_service

from .notices import approvals_expiring_notify as approvals_expiring_notify_service

__all__ = ["approvals_expiring_notify", "suspensions_expire"]


@shared_task(name="frames.tasks.suspensions_expire", acks_late=True, ignore_result=True)
def suspensions_expire() -> int:
    """Idempotent: each overdue suspension is claimed by a conditional UPDATE once."""
    return suspensions_expire_service()


@shared_task(name="frames.tasks.approvals_expiring_notify", ignore_result=True)
def approvals_expiring_notify() -> int:
    """Idempotent: an expiring approval is announced once (its delivery's event key)."""
    return approvals_expiring_notify_service()
