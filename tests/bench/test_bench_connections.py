"""Connection reuse: a simple authenticated read with and without keeping connections.

Starts gunicorn (1 worker, 4 threads, as one web core runs it) on the benchmark's
database twice: with ``CONN_MAX_AGE=0`` (a new database connection per request) and with
the production default ``CONN_MAX_AGE=60`` and health checks. Each time it sends
``GET /api/v1/sessions/{id}`` (API key lookup, then the session) one at a time and from 8
clients at once, and reports latency, requests per second and, on PostgreSQL, how many
server sessions were opened (``pg_stat_database.sessions``). Writes
docs/benchmarks-connections-<database>.md (through tests/bench/report.py, stamped with the
commit). Nothing here asserts a time.
"""

import os
import secrets
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from frames.services.sessions import session_create
from tests.bench.report import database_vendor, write_section
from tests.conftest import IS_POSTGRES
from tests.s3 import free_port

ROUNDS = 500
CONCURRENT = 8

pytestmark = pytest.mark.django_db(transaction=True)


def _database_url() -> str:
    db = connection.settings_dict
    if not IS_POSTGRES:
        return f"sqlite:///{db['NAME']}"
    auth = f"{db['USER']}:{db['PASSWORD']}@" if db["PASSWORD"] else f"{db['USER']}@"
    return f"postgres://{auth}{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _server_sessions() -> int | None:
    if not IS_POSTGRES:
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = %s",
            [connection.settings_dict["NAME"]],
        )
        return int(cursor.fetchone()[0])


def _measure(conn_max_age: int, path: str, key: str, tmp_path: Path) -> dict:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DATABASE_URL": _database_url(),
        "CONN_MAX_AGE": str(conn_max_age),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "CONTEXTOPS_VAR_DIR": str(tmp_path),
        "LOG_LEVEL": "WARNING",
    }
    server = subprocess.Popen(
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
            "4",
            "--log-level",
            "warning",
        ],
        cwd=settings.BASE_DIR,
        env=env,
    )
    url = f"http://127.0.0.1:{port}/api/v1{path}"
    headers = {"Authorization": f"Bearer {key}"}
    try:
        for _ in range(150):
            try:
                if httpx.get(url, headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        with httpx.Client(headers=headers) as client:
            for _ in range(20):  # warm-up: imports, the first connections
                client.get(url)
            opened_before = _server_sessions()
            samples = []
            started = time.perf_counter()
            for _ in range(ROUNDS):
                t = time.perf_counter()
                assert client.get(url).status_code == 200
                samples.append(time.perf_counter() - t)
            sequential_s = time.perf_counter() - started
            opened_after = _server_sessions()

        def burst(_: int) -> int:
            with httpx.Client(headers=headers) as own:
                return sum(own.get(url).status_code == 200 for _ in range(ROUNDS // CONCURRENT))

        started = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENT) as pool:
            answered = sum(pool.map(burst, range(CONCURRENT)))
        concurrent_s = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    ordered = sorted(samples)
    return {
        "p50": statistics.median(ordered) * 1000,
        "p95": ordered[int(len(ordered) * 0.95) - 1] * 1000,
        "sequential_rps": ROUNDS / sequential_s,
        "concurrent_rps": answered / concurrent_s,
        "opened": None if opened_before is None else opened_after - opened_before,
    }


def test_bench_connection_reuse(api, tmp_path):
    session = session_create(
        organization=api.organization, agent=api.agent, identity={}, title="bench"
    )
    path = f"/sessions/{session.pk}"
    rows = []
    load = os.getloadavg()[0]
    for label, age in (("none (`CONN_MAX_AGE=0`)", 0), ("kept (`CONN_MAX_AGE=60`)", 60)):
        figures = _measure(age, path, api.key, tmp_path)
        print(f"\nconnection reuse {label}: {figures}")
        opened = "n/a" if figures["opened"] is None else f"{figures['opened']:,}"
        rows.append(
            f"| {label} | {figures['p50']:.2f} | {figures['p95']:.2f} | "
            f"{figures['sequential_rps']:.0f} | {figures['concurrent_rps']:.0f} | {opened} |"
        )
    write_section(
        f"connections-{database_vendor()}",
        f"## Connection reuse on {'PostgreSQL' if IS_POSTGRES else 'SQLite'}: "
        "a simple authenticated read\n\n"
        "`make bench` (tests/bench/test_bench_connections.py): gunicorn with 1 worker and 4 "
        f"threads (one web core), `GET /api/v1/sessions/{{id}}` with an API key, {ROUNDS} "
        f"requests one at a time over a kept-alive HTTP connection (p50 / p95, requests per "
        f"second), then {ROUNDS} from {CONCURRENT} clients at once. *Connections opened* is "
        "how many PostgreSQL sessions the sequential requests started "
        "(`pg_stat_database.sessions`). The machine's load average when it started: "
        f"{load:.1f} on {os.cpu_count()} cores (other work shares them: compare the rows, "
        "not the absolute times).\n\n"
        "| database connections | p50 ms | p95 ms | sequential req/s | "
        f"{CONCURRENT} clients req/s | connections opened per {ROUNDS} requests |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: |\n" + "\n".join(rows) + "\n",
    )
