"""PostgreSQL connections: array literals escaped without a Python call per character.

Django 5.2 inserts a ``bulk_create`` batch as one array per column (``UNNEST``), and with
client-side binding (Django's default) psycopg writes each array as text in Python,
escaping every double quote and backslash of every element through a regex callback.
A batch of messages or turns is mostly JSON, quotes everywhere: the escaping cost more
than the insert (a large transcript import spent a third of its time there). The dumper
here escapes with ``bytes.replace`` and writes the same bytes
(``tests/contextops/test_postgres.py`` compares them with psycopg's own).
"""

from typing import Any

from django.db import migrations
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from psycopg.abc import Buffer
from psycopg.types.array import ListDumper


class _QuotesEscaped:
    """What ``ListDumper`` asks of its ``_re_esc`` pattern (``sub(rb"\\\\\\1", item)``): a
    backslash before each double quote and backslash of an element."""

    @staticmethod
    def sub(_replacement: bytes, item: Buffer) -> bytes:
        return bytes(item).replace(b"\\", b"\\\\").replace(b'"', b'\\"')


class ArrayDumper(ListDumper):
    """psycopg's text array dumper with its element escaping done by ``bytes.replace``."""

    # psycopg's own attribute: should a later psycopg stop using it, arrays are written
    # by psycopg's code again, correct and only slower.
    _re_esc = _QuotesEscaped()  # type: ignore[assignment]


@receiver(connection_created)
def arrays_dumped(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Every new PostgreSQL connection writes text arrays with ``ArrayDumper``."""
    if connection.vendor == "postgresql":
        connection.connection.adapters.register_dumper(list, ArrayDumper)


def postgresql_only(create: list[str], drop: list[str]) -> Any:
    """A migration operation running ``create`` (``drop`` to reverse it) on PostgreSQL and
    nothing elsewhere: what SQLite has no equivalent of (full text, functions)."""

    def run(statements: list[str]) -> Any:
        def execute(apps: Any, schema_editor: Any) -> None:
            if schema_editor.connection.vendor == "postgresql":
                for statement in statements:
                    schema_editor.execute(statement)

        return execute

    return migrations.RunPython(run(create), run(drop))
