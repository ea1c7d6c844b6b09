"""PostgreSQL restarts under traffic: requests in flight fail cleanly, later ones succeed.

A PostgreSQL cluster of the test's own (initdb in a temporary directory, its own port),
so restarting it disturbs nothing else; gunicorn serves the real API against it with
persistent connections, which the restart breaks. Every answer must be a success or a
503 in the documented format, never a 500; within seconds of the restart everything
succeeds again, and the log and budgets are whole.
"""

import glob
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.hardening.figures import figures_record

BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
pytestmark = [
    pytest.mark.skipif(
        not BIN or shutil.which("runuser") is None, reason="needs PostgreSQL's server binaries"
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="starts a private cluster as the postgres user"),
    pytest.mark.xdist_group("live"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(*args: str) -> None:
    subprocess.run(
        ["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=120
    )


@pytest.fixture
def cluster():
    # Not under pytest's temporary folder: the postgres user must be able to reach it.
    root = Path(tempfile.mkdtemp(prefix="contextops-pg-"))
    data = root / "data"
    shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    bin_dir = BIN[-1]
    _as_postgres(f"{bin_dir}/initdb", "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"

    def ctl(*args):
        _as_postgres(
            f"{bin_dir}/pg_ctl",
            "-D",
            str(data),
            "-o",
            options,
            "-w",
            "-l",
            str(root / "log"),
            *args,
        )

    ctl("start")
    yield {
        "url": f"postgres://postgres@127.0.0.1:{port}/postgres",
        "restart": lambda: ctl("restart", "-m", "fast"),
    }
    ctl("stop", "-m", "immediate")
    shutil.rmtree(root, ignore_errors=True)


def test_a_database_restart_fails_requests_cleanly_and_later_ones_succeed(cluster, tmp_path):
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "REDIS_URL")
        },
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DATABASE_URL": cluster["url"],
        "CELERY_BROKER_URL": "memory://",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "CONN_MAX_AGE": "600",
        "CONTEXTOPS_RATE_LIMIT_PER_MINUTE": "0",
        "CONTEXTOPS_VAR_DIR": str(tmp_path),
        "LOG_LEVEL": "ERROR",
    }
    manage = [sys.executable, "manage.py"]
    subprocess.run(
        [*manage, "migrate", "-v0"], cwd=settings.BASE_DIR, env=env, check=True, timeout=300
    )
    created = subprocess.run(
        [
            *manage,
            "create_api_key",
            "--org",
            "Acme",
            "--agent",
            "db-restart",
            "--authority",
            "employee",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    key = next(word for word in created.stdout.split() if word.startswith("cops_"))
    port = _free_port()
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "contextops.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "2",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    api = httpx.Client(
        base_url=f"http://127.0.0.1:{port}/api/v1",
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    try:
        for _ in range(100):
            try:
                if api.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        session = api.post("/sessions", json={"identity": {"user_name": "Ada"}}).json()
        root = api.post(
            f"/sessions/{session['id']}/frames", json={"goal": "Root", "budget": {"total": 10**8}}
        ).json()

        answers: list[tuple[int, dict]] = []
        stop = threading.Event()

        def traffic():
            while not stop.is_set():
                try:
                    r = api.post(
                        f"/frames/{root['id']}/usage", json={"input_tokens": 3, "output_tokens": 2}
                    )
                    answers.append((r.status_code, r.json()))
                except httpx.HTTPError as error:  # a connection the server dropped is not an answer
                    answers.append((0, {"error": type(error).__name__}))

        threads = [threading.Thread(target=traffic) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(1)
        restart_started = time.monotonic()
        cluster["restart"]()
        restart_took = time.monotonic() - restart_started
        time.sleep(2)
        stop.set()
        for t in threads:
            t.join(30)

        statuses = {status for status, _ in answers}
        assert statuses <= {200, 503}, [a for a in answers if a[0] not in (200, 503)][:5]
        for status, body in answers:
            if status == 503:
                assert body["error"] == "unavailable" and body["detail"]
        # Later requests succeed, on fresh connections.
        later = [
            api.post(
                f"/frames/{root['id']}/usage", json={"input_tokens": 3, "output_tokens": 2}
            ).status_code
            for _ in range(10)
        ]
        assert later == [200] * 10, later
        frame = api.get(f"/frames/{root['id']}").json()
        successes = sum(1 for status, _ in answers if status == 200) + 10
        assert (
            frame["budget"]["used"] == 5 * successes
        )  # every success counted once, every failure not at all
        verify = subprocess.run(
            [*manage, "rebuild_projections", "--verify"],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        figures_record(
            "faults-database-restart",
            {
                "client_threads": len(threads),
                "gunicorn": "2 workers x 2 threads, CONN_MAX_AGE=600",
                "pg_ctl_restart_s": round(restart_took, 1),
                "answers_during_traffic": dict(Counter(status for status, _ in answers)),
                "later_requests": dict(Counter(later)),
                "tokens_used": frame["budget"]["used"],
                "tokens_expected": 5 * successes,
                "rebuild_projections_verify": "clean",
            },
        )
    finally:
        api.close()
        web.terminate()
        web.wait(20)
