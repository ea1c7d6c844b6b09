"""Faults with real processes: a Celery worker killed in the middle of a job.

The job is redelivered to the next worker and finishes once: nothing lost, nothing
doubled, nothing half-written in between. Needs PostgreSQL (to hold a row lock the
worker waits on, so it is provably mid-job when killed) and Redis (whose unacked
messages come back after the visibility timeout).
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from contextops import settings as production_settings
from frames.models import ContextHandle, Event
from frames.projections import budget_audit, projection_diff
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.conftest import IS_POSTGRES, IS_REDIS
from tests.hardening.figures import figures_record
from tests.servers import PrivateRedis

pytestmark = [
    pytest.mark.skipif(
        not (IS_POSTGRES and IS_REDIS),
        reason="needs PostgreSQL and Redis (set DATABASE_URL and REDIS_URL)",
    ),
    pytest.mark.django_db(transaction=True),
]


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


VISIBILITY_TIMEOUT = 2  # seconds a job may stay unacknowledged before Redis hands it out again


def _worker(queue: str, tmp_path, log: str = "worker", **extra_env) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.CELERY_BROKER_URL,
        "CONTEXTOPS_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "CONTEXTOPS_BROKER_RESTORE_INTERVAL": "1",
        "CONTEXTOPS_BROKER_RESTORE_THROTTLE": "1",
        "CONTEXTOPS_VAR_DIR": str(tmp_path),
        "DEBUG": "1",
        "CONTEXTOPS_SUMMARIZER": "extractive",
        **extra_env,
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "contextops",
            "worker",
            "--pool",
            "solo",
            "-Q",
            queue,
            "--loglevel",
            "INFO",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=open(tmp_path / f"{log}-{queue}.log", "a"),  # noqa: SIM115 (kept open for the worker's life)
        stderr=subprocess.STDOUT,
    )


class RowLock:
    """Hold a row lock from another connection until released."""

    def __init__(self, table: str, pk):
        self.release = threading.Event()
        self.held = threading.Event()
        self.thread = threading.Thread(target=self._hold, args=(table, pk), daemon=True)

    def _hold(self, table, pk):
        with psycopg.connect(_database_url()) as conn:
            conn.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE", [pk])
            self.held.set()
            self.release.wait(60)
            conn.rollback()

    def __enter__(self):
        self.thread.start()
        assert self.held.wait(10)
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.thread.join(10)


def _waiting_on_a_lock() -> bool:
    with psycopg.connect(_database_url()) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).fetchone()
    return row[0] > 0


def _deliveries(tmp_path, log: str, queue: str, task: str) -> dict:
    """How often the worker logged that it received and finished ``task``."""
    text = (tmp_path / f"{log}-{queue}.log").read_text()
    return {
        "received": len(re.findall(rf"Task {re.escape(task)}\[[^\]]+\] received", text)),
        "succeeded": len(re.findall(rf"Task {re.escape(task)}\[[^\]]+\] succeeded", text)),
    }


def _until(predicate, timeout=40.0, interval=0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def test_a_page_out_whose_worker_dies_midway_is_redelivered_and_done_once(api, tmp_path):
    from frames.context.tasks import handle_page_out

    session = session_create(organization=api.organization, agent=api.agent, identity={})
    frame = frame_push(session=session, goal="Read a long document", budget_total=100_000)
    handle = handle_add(
        frame=frame, kind="document", content="The contract renews every year in March. " * 40
    )
    queue = f"faults-{uuid.uuid4().hex[:8]}"
    task = "frames.handle_page_out"

    first = _worker(queue, tmp_path, log="first")
    try:
        with RowLock("frames_session", session.pk):
            sent = time.monotonic()
            handle_page_out.apply_async(args=[str(handle.pk), "agent:test"], queue=queue)
            assert _until(_waiting_on_a_lock), "the worker never reached the job"
            reached = time.monotonic() - sent
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        handle.refresh_from_db()
        assert handle.state == "loaded"  # nothing half-written by the dead worker
    finally:
        if first.poll() is None:
            first.kill()

    second = _worker(queue, tmp_path, log="second")
    started = time.monotonic()
    try:
        assert _until(lambda: ContextHandle.objects.get(pk=handle.pk).state == "indexed"), (
            "the job was never redelivered"
        )
        done = time.monotonic() - started
        time.sleep(3)  # a second delivery, if there were one, would land here
    finally:
        second.terminate()
        second.wait(20)
    handle.refresh_from_db()
    assert handle.summary and handle.summary_tokens > 0
    paged_out = Event.objects.filter(session=session, type="handle.paged_out").count()
    assert paged_out == 1
    figures_record(
        "faults-page-out",
        {
            "visibility_timeout_s": VISIBILITY_TIMEOUT,
            "job_reached_the_lock_after_s": round(reached, 1),
            "killed_worker": _deliveries(tmp_path, "first", queue, task),
            "state_after_the_kill": "loaded",
            "second_worker": _deliveries(tmp_path, "second", queue, task),
            "indexed_after_second_worker_start_s": round(done, 1),
            "paged_out_events": paged_out,
            "summary_tokens": handle.summary_tokens,
        },
    )


def test_a_compaction_whose_worker_dies_midway_is_redelivered_and_done_once(api, tmp_path):
    from frames.conversation.models import CompactionRun, Summary, Turn
    from frames.conversation.tasks import compaction_run
    from tests.conversation.test_compaction import conversation

    session = session_create(organization=api.organization, agent=api.agent, identity={})
    frame_push(session=session, goal="Build the parser", budget_total=10**7)
    conversation(api, session, 8, anchors={3})
    response = api.post(f"/sessions/{session.pk}/compactions", {})
    assert response.status_code == 202
    run_id = response.json()["id"]
    queue = f"faults-{uuid.uuid4().hex[:8]}"
    task = "conversation.compaction_run"

    first = _worker(queue, tmp_path, log="first")
    try:
        with RowLock("frames_session", session.pk):
            sent = time.monotonic()
            compaction_run.apply_async(args=[str(run_id)], queue=queue)
            assert _until(_waiting_on_a_lock), "the worker never reached the job"
            reached = time.monotonic() - sent
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        # Claimed by the dead worker, but nothing of its work was written.
        assert CompactionRun.objects.get(pk=run_id).status == "running"
        assert not Turn.objects.filter(session=session, summarized=True).exists()
    finally:
        if first.poll() is None:
            first.kill()

    # Redelivered after the visibility timeout; the claim of a dead worker goes stale.
    second = _worker(queue, tmp_path, log="second", CONTEXTOPS_COMPACTION_STALE_SECONDS="1")
    started = time.monotonic()
    try:
        assert _until(lambda: CompactionRun.objects.get(pk=run_id).status == "completed"), (
            "never redelivered"
        )
        done = time.monotonic() - started
        time.sleep(3)
    finally:
        second.terminate()
        second.wait(20)
    summaries = Summary.objects.filter(session=session).count()
    summarized = sorted(
        Turn.objects.filter(session=session, summarized=True).values_list("index", flat=True)
    )
    assert summaries == 1
    assert summarized == [0, 1, 2]
    run = CompactionRun.objects.get(pk=run_id)
    figures_record(
        "faults-compaction",
        {
            "visibility_timeout_s": VISIBILITY_TIMEOUT,
            "claim_stale_after_s": 1,
            "job_reached_the_lock_after_s": round(reached, 1),
            "killed_worker": _deliveries(tmp_path, "first", queue, task),
            "status_after_the_kill": "running",
            "second_worker": _deliveries(tmp_path, "second", queue, task),
            "completed_after_second_worker_start_s": round(done, 1),
            "summarizer_attempts": run.attempts,
            "retries": run.retries,
            "summaries": summaries,
            "turns_summarized": summarized,
        },
    )


@pytest.fixture
def private_redis(tmp_path, settings):
    """A Redis server of this test's own, on a free port, that the test may stop and start.

    It is everything Redis is in production: the broker and the cache that holds each
    key's rate-limit count (on, here).
    """
    from contextops.celery import app

    server = PrivateRedis(tmp_path, appendonly=False)
    port = server.port

    # Point the app's producers at this server, keeping the suite's own pools untouched
    # (closing them would break later tests in this process) and putting them back after.
    original = (app.conf.broker_url, app._pool, app.amqp._producer_pool)
    server.start()
    app.conf.broker_url = f"redis://127.0.0.1:{port}/0"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/1",
            "OPTIONS": production_settings.CACHES["default"].get("OPTIONS", {}),
        }
    }
    settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE = 100_000
    app._pool = None
    app.amqp._producer_pool = None

    class Handle:
        def keys(self) -> list[str]:
            import redis

            return [k.decode() for k in redis.Redis(port=port, db=1).keys("*")]

        def stop(self):
            server.stop()

        def start(self):
            server.start()

    yield Handle()
    server.close()
    if app._pool is not None:
        app._pool.force_close_all()
    app.conf.broker_url, app._pool, app.amqp._producer_pool = original


def test_with_redis_down_the_api_keeps_answering_and_queued_jobs_run_after(api, private_redis):
    from celery.contrib.testing.worker import start_worker

    from contextops.celery import app
    from frames.conversation.compaction import compactions_requeue
    from frames.conversation.models import CompactionRun
    from tests.conversation.test_compaction import conversation

    session = session_create(organization=api.organization, agent=api.agent, identity={})
    root = frame_push(session=session, goal="Keep working", budget_total=10**7)
    conversation(api, session, 8, anchors={3})
    handle = handle_add(frame=root, kind="document", content="A long contract. " * 50)
    # The writes so far were counted in this Redis.
    assert any("ratelimit:" in key for key in private_redis.keys()), private_redis.keys()

    private_redis.stop()
    answers: dict[str, Counter] = {}
    refusal_seconds, runs = [], []

    def answer(operation: str, response):
        answers.setdefault(operation, Counter())[response.status_code] += 1
        return response

    outage = 10
    deadline = time.monotonic() + outage
    while time.monotonic() < deadline:
        child = answer(
            "frame push",
            api.post(
                f"/sessions/{session.pk}/frames",
                {"goal": "step", "parent_frame_id": str(root.pk), "budget": {"total": 100}},
            ),
        )
        answer(
            "usage",
            api.post(
                f"/frames/{child.json()['id']}/usage", {"input_tokens": 5, "output_tokens": 5}
            ),
        )
        answer("pop", api.post(f"/frames/{child.json()['id']}/pop", {"status": "completed"}))
        asked = time.monotonic()
        page_out = answer("page-out", api.post(f"/handles/{handle.pk}/page-out"))
        refusal_seconds.append(time.monotonic() - asked)
        assert page_out.status_code == 503 and page_out.json()["error"] == "unavailable"
        if not runs:
            compaction = answer("compaction", api.post(f"/sessions/{session.pk}/compactions", {}))
            assert compaction.status_code == 202, compaction.content  # kept, sent later
            runs.append(compaction.json()["id"])
    for operation in ("frame push", "usage", "pop"):
        assert set(answers[operation]) <= {200, 201}, answers
    assert CompactionRun.objects.get(pk=runs[0]).status == "queued"
    handle.refresh_from_db()
    assert handle.state == "loaded"

    private_redis.start()
    with start_worker(
        app, pool="threads", concurrency=1, perform_ping_check=False, shutdown_timeout=30
    ):
        # What the beat sweep (conversation.compactions_requeue, every 60 s, for runs
        # queued over 30 s) would do, called here at once and with no age limit.
        swept = time.monotonic()
        assert compactions_requeue(older_than_seconds=0) == 1
        assert _until(lambda: CompactionRun.objects.get(pk=runs[0]).status == "completed")
        compacted = time.monotonic() - swept
        asked = time.monotonic()
        assert api.post(f"/handles/{handle.pk}/page-out").status_code == 202
        assert _until(lambda: ContextHandle.objects.get(pk=handle.pk).state == "indexed")
        paged = time.monotonic() - asked
    assert projection_diff(session) == [] and budget_audit(session) == []
    refusal_seconds.sort()
    figures_record(
        "faults-redis-down",
        {
            "outage_s": outage,
            "answers_during_outage": {op: dict(counts) for op, counts in answers.items()},
            "page_out_refusal_s": {
                "min": round(refusal_seconds[0], 2),
                "median": round(refusal_seconds[len(refusal_seconds) // 2], 2),
                "max": round(refusal_seconds[-1], 2),
            },
            "compaction_status_when_redis_returned": "queued",
            "requeued_jobs": 1,
            "compaction_completed_after_requeue_s": round(compacted, 1),
            "page_out_indexed_after_s": round(paged, 1),
            "projection_diff": 0,
            "budget_problems": 0,
        },
    )
