"""Migration 0020 turns a pack record's JSON columns into compressed binary ones: the
records written before it read back as they were, and going back restores their JSON."""

import json
import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from contextops.rows import param
from frames.models import ContextPackRecord, Session

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("frames", "0019_pack_record_json_by_orjson")]
INCLUDED = [{"section": "facts", "id": "7", "tokens": 12, "form": "full"}]
RUNS = [
    {
        "section": "segments",
        "reason": "cold",
        "level": "none",
        "ids": ["h1", "h2"],
        "tokens": [3, 4],
        "ranks": [5, 6],
        "scores": [None, [0.5, 0.5, 0, 0, 0, 0, 0, 0]],
        "older": {"1": "h9"},
    }
]


def _migrate(target: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)


def _columns(record_id: uuid.UUID) -> tuple[object, object]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT included, dropped FROM frames_contextpackrecord WHERE id = %s",
            [param(ContextPackRecord, "id", record_id)],
        )
        return cursor.fetchone()


def test_records_written_as_json_read_back_and_go_back(api):
    session = Session.objects.create(organization=api.organization, identity={}, environment={})
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("frames")
    record_id = uuid.uuid4()
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO frames_contextpackrecord (id, session_id, budget, used, level,"
                " min_compaction, breakdown, included, dropped, query, created_at)"
                " VALUES (%s, %s, 1000, 10, 'none', 'none', '{}', %s, %s, '', CURRENT_TIMESTAMP)",
                [
                    param(ContextPackRecord, "id", record_id),
                    param(ContextPackRecord, "session", session.pk),
                    json.dumps(INCLUDED),
                    json.dumps(RUNS),
                ],
            )
    finally:
        _migrate(latest)

    old = ContextPackRecord.objects.get(pk=record_id)
    assert old.included == INCLUDED
    assert [(d["id"], d["rank"], d["older_than"]) for d in old.dropped] == [
        ("h1", 5, None),
        ("h2", 6, "h9"),
    ]
    assert old.dropped[1]["score"]["total"] == 0.5
    old.dropped_keep([])
    old.included = [{"section": "facts", "id": "8"}]
    old.save()
    included, dropped = _columns(record_id)
    assert bytes(included)[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame, not JSON text

    _migrate(BEFORE)
    try:
        included, dropped = _columns(record_id)
        as_json = [v if isinstance(v, list) else json.loads(v) for v in (included, dropped)]
        assert as_json == [[{"section": "facts", "id": "8"}], []]
    finally:
        _migrate(latest)
    assert ContextPackRecord.objects.get(pk=record_id).included == [{"section": "facts", "id": "8"}]
