"""A world committed once for a module of transactional tests, put back before each test.

A transactional test (``transaction=True``, the live server) commits what it writes, so
the objects it starts from must be committed too, and Django empties every table after it
(``flush``). Building the same objects again for every test, through the API, and flushing
them after it is most of what such a module costs. Here they are built and committed once;
their rows are copied into tables of their own, and before each test the project's tables
are emptied and filled from those copies in one transaction: each test starts from the same
rows, with the same ids, whatever the test before it wrote or deleted.
"""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import django.test
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import DEFAULT_DB_ALIAS, connections, transaction

T = TypeVar("T")


def _stored_columns(connection: Any, cursor: Any, table: str) -> list[str]:
    """``table``'s columns that hold values, in order: a generated column (facts' search
    vector on PostgreSQL) refuses a value, the database computes it again."""
    if connection.vendor == "postgresql":
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema ="
            " current_schema() AND table_name = %s AND is_generated = 'NEVER'"
            " ORDER BY ordinal_position",
            [table],
        )
        return [name for (name,) in cursor.fetchall()]
    quote = connection.ops.quote_name
    cursor.execute(f"PRAGMA table_xinfo({quote(table)})")
    return [row[1] for row in cursor.fetchall() if row[6] == 0]  # 0: neither hidden nor generated


class TablesSnapshot:
    """The rows of every table of the project's models, copied by the database itself into
    tables of their own (``snapshot_<n>``): no row passes through Python, so every column
    type (JSON, vectors, binary) comes back exactly as it was."""

    def __init__(self, using: str = DEFAULT_DB_ALIAS) -> None:
        self.using = using
        self.tables: list[str] = []
        self.copies: list[tuple[str, str, str]] = []  # (table, copy, columns) of tables with rows

    def take(self) -> None:
        connection = connections[self.using]
        quote = connection.ops.quote_name
        self.tables = sorted(
            connection.introspection.django_table_names(only_existing=True, include_views=False)
        )
        self.copies = []
        with transaction.atomic(using=self.using), connection.cursor() as cursor:
            for n, table in enumerate(self.tables):
                copy = f"snapshot_{n}"
                columns = ", ".join(quote(c) for c in _stored_columns(connection, cursor, table))
                cursor.execute(f"DROP TABLE IF EXISTS {quote(copy)}")
                cursor.execute(
                    f"CREATE TABLE {quote(copy)} AS SELECT {columns} FROM {quote(table)}"
                )
                cursor.execute(f"SELECT 1 FROM {quote(copy)} LIMIT 1")
                if cursor.fetchone():
                    self.copies.append((table, copy, columns))

    def restore(self, then: Callable[[], None] | None = None) -> None:
        """Every table as it was when taken, in one transaction: the foreign keys (Django
        makes them deferrable) are checked at its commit, once every row is back.
        ``then()`` runs inside the same transaction."""
        connection = connections[self.using]
        quote = connection.ops.quote_name
        postgresql = connection.vendor == "postgresql"
        statements = [
            # Nothing here needs to outlive a crash of the server: the commit does not
            # wait for the disk, the rows are seen by other connections all the same.
            "SET LOCAL synchronous_commit = off" if postgresql else "",
            "SET CONSTRAINTS ALL DEFERRED" if postgresql else "PRAGMA defer_foreign_keys = ON",
            *(f"DELETE FROM {quote(table)}" for table in self.tables),
            *(
                f"INSERT INTO {quote(table)} ({columns}) SELECT {columns} FROM {quote(copy)}"
                for table, copy, columns in self.copies
            ),
        ]
        with transaction.atomic(using=self.using), connection.cursor() as cursor:
            if postgresql:
                # One round trip: psycopg sends statements without parameters as one query.
                cursor.execute("; ".join(s for s in statements if s))
            else:
                for statement in filter(None, statements):
                    cursor.execute(statement)
            if then is not None:
                then()

    def drop(self) -> None:
        connection = connections[self.using]
        quote = connection.ops.quote_name
        with transaction.atomic(using=self.using), connection.cursor() as cursor:
            for n in range(len(self.tables)):
                cursor.execute(f"DROP TABLE IF EXISTS {quote(f'snapshot_{n}')}")


def tables_emptied(using: str = DEFAULT_DB_ALIAS) -> None:
    """Every table emptied as a transactional test leaves them (Django's ``flush``, as
    tests/conftest.py has it), so the next test of this process finds what it expects."""
    call_command(
        "flush",
        verbosity=0,
        interactive=False,
        database=using,
        reset_sequences=False,
        allow_cascade=False,
        inhibit_post_migrate=False,
    )


@contextmanager
def committed_once(
    django_db_blocker: Any, build: Callable[[], T]
) -> Iterator[tuple[T, TablesSnapshot]]:
    """For a module-scoped fixture (``with committed_once(...) as (built, snapshot)``):
    ``build()`` once on emptied tables (as every transactional test but a process's first
    finds them), committed, and a snapshot of every table taken. After the module's last
    test the snapshot's tables are dropped and every table is emptied, as the last test's
    flush would have left them."""
    snapshot = TablesSnapshot()
    with django_db_blocker.unblock():
        try:
            tables_emptied()
            built = build()
            snapshot.take()
        except BaseException:
            snapshot.drop()
            tables_emptied()
            raise
    try:
        yield built, snapshot
    finally:
        with django_db_blocker.unblock():
            snapshot.drop()
            tables_emptied()


class _RequestsInFlight:
    """The threads in the middle of a request of this process (between Django's
    ``request_started`` and ``request_finished``): the live server runs each connection on
    a thread of its own, which then waits for the connection's next request."""

    def __init__(self) -> None:
        self.threads: set[threading.Thread] = set()
        self.changed = threading.Condition()
        request_started.connect(self.started, dispatch_uid="tests.snapshot.started")
        request_finished.connect(self.finished, dispatch_uid="tests.snapshot.finished")

    def started(self, **kwargs: Any) -> None:
        with self.changed:
            self.threads.add(threading.current_thread())

    def finished(self, **kwargs: Any) -> None:
        with self.changed:
            self.threads.discard(threading.current_thread())
            self.changed.notify_all()

    def none(self) -> bool:
        return not any(thread.is_alive() for thread in self.threads)

    def wait(self, timeout: float = 5.0) -> None:
        """Until no other thread is in a request. The live server sends its answer, then
        ends the request (``request_finished``: Django checks its database connection).
        The client, and so the test, may be done before that: the database is then closed
        to the server by pytest-django, and it logs an error. A flush after the test used
        to leave it the time; a restore is quicker. Waiting for the connections' threads
        to end instead would wait for every keep-alive connection still open."""
        me = threading.current_thread()
        with self.changed:
            self.threads.discard(me)
            self.changed.wait_for(self.none, timeout)


_requests = _RequestsInFlight()


@contextmanager
def restored_for_each_test(django_db_blocker: Any, restore: Callable[[], None]) -> Iterator[None]:
    """Around the test, in a module's ``_django_db_helper`` (the fixture behind pytest-django's
    ``db``, ``transactional_db``, ``live_server`` and ``django_db`` mark): a
    TransactionTestCase whose setup is ``restore()`` instead of nothing, and whose teardown
    leaves the rows to the next test's restore instead of flushing them. Everything else
    of Django's is kept: the mail outbox emptied, connections closed after the test. Every
    test of the module so runs on committed rows, the ones it does not request
    ``transactional_db`` for too. The ``django_db`` mark's options are not read: a test
    that needs ``reset_sequences`` or ``serialized_rollback`` belongs in another module."""

    class WorldTestCase(django.test.TransactionTestCase):
        @classmethod
        def _fixture_setup(cls) -> None:
            restore()

        def _fixture_teardown(self) -> None:
            pass

    with django_db_blocker.unblock():
        WorldTestCase.setUpClass()
        test_case = WorldTestCase(methodName="__init__")
        if not getattr(WorldTestCase, "_pre_setup_ran_eagerly", False):  # Django >= 6.0
            test_case._pre_setup()
        try:
            yield
        finally:
            _requests.wait()
            test_case._post_teardown()
            WorldTestCase.tearDownClass()
            WorldTestCase.doClassCleanups()
