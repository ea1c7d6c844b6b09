"""Paging jobs (summarize a handle and move it to indexed) and the periodic resource check."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from .freshness import resources_check as resources_check_service
from .paging import handle_page_out_complete, handles_page_out_requeue

__all__ = ["handle_page_out", "handles_page_out_requeue_stale", "resources_check"]


# A page-out has no row of its own to sweep: when the database goes away mid-job the
# job is sent again (backing off up to a minute) instead of ending with the handle loaded.
@shared_task(
    name="frames.handle_page_out",
    acks_late=True,
    ignore_result=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=1,
    retry_backoff_max=60,
    max_retries=20,
)
def handle_page_out(handle_id: str, actor: str = "") -> None:
    """Idempotent: a handle that is no longer active is left alone."""
    handle_page_out_complete(handle_id=handle_id, actor=actor)


@shared_task(name="frames.handles_page_out_requeue", ignore_result=True)
def handles_page_out_requeue_stale() -> int:
    """Beat: send again the page-outs whose job the broker lost."""
    return handles_page_out_requeue()


@shared_task(name="frames.resources_check", acks_late=True, ignore_result=True)
def resources_check() -> dict[str, int]:
    """Stale, offline and recovered resources (docs/concepts.md#resources); idempotent,
    every move conditional."""
    result = resources_check_service()
    return {"stale": result.stale, "offline": result.offline, "recovered": result.recovered}
