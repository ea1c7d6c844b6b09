"""A short load run in CI: concurrent agents on the live server, then nothing lost.

`make load` is the long version (50 agents on gunicorn, PostgreSQL and Redis); the last
test runs it short, with its faults.
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db.models import Q, Sum

from contextops.tenancy import api_key_create
from facts.models import Fact
from frames.models import Frame, Session
from frames.projections import budget_audit, projection_diff
from tests.load.agents import run_load
from tests.load.main import SUMMARY_KEYS
from tests.servers import postgres_missing

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]


def test_concurrent_agents_get_no_errors_and_every_sum_holds(live_server):
    keys = [api_key_create(org_name=f"Load {i % 2}", agent_name=f"agent-{i}")[1] for i in range(8)]
    result = asyncio.run(run_load(base_url=live_server.url, keys=keys, seconds=4))
    print("\n" + result.table())
    assert sum(result.errors.values()) == 0, result.unexpected[:10]
    assert (
        result.latencies["frame.pop"]
        and result.latencies["context_pack"]
        and result.latencies["fact.supersede"]
    )
    sessions = list(Session.objects.all())
    assert len(sessions) == 8
    for session in sessions:
        assert projection_diff(session) == []
        assert budget_audit(session) == []

    # Every answered call counted once, against what the agents themselves saw: each
    # usage record is 120 in, 40 out, 900 cache read (1,060 tokens of budget).
    recorded = len(result.latencies["usage.record"])
    totals = Session.objects.aggregate(
        input=Sum("input_tokens_total"),
        output=Sum("output_tokens_total"),
        cache_read=Sum("cache_read_tokens_total"),
        calls=Sum("api_calls_total"),
    )
    assert totals == {
        "input": 120 * recorded,
        "output": 40 * recorded,
        "cache_read": 900 * recorded,
        "calls": recorded,
    }
    # Popped children settled into their roots; children the deadline left open still hold theirs.
    spent = Frame.objects.filter(Q(depth=0) | Q(status="active")).aggregate(s=Sum("budget_used"))
    assert spent["s"] == 1060 * recorded
    writes = len(result.latencies["fact.write"]) + len(result.latencies["fact.supersede"])
    assert Fact.objects.filter(organization__name__startswith="Load ").count() == writes


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
