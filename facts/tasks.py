"""Periodic jobs of the facts app (thin: the work is in services)."""

from celery import shared_task

from . import services


@shared_task(name="facts.tasks.working_set_expire", acks_late=True)
def working_set_expire() -> int:
    """Delete expired working-set items (beat runs it every minute); returns how many went."""
    return services.working_set_expire()
