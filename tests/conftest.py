"""Shared fixtures: organizations, agents with keys, an API client, dashboard users, a worker."""

import json
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, TypeVar

import pytest
import time_machine
from django.apps import apps
from django.conf import settings
from django.db import transaction
from django.test import Client
from django.utils import timezone

from contextops.tenancy import api_key_create, user_create

# CONTEXTOPS_NO_SKIPS=1 (the PostgreSQL and Redis pass of .ci/run) turns a skip into a
# failure: a missing service or binary must not pass for a green run.
pytest_plugins = [
    "pytester",
    "tests.strict_skips",
    "tests.fuzz_seed",
    "tests.hypothesis_profiles",
    "tests.xdist_groups",
]

IS_POSTGRES = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
IS_REDIS = settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://"))

postgres_only = pytest.mark.skipif(
    not IS_POSTGRES,
    reason="needs PostgreSQL: row locks and truly parallel transactions (set DATABASE_URL)",
)


def _empty_tables_by_delete() -> None:
    """A transactional test (``transaction=True``, the live server, a worker) ends with
    Django's flush, which on PostgreSQL is one TRUNCATE of every table: TRUNCATE gives each
    table new files, 0.3 s to 2 s on a busy CI machine, for tables that hold a few rows.
    DELETE of every table, in one transaction with the foreign keys checked at its commit
    (Django's are DEFERRABLE INITIALLY DEFERRED), empties the same tables in milliseconds.
    The tables end as empty as before and sequences are not reset in either case; a flush
    that resets sequences (``reset_sequences=True``) still truncates."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        return ["SET CONSTRAINTS ALL DEFERRED;"] + [
            f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};"
            for table in tables
        ]

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign]


# Rows the schema implies: migrate writes them, the tests never change them.
SCHEMA_ROWS = frozenset({"django_content_type", "auth_permission"})


def _flush_keeps_schema_rows() -> None:
    """Django's flush empties every table, content types and permissions included, then
    emits post_migrate so that contenttypes and auth write them all again: 0.15 s of the
    0.18 s a transactional test's teardown takes, once for each of some 900 such tests.
    Here the flush leaves those two tables alone and emits nothing, so they keep what
    migrate wrote (content types and permissions are made once, with the test database;
    a ``ContentType`` a test asks for that is missing is still made on demand). Those are
    post_migrate's only receivers here (tests/ci/test_harness.py holds that); every other
    table is emptied as before."""
    from django.core.management.commands import flush

    def sql_flush(style, connection, reset_sequences=True, allow_cascade=False):
        tables = connection.introspection.django_table_names(
            only_existing=True, include_views=False
        )
        return connection.ops.sql_flush(
            style,
            [table for table in tables if table not in SCHEMA_ROWS],
            reset_sequences=reset_sequences,
            allow_cascade=allow_cascade,
        )

    flush.sql_flush = sql_flush  # type: ignore[attr-defined]
    flush.emit_post_migrate_signal = lambda *args, **kwargs: None  # type: ignore[attr-defined]


def _live_server_sends_without_delay() -> None:
    """The live server (Django's ``WSGIServer``) sends an answer's headers and its body in
    separate writes. With Nagle's algorithm on, the body then waits for the client to
    acknowledge the headers, which Linux delays by 40 ms: 58 ms for a list of sessions
    that takes 13 ms to make, on every answer of the thousands the live-server tests read.
    gunicorn, which production runs, sets TCP_NODELAY on its socket; here each connection
    the live server accepts gets it too (tests/ci/test_harness.py holds that)."""
    import socket

    from django.core.servers import basehttp

    accept = basehttp.WSGIServer.get_request

    def get_request(self):
        connection, address = accept(self)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address

    basehttp.WSGIServer.get_request = get_request  # type: ignore[method-assign]


if IS_POSTGRES:
    _empty_tables_by_delete()
_flush_keeps_schema_rows()
_live_server_sends_without_delay()


@dataclass
class ApiClient:
    """The JSON API as an agent sees it: paths relative to /api/v1, bearer key attached."""

    key: str
    client: Client = field(default_factory=Client)
    organization: Any = None
    agent: Any = None

    def _call(self, method: str, path: str, body: Any = None, **extra):
        kwargs: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {self.key}"} if self.key else {}
        kwargs.update(extra)
        url = "/api/v1" + path
        if body is not None:
            return getattr(self.client, method)(
                url, data=json.dumps(body), content_type="application/json", **kwargs
            )
        return getattr(self.client, method)(url, **kwargs)

    def get(self, path: str, params: dict | None = None, **extra):
        kwargs: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {self.key}"} if self.key else {}
        kwargs.update(extra)
        return self.client.get("/api/v1" + path, data=params or {}, **kwargs)

    def post(self, path: str, body: Any = None, **extra):
        return self._call("post", path, body if body is not None else {}, **extra)

    def put(self, path: str, body: Any = None, **extra):
        return self._call("put", path, body if body is not None else {}, **extra)

    def delete(self, path: str, **extra):
        return self._call("delete", path, **extra)


T = TypeVar("T")


def built_once(django_db_blocker: Any, build: Callable[[], T]) -> Iterator[T]:
    """For a module-scoped fixture (``yield from built_once(django_db_blocker, build)``):
    ``build()`` once, inside a transaction open for the module and rolled back after its
    last test. Each test's own transaction (pytest-django's ``db``) is a savepoint inside
    it, rolled back when the test ends: what a test writes or deletes is gone before the
    next one starts, as when the objects were built for each test (Django's
    ``setUpTestData``). A test takes fresh copies of the objects (``refresh_from_db``)
    when it may change them in memory."""
    atomic = transaction.atomic()
    # As Django marks its TestCase transactions: a durable block inside is still allowed.
    atomic._from_testcase = True  # type: ignore[attr-defined]
    with django_db_blocker.unblock():
        atomic.__enter__()
        try:
            built = build()
        except BaseException:
            atomic.__exit__(*sys.exc_info())
            raise
    try:
        yield built
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def api_client_create(org: str = "Acme", agent: str = "researcher") -> ApiClient:
    """An ApiClient for a new key of ``agent`` in ``org`` (an employee), as ``api`` gives."""
    key, raw = api_key_create(org_name=org, agent_name=agent, authority="employee", department="")
    return ApiClient(key=raw, organization=key.agent.organization, agent=key.agent)


@pytest.fixture
def make_api(db):
    """Factory: an ApiClient for a new key of ``agent`` in ``org`` with ``authority``."""

    def make(
        org: str = "Acme",
        agent: str = "researcher",
        authority: str = "employee",
        department: str = "",
    ) -> ApiClient:
        key, raw = api_key_create(
            org_name=org, agent_name=agent, authority=authority, department=department
        )
        return ApiClient(key=raw, organization=key.agent.organization, agent=key.agent)

    return make


@pytest.fixture
def api(make_api) -> ApiClient:
    return make_api()


@pytest.fixture
def other_api(make_api) -> ApiClient:
    """An agent of another organization: everything of Acme must answer 404 to it."""
    return make_api(org="Globex", agent="intruder", authority="admin")


@pytest.fixture
def make_user(db):
    def make(
        username: str = "ada",
        org: str = "Acme",
        approver: bool = False,
        admin: bool = False,
        password: str = "pw-for-tests-1",
    ):
        return user_create(
            org_name=org, username=username, password=password, approver=approver, admin=admin
        )

    return make


@pytest.fixture
def member_client(make_user) -> Client:
    """A logged-in dashboard client for a plain member of Acme."""
    client = Client()
    client.force_login(make_user())
    return client


@pytest.fixture
def audit_page(make_user):
    """The audit log page (``/audit/``) as an admin of ``org`` reads it: a person's
    dashboard act must show on their own organization's page and on no other's."""

    def read(org: str = "Acme") -> str:
        client = Client()
        client.force_login(make_user(username=f"auditor-{org.lower()}", org=org, admin=True))
        response = client.get("/audit/")
        assert response.status_code == 200
        return response.content.decode()

    return read


@pytest.fixture
def approver_client(make_user) -> Client:
    client = Client()
    client.force_login(make_user(username="grace", approver=True))
    return client


@pytest.fixture
def celery_worker(transactional_db) -> Iterator[Any]:
    """A real Celery worker in this process, consuming from the suite's broker.

    The broker is Redis when REDIS_URL is set (CI) and kombu's in-memory transport
    otherwise. Jobs run on their own thread against the same database the test uses.
    It starts on an empty queue: jobs earlier tests sent without a worker (a compaction
    queued on commit, say) name rows that are gone, and working through that backlog
    would only delay this test's own jobs.

    Starting it sets Celery's logging up, which takes the root logger's handlers
    (``worker_hijack_root_logger``); they are given back when it stops, so a later test
    of this process still logs through settings.LOGGING (tests/contextops/test_request_id.py).
    """
    from celery.contrib.testing.worker import start_worker

    from contextops.celery import app

    loggers = [logging.getLogger(name) for name in ("", "celery", "celery.task")]
    kept = [(logger, logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    app.control.purge()
    try:
        with start_worker(
            app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=30
        ) as worker:
            yield worker
    finally:
        for logger, handlers, level, propagate in kept:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate


@pytest.fixture
def start_session(api):
    """POST /sessions for ``api`` (or ``client``) and return its JSON."""

    def start(client=None, **body):
        body.setdefault("identity", {"user_name": "Ada", "user_id": "u-1", "authority": "employee"})
        response = (client or api).post("/sessions", body)
        assert response.status_code == 201, response.content
        return response.json()

    return start


@pytest.fixture
def push(api):
    """POST /sessions/{id}/frames; returns the response (status not checked)."""

    def push(session_id, total, parent=None, goal="Work", client=None, **budget):
        body = {"goal": goal, "budget": {"total": total, **budget}}
        if parent is not None:
            body["parent_frame_id"] = parent
        return (client or api).post(f"/sessions/{session_id}/frames", body)

    return push


@pytest.fixture
def push_ok(push):
    """POST /sessions/{id}/frames; asserts 201 and returns the frame."""

    def push_ok(*args, **kwargs):
        response = push(*args, **kwargs)
        assert response.status_code == 201, response.content
        return response.json()

    return push_ok


@pytest.fixture
def suspend(api):
    """POST /frames/{id}/suspend; returns the response (status not checked)."""

    def suspend(frame_id, reason="Waiting for a person", client=None, **body):
        return (client or api).post(f"/frames/{frame_id}/suspend", {"reason": reason, **body})

    return suspend


@pytest.fixture
def suspend_ok(suspend):
    def suspend_ok(*args, **kwargs):
        response = suspend(*args, **kwargs)
        assert response.status_code == 201, response.content
        return response.json()

    return suspend_ok


@pytest.fixture
def queued_jobs():
    """How many jobs wait in this test process's queue on the broker (no worker consumes it)."""
    from contextops.celery import app

    def count() -> int:
        with app.connection_for_write() as conn:
            return conn.default_channel.queue_declare(
                queue=app.conf.task_default_queue, passive=False
            ).message_count

    return count


@pytest.fixture
def clock() -> Iterator[Any]:
    """This process's clock, frozen at the test's start: ``clock.shift(seconds)`` moves it on.

    Time in a worker or server process of its own does not move with it: there, date the
    rows in the past instead."""
    with time_machine.travel(timezone.now(), tick=False) as traveller:
        yield traveller


@pytest.fixture
def prices(db):
    """The price table the migration ships. A transactional test empties every table when
    it ends, data migrations' rows included, so tests that read prices load them again."""
    for migration in ("0008_dashboard", "0014_prices_of_current_claude_models"):
        import_module(f"frames.migrations.{migration}").prices_load(apps, None)


# An S3-compatible bucket (moto's standalone server in a subprocess) for the storage tests.
# Embeddings from a fake provider whose vectors a test can compute (tests/fakes/embeddings.py).
from tests.fakes.embeddings import fake_embedder  # noqa: E402,F401
from tests.s3 import s3_bucket, s3_server  # noqa: E402,F401
