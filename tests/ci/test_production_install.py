"""The production install as docs/operating.md gives it: ``pip install --require-hashes
-r requirements/prod.txt`` into a virtualenv of its own, nothing from the development
lock. Its Celery worker starts on Redis and answers a ping, and its web settings pass
``check --deploy``: a dependency that only the development lock brings in (as
``packaging`` was, for kombu's Redis transport) fails here."""

import os
import socket
import subprocess
import uuid
import venv

import httpx
import pytest
from django.conf import settings

from tests.conftest import IS_REDIS
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not IS_REDIS, reason="needs Redis: the worker's broker (REDIS_URL)"),
    # One worker runs the three tests: the virtualenv (``prod_python``, two minutes of pip)
    # is then made once per run, not once on each worker.
    pytest.mark.xdist_group("production-install"),
]


@pytest.fixture(scope="module")
def prod_python(tmp_path_factory):
    where = tmp_path_factory.mktemp("prod-venv")
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    lock = settings.BASE_DIR / "requirements" / "prod.txt"
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--require-hashes", "-r", lock],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr[-4000:]
    return python


def _production_environ(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    for only_in_tests in ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE"):
        env.pop(only_in_tests, None)
    env.update(
        SECRET_KEY="a-production-secret-key-" + "x" * 40,
        DEBUG="0",
        CONTEXTOPS_VAR_DIR=str(tmp_path),
        ALLOWED_HOSTS="contextops.example.com",
    )
    return env


def test_the_production_worker_starts_on_redis_and_answers(prod_python, tmp_path):
    env = _production_environ(tmp_path)
    name = f"prod-{uuid.uuid4().hex[:8]}@localhost"
    celery = [prod_python, "-m", "celery", "-A", "contextops"]
    worker = subprocess.Popen(
        [*celery, "worker", "--pool", "solo", "-n", name, "-Q", f"q-{name}", "--loglevel", "INFO"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        answered = None
        for _ in range(30):
            answered = subprocess.run(
                [*celery, "inspect", "ping", "-d", name, "--timeout", "2"],
                cwd=settings.BASE_DIR,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if answered.returncode == 0 or worker.poll() is not None:
                break
        assert worker.poll() is None, worker.stdout.read()[-4000:] if worker.stdout else ""
        assert answered is not None and "pong" in answered.stdout, answered
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_the_production_web_settings_pass_the_deploy_check(prod_python, tmp_path):
    checked = subprocess.run(
        [prod_python, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=_production_environ(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_production_web_process_serves_and_logs_each_request(prod_python, tmp_path):
    env = _production_environ(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    access = tmp_path / "access.log"
    env.update(BIND=f"127.0.0.1:{port}", WEB_WORKERS="1", WEB_ACCESS_LOG=str(access))
    web = subprocess.Popen(
        [prod_python, "-m", "gunicorn", "-c", "python:contextops.gunicorn_conf"]
        + ["contextops.wsgi:application"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def answer() -> httpx.Response | None:
        assert web.poll() is None, "gunicorn stopped"
        try:
            return httpx.get(
                f"http://127.0.0.1:{port}/healthz",
                headers={"Host": "contextops.example.com", "User-Agent": "probe/1"},
            )
        except httpx.TransportError:
            return None

    try:
        answered = wait_until(answer, timeout=60, what="the installed gunicorn to answer")
        assert answered.status_code == 200
        # gunicorn writes the line once the answer is sent
        wait_until(
            lambda: "probe/1" in (access.read_text() if access.exists() else ""),
            timeout=5,
            what="the access log line",
        )
        line = access.read_text().splitlines()[-1]
        assert '"GET /healthz HTTP/1.1" 200' in line and "ms" in line and "probe/1" in line
    finally:
        web.terminate()
        web.wait(timeout=30)
