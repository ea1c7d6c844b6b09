"""Beat jobs of the core: forgetting idempotency answers once they are a day old."""

from celery import shared_task

from .idempotency import idempotency_purge as purge


@shared_task(name="contextops.tasks.idempotency_purge")
def idempotency_purge() -> int:
    return purge()
