"""PostgreSQL restarts under traffic: requests in flight fail cleanly, later ones succeed.

A PostgreSQL cluster of the test's own (initdb in a temporary directory, its own port),
so restarting it disturbs nothing else; gunicorn serves the real API against it with
persistent connections, which the restart breaks. Every answer must be a success or a
503 in the documented format, never a 500; within seconds of the restart everything
succeeds again, and the log and budgets are whole.
"""

import os
import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import httpx
import pytest
from django.conf import settings

from tests.hardening.figures import figures_record
from tests.servers import PrivatePostgres, free_port, postgres_missing
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.skipif(bool(postgres_missing()), reason=postgres_missing() or "-"),
    pytest.mark.xdist_group("live"),
]


@pytest.fixture
def cluster():
    server = PrivatePostgres().start()
    yield {"url": server.url, "restart": lambda: server.restart("fast")}
    server.close()


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
    port = free_port()
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

        def traffic(keyed: bool):
            # Keyed requests cross the idempotency middleware, which reads the database
            # (the key's owner, the claim) before any view.
            while not stop.is_set():
                headers = {"Idempotency-Key": str(uuid.uuid4())} if keyed else {}
                try:
                    r = api.post(
                        f"/frames/{root['id']}/usage",
                        json={"input_tokens": 3, "output_tokens": 2},
                        headers=headers,
                    )
                    answers.append((r.status_code, r.json()))
                except httpx.HTTPError as error:  # a connection the server dropped is not an answer
                    answers.append((0, {"error": type(error).__name__}))

        threads = [threading.Thread(target=traffic, args=(i > 0,)) for i in range(3)]
        for t in threads:
            t.start()
        wait_until(lambda: len(answers) >= 10, what="traffic before the restart")
        restart_started = time.monotonic()
        cluster["restart"]()
        restart_took = time.monotonic() - restart_started
        during = len(answers)
        # Traffic goes on through the restart until the server answers it again.
        wait_until(
            lambda: any(status == 200 for status, _ in answers[during:]),
            timeout=60,
            what="an answer after the restart",
        )
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
