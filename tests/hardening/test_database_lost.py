"""A database lost in the middle of a write is answered 503 ``unavailable``, whatever
error the driver raises for it, and the write changed nothing.

A restart cuts a request's connection between any two statements. psycopg says so with
OperationalError most of the time, but libpq's own "server closed the connection
unexpectedly" carries no SQLSTATE, and psycopg raises that one as a plain
DatabaseError; what the request runs after it in the same transaction gets Django's
ProgrammingError or TransactionManagementError. Each request here loses its connection
at one statement (every statement in turn, until the request runs through), the way the
driver sees it: the connection broken, the error raised as psycopg raises it.
"""

import uuid

import pytest
from django.db import DatabaseError, connection
from django.test import Client

from frames.models import ContextHandle
from tests.conftest import IS_POSTGRES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("jobs_sent")]

UNAVAILABLE = {
    "error": "unavailable",
    "detail": "The database is unavailable; nothing was changed. Retry shortly.",
}


def _connection_lost() -> None:
    """The connection as a restart leaves it: broken, psycopg reporting it closed. SQLite
    has no server to lose: its connection stays as it is."""
    if IS_POSTGRES:
        connection.connection.pgconn.finish()


class LostAt:
    """An execute wrapper: the ``at``-th statement (from 0) finds the connection lost and
    raises what psycopg raises for libpq's own message."""

    def __init__(self, at: int, error: str):
        self.at, self.statements, self.lost = at, 0, False
        self.error = getattr(connection.Database, error)  # the driver's own class

    def __call__(self, execute, sql, params, many, context):
        self.statements += 1
        if self.statements - 1 == self.at:
            self.lost = True
            _connection_lost()
            with connection.wrap_database_errors:  # as Django wraps the driver's errors
                raise self.error("server closed the connection unexpectedly")
        return execute(sql, params, many, context)


def _post(api, path: str, key: str, body: str = "{}"):
    return Client().post(
        "/api/v1" + path,
        data=body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def _handle_row(handle_id: str) -> tuple:
    return ContextHandle.objects.filter(pk=handle_id).values_list(
        "state", "summary", "page_out_requested_at"
    )[0]


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(
            "DatabaseError",
            marks=pytest.mark.skipif(
                not IS_POSTGRES,
                reason="SQLite has no connection to lose: a plain DatabaseError there is a fault",
            ),
        ),
        "OperationalError",
        "InterfaceError",
    ],
)
def test_a_page_out_whose_database_is_lost_at_any_statement_answers_503(api, acme, error):
    handle_id = acme["ids"]["handle_id"]
    before = _handle_row(handle_id)
    path = f"/handles/{handle_id}/page-out"
    at = 0
    while True:
        key = str(uuid.uuid4())
        lost = LostAt(at, error)
        try:
            with connection.execute_wrapper(lost):
                response = _post(api, path, key)
        finally:
            connection.close()  # the next request opens a connection of its own
        if not lost.lost:
            break  # the request ran through before its statement came: all were tried
        assert response.status_code in (202, 503), (at, response.content)
        if response.status_code == 503:
            assert response.json() == UNAVAILABLE, at
            assert response["Retry-After"] == "2"
            assert _handle_row(handle_id)[:2] == before[:2], f"changed, lost at {at}"
            retried = _post(api, path, key)  # the client's retry: the key is free again
            assert retried.status_code == 202, (at, retried.content)
        at += 1
    assert response.status_code == 202, response.content
    assert at >= 6, "the page-out ran fewer statements than the key, claim and stamp need"


def test_a_database_error_on_a_live_connection_is_still_a_fault(api, acme, monkeypatch):
    """Only a lost connection makes a database error a 503: on a live one it is ours."""

    def broken(*args, **kwargs):
        raise DatabaseError("a bug of ours")

    monkeypatch.setattr("frames.context.api.handle_page_out_request", broken)
    response = _post(api, f"/handles/{acme['ids']['handle_id']}/page-out", str(uuid.uuid4()))
    assert response.status_code == 500, response.content
    assert response.json()["error"] == "internal_error"
