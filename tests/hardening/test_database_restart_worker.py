"""A real Celery worker outlives a PostgreSQL restart: jobs sent after it complete.

A PostgreSQL cluster and a Redis server of the test's own (tests/servers.py). The
production worker command runs against them with its kept connections
(``CONN_MAX_AGE``); the cluster is restarted (``pg_ctl restart -m fast``) between two
page-outs. The second completes on the same worker process, which never exits.
"""

import os
import secrets
import subprocess
import sys
import time

import psycopg
import pytest
from django.conf import settings

from tests.conftest import IS_POSTGRES
from tests.hardening.production import production_worker
from tests.servers import PrivatePostgres, PrivateRedis, postgres_missing

pytestmark = [
    pytest.mark.skipif(bool(postgres_missing()), reason=postgres_missing() or "-"),
    # Its cluster is its own, whatever the suite runs on: once per CI run is enough.
    pytest.mark.skipif(not IS_POSTGRES, reason="needs PostgreSQL: runs in CI's PostgreSQL pass"),
    pytest.mark.xdist_group("live"),
]

MAKE_HANDLES = r"""
import json
import django
django.setup()
from contextops.tenancy import api_key_create
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
key, _ = api_key_create(org_name="Acme", agent_name="reader")
org, agent = key.agent.organization, key.agent
ids = []
for n in range(2):
    session = session_create(organization=org, agent=agent, identity={})
    frame = frame_push(session=session, goal="Read", budget_total=100_000)
    handle = handle_add(frame=frame, kind="document", content="A clause. " * 200)
    ids.append(str(handle.pk))
print(json.dumps(ids))
"""

SEND = r"""
import sys
import django
django.setup()
from frames.context.tasks import handle_page_out
handle_page_out.apply_async(args=[sys.argv[1], "agent:test"], queue=sys.argv[2])
"""


def _state(url: str, handle_id: str) -> str:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT state FROM frames_contexthandle WHERE id = %s", [handle_id]
        ).fetchone()[0]


def _until(predicate, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except psycopg.OperationalError:
            pass
        time.sleep(0.3)
    return False


def test_a_worker_outlives_a_postgresql_restart(tmp_path):
    import json

    cluster = PrivatePostgres().start()
    redis = PrivateRedis(tmp_path / "redis").start()
    log = tmp_path / "worker.log"
    queue = "db-restart"
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "CELERY_BROKER_URL")
        },
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DATABASE_URL": cluster.url,
        "REDIS_URL": redis.url(0),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "CONN_MAX_AGE": "600",
        "CONTEXTOPS_VAR_DIR": str(tmp_path),
        "CONTEXTOPS_SUMMARIZER": "extractive",
    }
    run = {"cwd": settings.BASE_DIR, "env": env, "check": True, "timeout": 300}
    worker = None
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], **run)
        made = subprocess.run(
            [sys.executable, "-c", MAKE_HANDLES], capture_output=True, text=True, **run
        )
        first, second = json.loads(made.stdout.strip().splitlines()[-1])
        worker = production_worker(env, queue, log)
        subprocess.run([sys.executable, "-c", SEND, first, queue], **run)
        assert _until(lambda: _state(cluster.url, first) == "indexed"), log.read_text()[-3000:]
        cluster.restart("fast")  # the worker's kept connections are now dead
        subprocess.run([sys.executable, "-c", SEND, second, queue], **run)
        assert _until(lambda: _state(cluster.url, second) == "indexed"), log.read_text()[-3000:]
        assert worker.poll() is None, log.read_text()[-3000:]
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(30)
        redis.close()
        cluster.close()
