"""A real Celery worker outlives its broker: Redis stopped for 20 s while a job runs.

The worker is the production command (`celery -A contextops worker`, prefork pool) on a
Redis server of the test's own (tests/servers.py), never the shared one. A page-out is
held in the middle of its work by a row lock; Redis is stopped for 20 s and started
again; then the lock is released. The job in flight completes, a job sent after the
outage completes, and the worker process never exits: it carries on by itself, with no
restart policy behind it.
"""

import os
import subprocess
import time
import uuid

import pytest
import redis as redis_client

from frames.models import ContextHandle
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.conftest import IS_POSTGRES
from tests.hardening.production import production_worker
from tests.hardening.test_faults import RowLock, _database_url, _until, _waiting_on_a_lock
from tests.servers import PrivateRedis

pytestmark = [
    pytest.mark.skipif(not IS_POSTGRES, reason="needs PostgreSQL (set DATABASE_URL)"),
    pytest.mark.django_db(transaction=True),
]

OUTAGE_SECONDS = 20


def _worker(broker: str, queue: str, log) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DATABASE_URL": _database_url(),
        "REDIS_URL": broker,
        "CONTEXTOPS_VAR_DIR": str(log.parent),
        "DEBUG": "1",
        "CONTEXTOPS_SUMMARIZER": "extractive",
    }
    env.pop("CELERY_BROKER_URL", None)
    return production_worker(env, queue, log)


def _handle(api, content: str) -> ContextHandle:
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    frame = frame_push(session=session, goal="Read a contract", budget_total=100_000)
    return handle_add(frame=frame, kind="document", content=content * 40)


def test_a_worker_outlives_a_redis_outage_in_the_middle_of_a_job(api, tmp_path):
    from contextops.celery import app
    from frames.context.tasks import handle_page_out

    redis = PrivateRedis(tmp_path / "redis", appendonly=True).start()
    broker = redis.url(0)
    queue = f"outage-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    first = _handle(api, "The contract renews every year in March. ")
    second = _handle(api, "The lease ends in June unless renewed. ")
    worker = _worker(broker, queue, log)
    try:
        with app.connection_for_write(broker) as conn:
            with RowLock("frames_session", first.session_id):
                handle_page_out.apply_async(
                    args=[str(first.pk), "agent:test"], queue=queue, connection=conn
                )
                assert _until(_waiting_on_a_lock, timeout=60), "the worker never reached the job"
                redis.stop()
                stopped = time.monotonic()
                while time.monotonic() - stopped < OUTAGE_SECONDS:
                    assert worker.poll() is None, log.read_text()[-3000:]
                    time.sleep(0.5)
                redis.start()
            # The job in flight finishes once its lock is gone.
            assert _until(
                lambda: ContextHandle.objects.get(pk=first.pk).state == "indexed", timeout=60
            ), log.read_text()[-3000:]
            # A job sent after the outage is taken by the same worker.
            conn.ensure_connection(max_retries=3)
            handle_page_out.apply_async(
                args=[str(second.pk), "agent:test"], queue=queue, connection=conn
            )
            assert _until(
                lambda: ContextHandle.objects.get(pk=second.pk).state == "indexed", timeout=60
            ), log.read_text()[-3000:]
        # The job in flight was acknowledged once Redis was back: nothing is left to be
        # handed out again after the visibility timeout.
        unacked = redis_client.Redis(port=redis.port, db=0)
        assert _until(lambda: unacked.hlen("unacked") == 0, timeout=20), unacked.hkeys("unacked")
        assert worker.poll() is None, log.read_text()[-3000:]
        assert "Unrecoverable error" not in log.read_text()
    finally:
        if worker.poll() is None:
            worker.terminate()
            worker.wait(30)
        redis.close()
