"""Sending notifications: one job per delivery, retried with backoff until it lands or
its attempts run out (contextops.notifications.sending)."""

from celery import Task, shared_task

from .sending import delivery_attempt


@shared_task(bind=True, name="notifications.delivery_send", max_retries=None, ignore_result=True)
def delivery_send(self: Task, delivery_id: str) -> str:
    """One attempt; a failed one is sent again after its backoff. Not ``acks_late``: a
    delivery is not idempotent at its receiver (each body carries its id for that)."""
    attempt = delivery_attempt(delivery_id=delivery_id)
    if attempt.retry_in is not None:
        raise self.retry(countdown=attempt.retry_in)
    return attempt.status
