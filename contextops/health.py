"""Liveness and readiness: is the process up, and can it reach what it needs.

``/healthz`` answers while the process serves requests (a load balancer's liveness
check); ``/readyz`` also checks the database, the broker and the file storage (the
bucket, when one is set), each within about a second, and that the static files were
collected (outside DEBUG), and answers 503 naming what is down (an orchestrator's
readiness check). A bucket that does not exist or refuses the
keys shows here, not at the first large value or archive run.
"""

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.config import Config
from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.files.storage import storages
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.http import HttpRequest, JsonResponse
from kombu.connection import Connection

logger = logging.getLogger(__name__)

CHECK_TIMEOUT_SECONDS = 1.0


def database_lost(error: BaseException) -> bool:
    """Whether ``error`` means the database went away (a restart, a failover, a dropped
    connection): the request did not happen and is answered 503, not as a fault of ours.

    OperationalError and InterfaceError say so themselves. A connection lost in the middle
    of a statement can also surface as a plain DatabaseError (libpq's own "server closed
    the connection unexpectedly" carries no SQLSTATE, which psycopg raises as
    DatabaseError), and what runs after it in the same transaction as Django's
    ProgrammingError or TransactionManagementError: those count when the connection is
    gone or broken by then. The same errors on a live connection are faults (500)."""
    if isinstance(error, OperationalError | InterfaceError):
        return True
    if not isinstance(error, DatabaseError):
        return False
    raw = connection.connection
    return raw is None or bool(getattr(raw, "closed", False))  # psycopg: closed once lost


@dataclass(frozen=True)
class Readiness:
    database: str  # "ok", or what went wrong
    broker: str
    storage: str
    static: str = "ok"

    @property
    def ready(self) -> bool:
        return self.database == self.broker == self.storage == self.static == "ok"

    def as_body(self) -> dict[str, str]:
        return {
            "status": "ok" if self.ready else "unavailable",
            "database": self.database,
            "broker": self.broker,
            "storage": self.storage,
            "static": self.static,
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


def _storage() -> str:
    """The bucket answers a HEAD with the configured keys; without one, MEDIA_ROOT (where
    large values and archives go) can be written."""
    storage: Any = storages["default"]  # django-storages' S3Storage when a bucket is set
    bucket = getattr(storage, "bucket_name", None)
    if not bucket:
        root = Path(getattr(storage, "location", settings.MEDIA_ROOT))
        while not root.exists():  # created on the first write, where its parent allows
            root = root.parent
        return "ok" if os.access(root, os.W_OK) else "unavailable: not writable"
    try:
        quick = Config(
            connect_timeout=CHECK_TIMEOUT_SECONDS,
            read_timeout=CHECK_TIMEOUT_SECONDS,
            retries={"max_attempts": 1},
        )
        client = storage._create_session().client(
            "s3",
            region_name=storage.region_name,
            endpoint_url=storage.endpoint_url,
            use_ssl=storage.use_ssl,
            verify=storage.verify,
            config=storage.client_config.merge(quick),
        )
        client.head_bucket(Bucket=bucket)
    except Exception as error:  # botocore raises client, credential and endpoint errors
        logger.warning("readiness: storage unavailable: %s", error)
        return f"unavailable: {type(error).__name__}"
    return "ok"


def _static() -> str:
    """Pages link the content-hashed names of static files, which the manifest
    ``collectstatic`` writes lists (outside DEBUG): without it every page would fail."""
    manifest = getattr(staticfiles_storage, "manifest_name", None)
    if manifest is None or staticfiles_storage.exists(manifest):
        return "ok"
    return "unavailable: no manifest of static files; run manage.py collectstatic"


def readiness() -> Readiness:
    """The database, the broker, the file storage and the static files, each checked now."""
    return Readiness(database=_database(), broker=_broker(), storage=_storage(), static=_static())


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when the database, the broker and the storage answer and the static
    files were collected, else 503 naming which not."""
    state = readiness()
    return JsonResponse(state.as_body(), status=200 if state.ready else 503)
