"""Compaction jobs: an id in, the service call inside. Idempotent, so ``acks_late``."""

from celery import shared_task

from .services import compaction_execute, compactions_requeue

__all__ = ["compaction_run", "compactions_requeue_stale"]


@shared_task(name="conversation.compaction_run", acks_late=True, ignore_result=True)
def compaction_run(run_id: str) -> None:
    """Run a queued compaction; a second delivery of a claimed or finished run does nothing."""
    compaction_execute(run_id=run_id)


@shared_task(name="conversation.compactions_requeue", ignore_result=True)
def compactions_requeue_stale() -> int:
    """Beat: send again the jobs of compactions queued while the broker was down."""
    return compactions_requeue()
