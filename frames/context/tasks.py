"""Paging jobs: summarize a handle and move it to indexed."""

from celery import shared_task

from .paging import handle_page_out_complete

__all__ = ["handle_page_out"]


@shared_task(name="frames.handle_page_out", acks_late=True, ignore_result=True)
def handle_page_out(handle_id: str, actor: str = "") -> None:
    """Idempotent: a handle that is no longer active is left alone."""
    handle_page_out_complete(handle_id=handle_id, actor=actor)
