"""`make run` as a person starts it: SQLite, kombu's filesystem broker, gunicorn and a
Celery worker in processes of their own (contextops/run.py). A compaction queued through
the API is done by that separate worker, through files on disk, and nothing else."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from contextops_client import Client
from django.conf import settings

from tests.waiting import wait_until

# With test_documented_commands.py, whose blocks run against the same server.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("make-run")]

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


class Server:
    """``make demo`` then ``make run`` in a temporary folder, as a person starts them: its
    URL, the demo key, and how to reach its database from ``manage.py``. One per run, the
    ``make_run_server`` fixture (tests/ci/conftest.py), shared with
    test_documented_commands.py."""

    def __init__(self, var: Path) -> None:
        self.var = var
        self.env = _make_run_environ(var)
        for step in (["migrate", "--noinput"], ["seed_demo"]):
            self.manage(*step)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "contextops.run", "--port", str(self.port)],
            cwd=settings.BASE_DIR,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_until(self._answers, timeout=90, what="the server to answer")
        self.key = (var / "demo-api-key.txt").read_text().strip()

    def _answers(self) -> bool:
        assert self.process.poll() is None, "the server stopped"
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=settings.BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _exchange(i: int) -> list[dict]:
    return [
        {"role": "user", "content": f"Question {i}: is cipher suite {i} still allowed?"},
        {"role": "assistant", "content": [{"type": "text", "text": f"Suite {i} is allowed."}]},
    ]


def test_make_run_serves_the_api_and_its_own_worker_completes_a_compaction(make_run_server):
    server = make_run_server  # `make demo` ran: migrate and seed_demo answered 0
    assert (server.var / "contextops.sqlite3").exists()  # SQLite, not the suite's database
    with Client(server.url, server.key, retries=2, backoff=0.2) as ops:
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
    assert (server.var / "broker" / "out").is_dir()  # the job went through files
