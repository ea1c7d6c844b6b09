"""A production web server of a test's own: gunicorn with contextops/gunicorn_conf.py and
``contextops.settings`` (``DEBUG=0``), on a free port, over a SQLite database in a folder
of its own, migrated, its static files collected; a dashboard user and API keys made with the project's own
functions. Used by tests/hardening/test_proxy_trust.py and test_long_polls.py.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
from django.conf import settings

from tests.servers import free_port

SETUP = r"""
import json, sys
import django
django.setup()
from contextops.tenancy import api_key_create, user_create
user_create(org_name="Acme", username="ada", password="pw-for-tests-1")
keys = {}
for org, agent in json.loads(sys.argv[1]):
    keys[f"{org}/{agent}"] = api_key_create(org_name=org, agent_name=agent)[1]
print(json.dumps(keys))
"""


class ProductionServer:
    def __init__(self, directory: Path, *, keys: list[tuple[str, str]], **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / "gunicorn.log"
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "REDIS_URL", "DATABASE_URL")
                and not k.startswith("CONTEXTOPS_")
            },
            "DJANGO_SETTINGS_MODULE": "contextops.settings",
            "CELERY_BROKER_URL": "memory://",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "DEBUG": "0",
            "SECURE_SSL_REDIRECT": "0",
            "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0",
            "CONTEXTOPS_VAR_DIR": str(directory),
            "STATIC_ROOT": str(directory / "static"),
            "BIND": f"127.0.0.1:{self.port}",
            "WEB_ACCESS_LOG": "",
            "LOG_LEVEL": "WARNING",
            **env,
        }
        run = {"cwd": settings.BASE_DIR, "env": self.env, "check": True, "timeout": 300}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], **run)
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], **run)
        made = subprocess.run(
            [sys.executable, "-c", SETUP, json.dumps(keys)], capture_output=True, text=True, **run
        )
        self.keys: dict[str, str] = json.loads(made.stdout.strip().splitlines()[-1])
        self.process: subprocess.Popen | None = None

    def start(self) -> ProductionServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:contextops.gunicorn_conf"]
            + ["contextops.wsgi:application"],
            cwd=settings.BASE_DIR,
            env=self.env,
            stdout=open(self.log, "a"),  # noqa: SIM115 (kept open for the server's life)
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"gunicorn did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    def api(self, key: str, **kwargs) -> httpx.Client:
        return httpx.Client(
            base_url=f"{self.url}/api/v1",
            headers={"Authorization": f"Bearer {self.keys[key]}"},
            **kwargs,
        )

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:  # requests still waiting: no need to let them
                self.process.kill()
                self.process.wait(10)


def production_web_start(directory: Path) -> ProductionServer:
    """The one production server the proxy, framing and long-poll tests share (each
    server costs a migration and a collectstatic): gunicorn 2 workers x 8 threads, as the
    issue's install ran, behind a TLS proxy at 10.0.0.2 that the tests are not."""
    return ProductionServer(
        directory,
        keys=[("Acme", "framer"), ("Acme", "waiter"), ("Globex", "reader")],
        BEHIND_TLS_PROXY="1",
        CONTEXTOPS_TRUSTED_PROXIES="10.0.0.2",
        WEB_WORKERS="2",
        WEB_THREADS="8",
    ).start()


def production_worker(env: dict, queue: str, log: Path) -> subprocess.Popen:
    """The production worker command (``celery -A contextops worker``, prefork pool, two
    processes) on ``queue``, its output appended to ``log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "contextops", "worker"]
        + ["--concurrency", "2", "-Q", queue, "--loglevel", "INFO"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=open(log, "a"),  # noqa: SIM115 (kept open for the worker's life)
        stderr=subprocess.STDOUT,
    )
