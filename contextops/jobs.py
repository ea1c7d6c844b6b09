"""Sending jobs to the workers without letting a broker outage fail a request.

A job is sent after the transaction that made its row commits. When the broker cannot
be reached the request still succeeds: the job's row stays queued in the database and
a periodic sweep sends it again once the broker is back (compactions), or the caller
learns at once that the job could not be taken (``job_send`` returns False). A job sent
while a request is answered carries that request's id (contextops.requestid) in its
``request_id`` message header.
"""

import logging
from typing import Any

from django.db import transaction
from kombu.exceptions import OperationalError

from .requestid import NONE, request_id_current

logger = logging.getLogger(__name__)

# Fail fast: a request waits at most about a second for a broker that is down.
PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.25,
    "interval_max": 0.5,
}


def job_send(task: Any, *args: Any) -> bool:  # a Celery task: celery ships no types
    """Send ``task(*args)`` now; False (and a warning in the log) when the broker is unreachable."""
    request_id = request_id_current()
    headers = {"request_id": request_id} if request_id != NONE else None
    try:
        task.apply_async(args=args, headers=headers, retry=True, retry_policy=PUBLISH_RETRY_POLICY)
    except (OperationalError, ConnectionError, OSError) as error:
        logger.warning("broker unavailable, %s%r not sent: %s", task.name, args, error)
        return False
    return True


def job_send_on_commit(task: Any, *args: Any) -> None:
    """Send ``task(*args)`` once the current transaction commits; never raises for the broker."""
    transaction.on_commit(lambda: job_send(task, *args))
