"""Compaction and import jobs: an id in, the service call inside. Both are idempotent (a
job claims its row with a conditional UPDATE), so ``acks_late``."""

from celery import shared_task

from .compaction import CompactionRetry, compaction_execute, compactions_requeue
from .importing.executing import import_execute
from .importing.receiving import imports_requeue

__all__ = ["compaction_run", "compactions_requeue_stale", "import_run", "imports_requeue_stale"]


# max_retries=None: the run counts its own retries (CONTEXTOPS_COMPACTION_MAX_RETRIES), so
# a job the sweep sends again, or the broker redelivers, keeps the count instead of
# starting a fresh one.
@shared_task(
    bind=True,
    name="conversation.compaction_run",
    acks_late=True,
    ignore_result=True,
    max_retries=None,
)
def compaction_run(self, run_id: str) -> None:
    """Run a queued compaction; a second delivery of a claimed or finished run does nothing.

    When the summary provider fails every attempt, the run goes back to the queue and the
    job is retried after CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN seconds, doubled for each
    earlier retry; after the last retry the failure is recorded in the run.
    """
    try:
        compaction_execute(run_id=run_id, retry_provider_errors=True)
    except CompactionRetry as retry:
        raise self.retry(exc=retry, countdown=retry.countdown) from None


@shared_task(name="conversation.compactions_requeue", ignore_result=True)
def compactions_requeue_stale() -> int:
    """Beat: send again the jobs of compactions queued while the broker was down."""
    return compactions_requeue()


@shared_task(name="conversation.import_run", acks_late=True, ignore_result=True)
def import_run(import_id: str) -> None:
    """Write what an upload brought; a second delivery of a claimed or finished job does
    nothing, and what a job that died wrote stays written (the next upload goes on)."""
    import_execute(import_id=import_id)


@shared_task(name="conversation.imports_requeue", ignore_result=True)
def imports_requeue_stale() -> int:
    """Beat: send again the jobs of imports queued while the broker was down."""
    return imports_requeue()
