"""`make run` as a person starts it: SQLite, kombu's filesystem broker, gunicorn and a
Celery worker in processes of their own (contextops/run.py). A compaction queued through
the API is done by that separate worker, through files on disk, and nothing else."""

import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest
from contextops_client import Client
from django.conf import settings

from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live")]

# What the suite sets for itself and `make run` never has.
NOT_IN_MAKE_RUN = {
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "SECRET_KEY",
    "ANTHROPIC_API_KEY",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
    "DJANGO_SETTINGS_MODULE",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _make_run_environ(var_dir) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in NOT_IN_MAKE_RUN}
    env.update(DEBUG="1", CONTEXTOPS_VAR_DIR=str(var_dir))  # as `make run` sets them
    return env


def _exchange(i: int) -> list[dict]:
    return [
        {"role": "user", "content": f"Question {i}: is cipher suite {i} still allowed?"},
        {"role": "assistant", "content": [{"type": "text", "text": f"Suite {i} is allowed."}]},
    ]


def test_make_run_serves_the_api_and_its_own_worker_completes_a_compaction(tmp_path):
    env = _make_run_environ(tmp_path)
    for step in (["migrate", "--noinput"], ["seed_demo"]):  # `make demo`
        done = subprocess.run(
            [sys.executable, "manage.py", *step],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "contextops.sqlite3").exists()  # SQLite, not the suite's database
    port = _free_port()
    run = subprocess.Popen(
        [sys.executable, "-m", "contextops.run", "--port", str(port)],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert run.poll() is None, run.stdout.read() if run.stdout else ""
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(answers, timeout=60, what="make run to answer")
        key = (tmp_path / "demo-api-key.txt").read_text().strip()
        with Client(url, key, retries=2, backoff=0.2) as ops:
            session = ops.session(identity={"user_name": "Ada"})
            with ops.frame(session, goal="Chat", budget=20_000):
                for i in range(6):
                    ops.messages_append(session, _exchange(i))
                queued = ops.compaction_create(session, strategy="summarize_oldest", keep_turns=2)
                assert queued["status"] == "queued"  # this process runs no worker
                run_seen = ops.compaction_wait(queued["id"], timeout=120, interval=0.5)
            assert run_seen["status"] == "completed", run_seen
            assert run_seen["items_summarized"] == 4
            summarized = [t["summarized"] for t in ops.turns(session)]
            assert summarized == [True] * 4 + [False] * 2
        assert (tmp_path / "broker" / "out").is_dir()  # the job went through files
    finally:
        os.killpg(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
