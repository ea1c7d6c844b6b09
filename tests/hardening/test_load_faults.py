"""`make load` itself, short and with its faults (tests/load/main.py).

Its own PostgreSQL and Redis (tests/servers.py), gunicorn and a Celery worker in
processes of their own; the worker is killed, Redis and PostgreSQL restarted while five
agents work. Needs no database of the suite's.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from django.conf import settings

from tests.load.main import SUMMARY_KEYS
from tests.servers import postgres_missing

pytestmark = [pytest.mark.xdist_group("live")]


@pytest.mark.skipif(bool(postgres_missing()), reason=postgres_missing() or "-")
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs Redis's server binary")
def test_make_load_with_faults_loses_nothing_and_runs_no_job_twice(tmp_path):
    """`make load`'s own run, short: 5 agents for 10 s against gunicorn and a worker on a
    private PostgreSQL and Redis; the worker killed, Redis and PostgreSQL restarted."""
    started = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.load.main",
            "--agents",
            "5",
            "--seconds",
            "10",
            "--faults",
            "--drain",
            "45",
            "--no-docs",
        ],
        cwd=settings.BASE_DIR,
        env={k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1, run.stdout + run.stderr[-3000:]
    summary = json.loads(lines[0])
    print(f"\n{lines[0]}\n({time.monotonic() - started:.0f} s in all)")
    assert tuple(summary)[: len(SUMMARY_KEYS)] == SUMMARY_KEYS
    failures = {
        key: summary[key]
        for key in (
            "errors",
            "missing_writes",
            "jobs_duplicated",
            "verify_differences",
            "budget_problems",
            "duplicated_writes",
        )
        if summary[key]
    }
    assert not failures, (failures, run.stderr[-3000:])
    assert summary["jobs_completed"] == summary["jobs_queued"] > 0, run.stderr[-3000:]
    assert summary["acknowledged_writes"] > 0 and summary["gunicorn_survived"]
    assert [f.split("@")[0] for f in summary["faults"]] == [
        "worker_sigkill",
        "redis_restart",
        "postgres_restart",
    ]
    assert run.returncode == 0, run.stderr[-3000:]
