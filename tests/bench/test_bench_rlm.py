"""RLM state at the seed's limit: variable write and read rates, checkpoint and rollback latency.

A state with 1,000 variables (the seed's max_variables_per_state) of ~200-byte values.
Writes and reads go through the Django test client (full API stack: auth, validation,
row lock, mutation log, event). Checkpoint and rollback are timed at the service layer
and through the API. Figures go to docs/benchmarks-rlm.md and docs/benchmarks.json
through tests/bench/report.py. The comparison with
LangGraph's PostgreSQL checkpointer is in test_bench_rlm_langgraph.py.
"""

import os
import statistics
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames.models import Session
from frames.rlm import protocol, snapshots
from frames.rlm.models import RlmState
from tests.bench import report

VARIABLES = 1_000
ROUNDS = 20


CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def _counted(ctx: CaptureQueriesContext) -> int:
    """Statements run, not counting BEGIN, COMMIT and savepoints."""
    return sum(1 for q in ctx.captured_queries if not q["sql"].startswith(CONTROL))


def _p(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


@pytest.mark.django_db
def test_bench_rlm_state(api):
    load = os.getloadavg()[0]
    org = api.organization
    session = Session.objects.create(organization=org, identity={"user_name": "Bench"})
    api.get("/health")  # warm-up: first use of the key stamps last_used_at
    state_id = api.post("/rlm/states", {"prompt": "bench", "session_id": str(session.id)}).json()[
        "state_id"
    ]
    value = {"summary": "Some evidence text. " * 8, "score": 0.5}

    started = time.perf_counter()
    for i in range(VARIABLES - 1):
        response = api.put(f"/rlm/states/{state_id}/variables/v{i:04d}", {"value": value})
        assert response.status_code == 200, response.content[:300]
    write_seconds = time.perf_counter() - started
    writes_per_second = (VARIABLES - 1) / write_seconds
    with CaptureQueriesContext(connection) as ctx:
        api.put(f"/rlm/states/{state_id}/variables/v0000", {"value": value})
    queries_per_write = _counted(ctx)

    started = time.perf_counter()
    for i in range(VARIABLES - 1):
        response = api.get(f"/rlm/states/{state_id}/variables/v{i:04d}")
        assert response.status_code == 200
    read_seconds = time.perf_counter() - started
    reads_per_second = (VARIABLES - 1) / read_seconds
    with CaptureQueriesContext(connection) as ctx:
        api.get(f"/rlm/states/{state_id}/variables/v0000")
    queries_per_read = _counted(ctx)

    state = RlmState.objects.get(organization=org, state_id=state_id)
    assert state.variables.count() == VARIABLES

    checkpoint_times, rollback_times, api_rollback_times = [], [], []
    checkpoint_queries = rollback_queries = 0
    for i in range(ROUNDS):
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            checkpoint = snapshots.checkpoint_create(state=state, name=f"bench_{i}")
            checkpoint_times.append((time.perf_counter() - started) * 1000)
        checkpoint_queries = _counted(ctx)
        protocol.variable_write(state=state, name=f"v{i:04d}", value="changed")
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            snapshots.rollback(state=state, checkpoint_id=checkpoint.checkpoint_id)
            rollback_times.append((time.perf_counter() - started) * 1000)
        rollback_queries = _counted(ctx)
        started = time.perf_counter()
        response = api.post(
            f"/rlm/states/{state_id}/rollback", {"checkpoint_id": checkpoint.checkpoint_id}
        )
        api_rollback_times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
        # keep room under the 100-checkpoint limit
        checkpoint.delete()

    health = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        api.get("/health")
        health.append((time.perf_counter() - started) * 1000)
    h50, _h95 = _p(health)

    started = time.perf_counter()
    export = api.get(f"/rlm/states/{state_id}/export")
    export_ms = (time.perf_counter() - started) * 1000
    assert export.status_code == 200

    c50, c95 = _p(checkpoint_times)
    r50, r95 = _p(rollback_times)
    a50, a95 = _p(api_rollback_times)
    print(
        f"\nRLM state with {VARIABLES} variables: writes {writes_per_second:.0f}/s ({queries_per_write} queries each), "
        f"reads {reads_per_second:.0f}/s ({queries_per_read} queries each); checkpoint p50 {c50:.1f} ms p95 {c95:.1f} ms "
        f"({checkpoint_queries} queries); rollback p50 {r50:.1f} ms p95 {r95:.1f} ms ({rollback_queries} queries); "
        f"rollback via API p50 {a50:.1f} ms p95 {a95:.1f} ms; export {export_ms:.0f} ms"
    )
    engine = connection.vendor
    lines = [
        "# Benchmarks: RLM state",
        "",
        f"`make bench` (tests/bench/test_bench_rlm.py) on {engine}: a state of {VARIABLES:,} variables",
        "(the seed's `max_variables_per_state`), each a ~180-byte JSON object, in a session (so every write",
        "also appends an event). Writes and reads go through the Django test client: the full API stack",
        "(auth, validation, row lock on the state, mutation log, event, serialization). Checkpoint and rollback",
        f"are timed at the service layer ({ROUNDS} rounds, one variable changed before each rollback) and",
        "rollback once more through the API. The service's `rollback` answers with what it did (counts, the",
        "checkpoint, the names rewritten); the API answers with the whole state, every variable included.",
        "",
        "| measure | value |",
        "| --- | ---: |",
        f"| variable writes (PUT, create) | {writes_per_second:,.0f} /s, {queries_per_write} queries each |",
        f"| variable reads (GET, counted access) | {reads_per_second:,.0f} /s, {queries_per_read} queries each |",
        f"| checkpoint of {VARIABLES:,} variables | p50 {c50:.1f} ms, p95 {c95:.1f} ms, {checkpoint_queries} queries |",
        f"| rollback to it (service) | p50 {r50:.1f} ms, p95 {r95:.1f} ms, {rollback_queries} queries |",
        f"| rollback through the API (includes the state body) | p50 {a50:.1f} ms, p95 {a95:.1f} ms |",
        f"| export of the whole state (seed document) | {export_ms:.0f} ms |",
        f"| baseline: GET /health through the same stack | p50 {h50:.1f} ms |",
        "",
        f"Machine: {os.cpu_count()} CPUs, 1-minute load average {load:.1f} when the run started",
        "(other jobs share it, so absolute rates are noisy; query counts are exact and leave out BEGIN,",
        "COMMIT and savepoints).",
        "",
        "Beside LangGraph's PostgreSQL checkpointer (`langgraph-checkpoint-postgres`, saving and loading",
        "a state of the same size on the same database, as a ratio): tests/bench/test_bench_rlm_langgraph.py,",
        "figures in docs/benchmarks-rlm-langgraph.md.",
    ]
    report.write_section("rlm", "\n".join(lines))
    report.record(
        {
            "rlm_checkpoint_p50_ms": round(c50, 1),
            "rlm_checkpoint_queries": checkpoint_queries,
            "rlm_rollback_p50_ms": round(r50, 1),
            "rlm_rollback_queries": rollback_queries,
            "rlm_rollback_api_p50_ms": round(a50, 1),
        }
    )
