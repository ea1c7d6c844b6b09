"""Liveness and readiness: is the process up, and can it reach what it needs.

``/healthz`` answers while the process serves requests (a load balancer's liveness
check); ``/readyz`` also checks the database and the broker, each within about a
second, and answers 503 naming what is down (an orchestrator's readiness check).
"""

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection
from kombu import Connection

logger = logging.getLogger(__name__)

CHECK_TIMEOUT_SECONDS = 1.0


@dataclass(frozen=True)
class Readiness:
    database: str  # "ok", or what went wrong
    broker: str

    @property
    def ready(self) -> bool:
        return self.database == "ok" and self.broker == "ok"

    def as_body(self) -> dict[str, str]:
        return {
            "status": "ok" if self.ready else "unavailable",
            "database": self.database,
            "broker": self.broker,
        }


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        logger.warning("readiness: database unavailable: %s", error)
        return f"unavailable: {type(error).__name__}"
    return "ok"


def _broker() -> str:
    url = settings.CELERY_BROKER_URL
    try:
        with Connection(url, connect_timeout=CHECK_TIMEOUT_SECONDS) as broker:
            broker.ensure_connection(max_retries=1, timeout=CHECK_TIMEOUT_SECONDS)
    except Exception as error:  # kombu raises transport-specific errors
        logger.warning("readiness: broker unavailable: %s", error)
        return f"unavailable: {type(error).__name__}"
    return "ok"


def readiness() -> Readiness:
    """The database and the broker, each checked now."""
    return Readiness(database=_database(), broker=_broker())
