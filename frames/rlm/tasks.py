"""RLM housekeeping: the beat sweep of expired temporary variables."""

from celery import shared_task

from .protocol import temporaries_purge

__all__ = ["temporaries_purge_expired"]


@shared_task(name="rlm.temporaries_purge", ignore_result=True)
def temporaries_purge_expired() -> int:
    """Idempotent: a second run finds nothing expired left."""
    return temporaries_purge()
