"""GET /metrics: off by default, behind a bearer token, labelled by route template, the
database's figures in a bounded number of statements, and every web process's figures
added up through PROMETHEUS_MULTIPROC_DIR."""

import os
import subprocess
import sys

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from prometheus_client import REGISTRY
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.parser import text_string_to_metric_families

from contextops.metrics import DatabaseCollector
from tests.servers import free_port, port_answers, with_database
from tests.waiting import wait_until

TOKEN = "metrics-token-for-tests"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


@pytest.fixture
def metrics_on(settings):
    settings.CONTEXTOPS_METRICS_TOKEN = TOKEN
    settings.PROMETHEUS_MULTIPROC_DIR = ""
    return settings


def samples(body: bytes) -> dict[tuple[str, frozenset], float]:
    """Every sample of an exposition: (name, labels) -> value."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def requests_counted(method: str, route: str, status: int) -> float:
    labels = {"method": method, "route": route, "status": str(status)}
    return REGISTRY.get_sample_value("contextops_http_requests_total", labels) or 0.0


def compaction_queue(api, session_id: str) -> None:
    """A compaction queued through the API; no worker runs it here."""
    said = {"messages": [{"role": "user", "content": "Hi"}]}
    assert api.post(f"/sessions/{session_id}/messages", said).status_code == 200
    assert api.post(f"/sessions/{session_id}/compactions", {}).status_code == 202


def scrape(**extra) -> dict[tuple[str, frozenset], float]:
    response = Client().get("/metrics", **AUTH, **extra)
    assert response.status_code == 200, response.content
    return samples(response.content)


def test_it_is_off_unless_a_token_is_set(db, settings):
    """Off, /metrics is a 404 and no request is counted: the middleware leaves the chain
    (nothing to pay on any request)."""
    settings.CONTEXTOPS_METRICS_TOKEN = ""
    counted = requests_counted("GET", "/healthz", 200)
    assert Client().get("/healthz").status_code == 200
    assert requests_counted("GET", "/healthz", 200) == counted
    assert Client().get("/metrics", **AUTH).status_code == 404


def test_it_answers_only_the_bearer_of_the_token(db, metrics_on):
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": TOKEN}):
        response = Client().get("/metrics", **headers)
        assert response.status_code == 401, headers
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"contextops_" not in response.content

    response = Client().get("/metrics", **AUTH)
    assert response.status_code == 200
    assert response["Content-Type"] == CONTENT_TYPE_PLAIN_0_0_4
    assert response["Cache-Control"] == "no-store"
    assert b"contextops_http_requests_total" in response.content


def test_a_scraper_may_address_the_instance_by_its_own_address(db, metrics_on):
    # Like the probes: ALLOWED_HOSTS names the site, not the address a scraper uses.
    response = Client().get("/metrics", HTTP_HOST="10.1.2.3:8000", **AUTH)
    assert response.status_code == 200


def test_requests_are_counted_by_route_template_never_by_address(api, start_session, metrics_on):
    session = start_session()
    template = "/api/v1/sessions/{session_id}"
    before = requests_counted("GET", template, 200)
    missing_before = requests_counted("GET", "unmatched", 404)

    assert api.get(f"/sessions/{session['id']}").status_code == 200
    assert Client().get("/no/such/page/42").status_code == 404

    assert requests_counted("GET", template, 200) == before + 1
    assert requests_counted("GET", "unmatched", 404) == missing_before + 1
    body = Client().get("/metrics", **AUTH).content.decode()
    assert session["id"] not in body and "/no/such/page" not in body
    families = {f.name: f for f in text_string_to_metric_families(body)}
    durations = families["contextops_http_request_duration_seconds"]
    counts = [
        s
        for s in durations.samples
        if s.name.endswith("_count") and s.labels == {"method": "GET", "route": template}
    ]
    assert counts and counts[0].value >= 1


def test_the_scrape_itself_is_not_counted(db, metrics_on):
    refused = requests_counted("GET", "unmatched", 401)
    Client().get("/metrics")
    figures = scrape()
    assert requests_counted("GET", "unmatched", 401) == refused
    routes = {dict(labels).get("route") for (name, labels) in figures}
    assert "/metrics" not in routes


def test_the_database_figures_name_a_frame_awaiting_approval_and_a_queued_compaction(
    api, start_session, push_ok, suspend_ok, metrics_on
):
    session = start_session()
    frame = push_ok(session["id"], 1000)
    suspend_ok(frame["id"], requires_approval=True)
    compaction_queue(api, session["id"])

    figures = scrape()

    assert figures[("contextops_database_up", frozenset())] == 1
    assert figures[("contextops_frames_awaiting_approval", frozenset())] == 1
    assert figures[("contextops_frames_suspended", frozenset())] == 1
    job = frozenset({("kind", "compaction"), ("status", "queued")})
    assert figures[("contextops_jobs_in_database", job)] == 1
    assert (
        figures[
            ("contextops_jobs_in_database", frozenset({("kind", "import"), ("status", "queued")}))
        ]
        == 0
    )
    assert figures[("contextops_sessions", frozenset({("state", "active")}))] == 1


def test_the_database_figures_cost_five_statements_however_many_rows(
    api, start_session, push_ok, suspend_ok, db
):
    for _ in range(3):
        session = start_session()
        suspend_ok(push_ok(session["id"], 1000)["id"], requires_approval=True)
        compaction_queue(api, session["id"])
    with CaptureQueriesContext(connection) as statements:
        families = list(DatabaseCollector().collect())
    assert len(statements) == 5, [q["sql"] for q in statements]
    assert "contextops_jobs_in_database" in {family.name for family in families}


def test_a_database_that_is_away_is_a_figure_not_an_error(db, metrics_on, monkeypatch):
    from django.db import OperationalError
    from django.db.models import QuerySet

    def away(*args, **kwargs):
        raise OperationalError("the server closed the connection")

    monkeypatch.setattr(QuerySet, "count", away)
    response = Client().get("/metrics", **AUTH)
    assert response.status_code == 200
    figures = samples(response.content)
    assert figures[("contextops_database_up", frozenset())] == 0
    assert ("contextops_frames_suspended", frozenset()) not in figures


def test_figures_that_cannot_be_gathered_are_a_503_never_a_500(db, metrics_on, tmp_path):
    metrics_on.PROMETHEUS_MULTIPROC_DIR = str(tmp_path / "not-made")
    response = Client().get("/metrics", **AUTH)
    assert response.status_code == 503


# Runs in a process of its own, as a gunicorn worker does: its requests' figures go to
# files in PROMETHEUS_MULTIPROC_DIR, which prometheus_client reads when it is imported.
ANSWER_PROBES = """
import sys
import django
django.setup()
from django.test import Client
for _ in range(int(sys.argv[1])):
    assert Client().get("/healthz").status_code == 200
if sys.argv[2:] == ["stay"]:  # a process still running (a Celery worker): until stdin closes
    print("answered", flush=True)
    sys.stdin.read()
"""


def _process_env(directory, **more) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "contextops.settings_test",
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
        "CONTEXTOPS_METRICS_TOKEN": TOKEN,  # metrics on: unset, the middleware is not used
        **more,
    }


def test_a_scrape_adds_up_the_figures_of_every_process(db, metrics_on, tmp_path):
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", ANSWER_PROBES, str(count)],
            cwd=django_settings.BASE_DIR,
            env=_process_env(tmp_path),
        )
        for count in (3, 4)
    ]
    assert [process.wait(120) for process in processes] == [0, 0]
    assert len(list(tmp_path.glob("counter_*.db"))) == 2  # one file per process

    metrics_on.PROMETHEUS_MULTIPROC_DIR = str(tmp_path)
    figures = scrape()

    probe = frozenset({("method", "GET"), ("route", "/healthz"), ("status", "200")})
    assert figures[("contextops_http_requests_total", probe)] == 7
    assert figures[("contextops_database_up", frozenset())] == 1  # and the database's


def test_gunicorns_workers_add_up_in_one_directory_cleared_of_gone_processes(db, tmp_path):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    # The figures of an earlier run, which the next start must not add to its own...
    earlier = subprocess.run(
        [sys.executable, "-c", ANSWER_PROBES, "5"],
        cwd=django_settings.BASE_DIR,
        env=_process_env(metrics_dir),
        timeout=120,
    )
    assert earlier.returncode == 0 and list(metrics_dir.glob("*.db"))
    # ...and those of a process of this host still running, which it must keep.
    running = subprocess.Popen(
        [sys.executable, "-c", ANSWER_PROBES, "2", "stay"],
        cwd=django_settings.BASE_DIR,
        env=_process_env(metrics_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert running.stdout.readline() == "answered\n"
    database = connection.settings_dict["NAME"]
    port = free_port()
    env = _process_env(
        metrics_dir,
        DJANGO_SETTINGS_MODULE="contextops.settings",
        DATABASE_URL=(
            with_database(os.environ["DATABASE_URL"], database)
            if connection.vendor == "postgresql"
            else f"sqlite:///{database}"
        ),
        CELERY_BROKER_URL="memory://",
        SECURE_SSL_REDIRECT="0",
        CONTEXTOPS_VAR_DIR=str(tmp_path),
        CONTEXTOPS_METRICS_TOKEN=TOKEN,
        BIND=f"127.0.0.1:{port}",
        WEB_WORKERS="2",
        WEB_THREADS="2",
        WEB_ACCESS_LOG="",
        LOG_LEVEL="ERROR",
    )
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "python:contextops.gunicorn_conf",
            "contextops.wsgi:application",
        ],
        cwd=django_settings.BASE_DIR,
        env=env,
    )

    def started() -> bool:
        assert web.poll() is None, "gunicorn did not start"
        return port_answers(port)

    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(started, timeout=60, what="gunicorn to answer")
        for _ in range(20):  # one connection each: the workers take turns as they accept
            assert httpx.get(base + "/healthz", timeout=30).status_code == 200
        scraped = httpx.get(
            base + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
    finally:
        web.terminate()
        web.wait(30)
        running.communicate(timeout=30)
    assert scraped.status_code == 200, scraped.text
    figures = samples(scraped.content)
    probe = frozenset({("method", "GET"), ("route", "/healthz"), ("status", "200")})
    assert figures[("contextops_http_requests_total", probe)] == 20 + 2  # not + 5
    assert figures[("contextops_database_up", frozenset())] == 1


def _jobs_counted(task: str, outcome: str) -> float:
    labels = {"task": task, "outcome": outcome}
    return REGISTRY.get_sample_value("contextops_jobs_total", labels) or 0.0


def test_the_workers_count_the_jobs_they_ran_by_task_and_outcome(celery_worker):
    from contextops.tasks import idempotency_purge
    from frames.context.tasks import handle_page_out

    purge, page_out = "contextops.tasks.idempotency_purge", "frames.handle_page_out"
    before = (_jobs_counted(purge, "success"), _jobs_counted(page_out, "failure"))

    idempotency_purge.delay()
    handle_page_out.delay("not-a-handle")  # no such id: the job fails

    wait_until(
        lambda: (
            (_jobs_counted(purge, "success"), _jobs_counted(page_out, "failure"))
            == (before[0] + 1, before[1] + 1)
        ),
        what="the worker to count its jobs",
    )
