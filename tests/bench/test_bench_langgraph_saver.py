"""ContextopsSaver over HTTP beside LangGraph's PostgresSaver, on the same PostgreSQL.

A checkpoint of 100 channels (~200-byte values), every channel changed each round (so
both savers write every blob). Ours: `ContextopsSaver.put` and `get_tuple` against a live
server (HTTP, JSON, base64, an API key check, the session lock and an event per write);
theirs: `PostgresSaver.put` and `get_tuple` straight on the database the server uses.
Same process, same run; figures go to docs/benchmarks-langgraph-saver.md (through
tests/bench/report.py, stamped with the commit).
"""

import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.db import connection

from contextops.tenancy import api_key_create
from tests.bench.report import write_section
from tests.conftest import IS_POSTGRES

CHANNELS = 100
ROUNDS = 30

pytestmark = [
    pytest.mark.skipif(
        not IS_POSTGRES, reason="LangGraph's PostgresSaver needs PostgreSQL (set DATABASE_URL)"
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


@contextmanager
def _gunicorn():
    """The API as production serves it: gunicorn on the test database, persistent connections."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "DATABASE_URL": _conninfo().replace("postgresql://", "postgres://")}
    env.update(
        CONN_MAX_AGE="60",
        DEBUG="0",
        DJANGO_SETTINGS_MODULE="contextops.settings",
        SECRET_KEY=secrets.token_urlsafe(50),
        SECURE_SSL_REDIRECT="0",
        CONTEXTOPS_RATE_LIMIT_PER_MINUTE="0",
        LOG_LEVEL="WARNING",
    )
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "contextops.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "2",
            "--log-level",
            "warning",
        ],
        cwd=settings.BASE_DIR,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        for _ in range(100):
            try:
                if httpx.get(url + "/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url
    finally:
        web.terminate()
        web.wait(timeout=30)


def _measure(saver, thread_id: str) -> tuple[list[float], list[float]]:
    from langgraph.checkpoint.base import empty_checkpoint

    value = {"summary": "Some evidence text. " * 8, "score": 0.5}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    puts, gets = [], []
    for i in range(ROUNDS):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {f"c{n:03d}": {**value, "round": i} for n in range(CHANNELS)}
        checkpoint["channel_versions"] = {name: i + 1 for name in checkpoint["channel_values"]}
        started = time.perf_counter()
        saved = saver.put(
            config, checkpoint, {"source": "loop", "step": i}, checkpoint["channel_versions"]
        )
        puts.append((time.perf_counter() - started) * 1000)
        config = saved
        started = time.perf_counter()
        loaded = saver.get_tuple(saved)
        gets.append((time.perf_counter() - started) * 1000)
        assert len(loaded.checkpoint["channel_values"]) == CHANNELS
        assert loaded.checkpoint["channel_values"]["c000"]["round"] == i
    return puts, gets


def test_bench_contextops_saver_beside_postgres_saver():
    postgres = pytest.importorskip(
        "langgraph.checkpoint.postgres", reason="pip install -r requirements/bench.txt"
    )
    from contextops_client.langgraph import ContextopsSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    _, key = api_key_create(org_name="Bench", agent_name="bench", authority="employee")
    with _gunicorn() as url:
        ours = ContextopsSaver(url, key, retries=0)
        ours_put, ours_get = _measure(ours, "bench-ours")
        ours.close()

    with Connection.connect(
        _conninfo(), autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        theirs = postgres.PostgresSaver(conn)
        theirs.setup()
        theirs_put, theirs_get = _measure(theirs, "bench-theirs")

    rows = []
    for label, o, t in (
        ("put (a checkpoint, every channel changed)", ours_put, theirs_put),
        ("get_tuple (that checkpoint back)", ours_get, theirs_get),
    ):
        (o50, o95), (t50, t95) = _p(o), _p(t)
        rows.append(
            f"| {label} | {o50:.1f} | {o95:.1f} | {t50:.1f} | {t95:.1f} | {o50 / t50:.2f} |"
        )
    report = "\n".join(
        [
            "## ContextopsSaver beside LangGraph's PostgresSaver",
            "",
            "`make bench` (tests/bench/test_bench_langgraph_saver.py), PostgreSQL, a checkpoint of",
            f"{CHANNELS} channels of ~200-byte values, every channel changed each round, {ROUNDS} rounds.",
            "Ours over HTTP to gunicorn (1 worker, 2 threads, persistent database connections),",
            "`PostgresSaver` straight on the same database, in the same run. Milliseconds.",
            "",
            "| operation | ContextopsSaver p50 | p95 | PostgresSaver p50 | p95 | ratio (ours / PostgresSaver, p50) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            "Each of our puts also crosses HTTP and JSON (values in base64), checks the API key,",
            "locks the thread's session and appends an event to its log, and sends a JSON",
            "rendering of every value for the dashboard; PostgresSaver writes its rows only.",
            "",
        ]
    )
    print("\n" + report)
    write_section("langgraph-saver", report)
