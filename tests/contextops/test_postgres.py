"""PostgreSQL connections write array literals with ``ArrayDumper``: the bytes psycopg's
own dumper writes, and rows that come back as they went in."""

import pytest
from django.db import connection
from psycopg.adapt import PyFormat
from psycopg.types.array import ListDumper
from psycopg.types.json import Jsonb

from contextops.postgres import ArrayDumper
from frames.models import Event
from frames.services.sessions import session_create

AWKWARD = [
    "",
    "plain",
    "NULL",
    "null",
    'a "quoted" word',
    'back\\slash and \\" both',
    "\\",
    '"',
    "{braces}, commas; and\ttabs\nand newlines",
    "unicode \u2003 space, é, 日本, 🙂",
    " leading and trailing ",
]


@pytest.mark.parametrize(
    "value",
    [
        AWKWARD,
        [None, *AWKWARD, None],
        [AWKWARD[:3], AWKWARD[3:6]],
        [Jsonb({"text": item, "list": [item, '"\\']}) for item in AWKWARD],
        [],
    ],
)
def test_it_writes_the_bytes_psycopgs_dumper_writes(value):
    ours, theirs = ArrayDumper(list), ListDumper(list)
    if value:
        ours = ours.upgrade(value, PyFormat.TEXT)
        theirs = theirs.upgrade(value, PyFormat.TEXT)
    assert type(ours) is ArrayDumper
    assert ours.dump(value) == theirs.dump(value)
    assert ours.quote(value) == theirs.quote(value)


@pytest.mark.django_db
def test_it_bulk_inserts_json_and_text_that_come_back_unchanged(api):
    session = session_create(organization=api.organization, identity={"user_name": "Ada"})
    payloads = [{"text": item, "nested": [item, {"k": item}]} for item in AWKWARD]
    Event.objects.bulk_create(
        [
            Event(session=session, seq=1000 + i, type="test.awkward", actor=item, payload=payload)
            for i, (item, payload) in enumerate(zip(AWKWARD, payloads, strict=True))
        ]
    )
    stored = Event.objects.filter(session=session, type="test.awkward").order_by("seq")
    assert [(e.actor, e.payload) for e in stored] == list(zip(AWKWARD, payloads, strict=True))
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        assert connection.connection.adapters.get_dumper(list, PyFormat.TEXT) is ArrayDumper
