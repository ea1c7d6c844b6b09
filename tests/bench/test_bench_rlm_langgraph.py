"""RLM checkpoints beside LangGraph's PostgreSQL checkpointer, on the same database.

A state of 1,000 variables (~200-byte values), the seed's limit. Our side: a checkpoint
(a full snapshot of every variable, stored in one row, with its mutation and event) and
a rollback (every variable row restored exactly, the rollback logged as a mutation).
LangGraph's side: `PostgresSaver.put` of a checkpoint whose channel values are the same
1,000 variables, and `get_tuple` loading it back. A rollback writes 1,000 rows where
`get_tuple` only reads, so read the "load" ratio with that in mind.

Needs PostgreSQL and the benchmark-only dependencies in requirements/bench.txt (make
bench installs them). Figures go to docs/benchmarks-rlm-langgraph.md.
"""

import statistics
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from frames.models import Session
from frames.rlm import protocol, snapshots
from tests.conftest import IS_POSTGRES

VARIABLES = 1_000
ROUNDS = 20
DOC = Path(settings.BASE_DIR) / "docs" / "benchmarks-rlm-langgraph.md"

pytestmark = [
    pytest.mark.skipif(
        not IS_POSTGRES, reason="LangGraph's checkpointer needs PostgreSQL (set DATABASE_URL)"
    ),
    pytest.mark.django_db(transaction=True),
]


def _p(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def _conninfo() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgresql://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def test_bench_rlm_beside_langgraph(api):
    postgres = pytest.importorskip(
        "langgraph.checkpoint.postgres", reason="pip install -r requirements/bench.txt"
    )
    from langgraph.checkpoint.base import empty_checkpoint
    from psycopg import Connection
    from psycopg.rows import dict_row

    value = {"summary": "Some evidence text. " * 8, "score": 0.5}
    variables = {f"v{i:04d}": value for i in range(VARIABLES)}

    session = Session.objects.create(organization=api.organization, identity={"user_name": "Bench"})
    state = protocol.state_initialize(
        organization=api.organization, prompt="bench", session=session
    )
    for name, item in list(variables.items())[: VARIABLES - 1]:  # prompt is the 1,000th
        protocol.variable_write(state=state, name=name, value=item)
    ours_save, ours_load = [], []
    for i in range(ROUNDS):
        started = time.perf_counter()
        checkpoint = snapshots.checkpoint_create(state=state, name=f"bench_{i}")
        ours_save.append((time.perf_counter() - started) * 1000)
        protocol.variable_write(state=state, name="v0000", value=f"changed {i}")
        started = time.perf_counter()
        snapshots.state_rollback(state=state, checkpoint_id=checkpoint.checkpoint_id)
        ours_load.append((time.perf_counter() - started) * 1000)

    theirs_save, theirs_load = [], []
    with Connection.connect(
        _conninfo(), autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        saver = postgres.PostgresSaver(conn)
        saver.setup()
        config = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        for i in range(ROUNDS):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {**variables, "v0000": f"changed {i}"}
            checkpoint["channel_versions"] = {
                name: str(i + 1) for name in checkpoint["channel_values"]
            }
            started = time.perf_counter()
            saved = saver.put(
                config, checkpoint, {"source": "update", "step": i}, checkpoint["channel_versions"]
            )
            theirs_save.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            loaded = saver.get_tuple(saved)
            theirs_load.append((time.perf_counter() - started) * 1000)
            assert len(loaded.checkpoint["channel_values"]) == VARIABLES

    rows = []
    for label, ours, theirs in (
        ("save a checkpoint (ours: checkpoint_create; LangGraph: put)", ours_save, theirs_save),
        (
            "load it (ours: rollback, writes every variable; LangGraph: get_tuple, reads)",
            ours_load,
            theirs_load,
        ),
    ):
        (o50, o95), (t50, t95) = _p(ours), _p(theirs)
        rows.append(
            f"| {label} | {o50:.1f} | {o95:.1f} | {t50:.1f} | {t95:.1f} | {o50 / t50:.2f} |"
        )
    report = "\n".join(
        [
            "## RLM checkpoints beside LangGraph's PostgreSQL checkpointer",
            "",
            f"`make bench` (tests/bench/test_bench_rlm_langgraph.py), PostgreSQL, a state of {VARIABLES:,} variables",
            f"of ~200-byte values, {ROUNDS} rounds, service layer on our side, `PostgresSaver` on theirs,",
            "same database, same process. Milliseconds.",
            "",
            "| operation | ours p50 | ours p95 | LangGraph p50 | LangGraph p95 | ratio (ours / LangGraph, p50) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            "Our checkpoint also appends a mutation and an event and is restorable by id; our",
            "rollback restores every variable row exactly and logs itself as a mutation, where",
            "`get_tuple` only reads a blob back.",
            "",
        ]
    )
    print("\n" + report)
    DOC.write_text(report)
