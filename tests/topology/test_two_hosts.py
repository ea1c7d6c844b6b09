"""Past one machine: two web hosts and two worker hosts sharing PostgreSQL, Redis and a bucket.

Each host is a network namespace of its own with its own working directory and media
folder (tests/topology/hosts.py); the web hosts run gunicorn as production does, the
worker hosts Celery. They share nothing but the database, Redis and the S3 bucket (moto's
server), which they reach through their network. Agents alternate between the two web
hosts. The test checks that a 50 KB RLM value written through one web host reads back
through the other and inside a job on a worker host, that the rate limit is one count for
the whole installation, that killing a web host mid-run loses no acknowledged write, and
that the retention job on a worker archives an ended session to the bucket while
``rebuild_projections --verify`` still finds no difference.
"""

import json
import secrets
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
import redis
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection

from contextops.celery import app
from contextops.tenancy import api_key_create, user_create
from frames.models import EventArchive, Frame, Session, Usage
from frames.projections import budget_audit, projection_diff
from tests.conftest import IS_REDIS, postgres_only
from tests.waiting import wait_until

from .hosts import Host, Network, namespaces_available

ROOT = Path(__file__).resolve().parents[2]
RATE_LIMIT = 20

pytestmark = [
    postgres_only,
    pytest.mark.skipif(not IS_REDIS, reason="needs Redis: the shared broker and cache (REDIS_URL)"),
    pytest.mark.skipif(bool(namespaces_available()), reason=namespaces_available() or "ok"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("topology"),
]


class Installation:
    def __init__(
        self, network: Network, webs: list[Host], workers: list[Host], bucket, queue: str
    ) -> None:
        self.network, self.webs, self.workers, self.bucket = network, webs, workers, bucket
        self.urls = [f"http://{host.address}:8000" for host in webs]
        # The worker hosts consume a queue of this run's own: other tests' workers on the
        # same Redis never take these jobs, and these workers never take theirs.
        self.queue = queue


def _host_env(host: Host, bucket, s3_port: int, allowed_hosts: str, secret: str) -> dict:
    db = connection.settings_dict
    redis_url = urlparse(django_settings.REDIS_URL)
    auth = f"{db['USER']}:{db['PASSWORD']}@" if db["PASSWORD"] else f"{db['USER']}@"
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(host.directory),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DATABASE_URL": f"postgres://{auth}{host.gateway}:{db['PORT'] or 5432}/{db['NAME']}",
        "REDIS_URL": f"redis://{host.gateway}:{redis_url.port or 6379}{redis_url.path}",
        "SECRET_KEY": secret,
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "ALLOWED_HOSTS": allowed_hosts,
        "CONTEXTOPS_RATE_LIMIT_PER_MINUTE": str(RATE_LIMIT),
        "CONTEXTOPS_VAR_DIR": str(host.directory / "var"),
        "MEDIA_ROOT": str(host.directory / "media"),
        "STATIC_ROOT": str(host.directory / "static"),
        "CONTEXTOPS_TOPOLOGY_HOST": host.name,
        "LOG_LEVEL": "WARNING",
        **bucket.env(endpoint_url=f"http://{host.gateway}:{s3_port}"),
    }


@pytest.fixture
def installation(transactional_db, s3_bucket, settings, tmp_path):
    db = connection.settings_dict
    ports = [int(db["PORT"] or 5432), urlparse(django_settings.REDIS_URL).port or 6379]
    ports.append(s3_bucket.server.port)
    # This process reads what the hosts write (archives) from the same bucket.
    settings.STORAGES = s3_bucket.storages()
    settings.MEDIA_ROOT = tmp_path / "test-process-media"
    network = Network(tmp_path)
    try:
        webs = [network.add("web-a"), network.add("web-b")]
        workers = [network.add("worker-1"), network.add("worker-2")]
        network.relay_services(ports)
        allowed = ",".join(host.address for host in webs)
        secret = secrets.token_urlsafe(50)
        for host in webs:
            # As a deployment does before it starts a web host: its pages link the hashed
            # names collectstatic records (settings.STORAGES), which it alone writes.
            collected = subprocess.run(
                [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
                cwd=ROOT,
                env=_host_env(host, s3_bucket, ports[2], allowed, secret),
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert collected.returncode == 0, collected.stdout + collected.stderr
            network.start(
                host,
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "contextops.wsgi:application",
                    "--bind",
                    f"{host.address}:8000",
                    "--workers",
                    "2",
                    "--threads",
                    "4",
                    "--log-level",
                    "warning",
                ],
                _host_env(host, s3_bucket, ports[2], allowed, secret),
            )
        queue = f"topology-{secrets.token_hex(4)}"
        for host in workers:
            network.start(
                host,
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "contextops",
                    "worker",
                    "--include",
                    "tests.topology.jobs",
                    "-Q",
                    queue,
                    "-n",
                    f"{host.name}@topology",
                    "--concurrency",
                    "1",
                    "--without-mingle",
                    "--without-gossip",
                    "--loglevel",
                    "WARNING",
                ],
                _host_env(host, s3_bucket, ports[2], allowed, secret),
            )
        deadline = time.monotonic() + 90
        for host in webs:
            while True:
                try:
                    if httpx.get(f"http://{host.address}:8000/healthz", timeout=2).is_success:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, network.log(host)
                time.sleep(0.3)
        names = {f"{host.name}@topology" for host in workers}
        while True:
            replies = app.control.ping(destination=sorted(names), timeout=1) or []
            if {name for reply in replies for name in reply} == names:
                break
            assert time.monotonic() < deadline, "\n".join(network.log(h) for h in workers)
        yield Installation(network, webs, workers, s3_bucket, queue)
    finally:
        network.close()


class Agent:
    """An agent with its own key that alternates between the web hosts."""

    def __init__(self, installation: Installation, name: str) -> None:
        self.urls = installation.urls
        stored, self.key = api_key_create(
            org_name="Topology", agent_name=name, authority="employee"
        )
        self.key_id = str(stored.pk)
        self.sent = 0
        self.answered_by: Counter = Counter()
        self.failed_on: Counter = Counter()
        self.client = httpx.Client(timeout=15, headers={"Authorization": f"Bearer {self.key}"})

    def call(self, method: str, path: str, body=None, *, host: int | None = None):
        """Send to the next host in turn; a host that does not answer is skipped (the
        write was not acknowledged, so the agent sends it again to the other host)."""
        for attempt in range(6):
            index = host if host is not None else (self.sent + attempt) % len(self.urls)
            try:
                response = self.client.request(
                    method, self.urls[index] + "/api/v1" + path, json=body
                )
            except httpx.TransportError:
                self.failed_on[index] += 1
                if host is not None:
                    raise
                time.sleep(0.05)
                continue
            self.sent += 1
            self.answered_by[index] += 1
            return response
        raise AssertionError(f"no web host answered {method} {path}")


def _wait_for(predicate, seconds: float, what: str):
    return wait_until(predicate, timeout=seconds, interval=0.2, what=what)


def test_two_web_hosts_and_two_workers_share_only_the_database_redis_and_the_bucket(
    installation, settings, capsys
):
    a, b = 0, 1
    writer = Agent(installation, "writer")
    session = writer.call("POST", "/sessions", {"title": "Topology"}, host=a)
    assert session.status_code == 201, session.text
    session_id = session.json()["id"]
    state = writer.call(
        "POST", "/rlm/states", {"prompt": "Read the logs", "session_id": session_id}, host=a
    )
    assert state.status_code == 201, state.text
    state_id = state.json()["state_id"]

    # A 50 KB value written through web host A...
    big = {"lines": [f"line {i:05d} " + "y" * 38 for i in range(1000)]}
    written = writer.call("PUT", f"/rlm/states/{state_id}/variables/logs", {"value": big}, host=a)
    assert written.status_code == 200, written.text
    assert written.json()["in_file"] is True and written.json()["size_bytes"] > 50_000
    # ...lives in the bucket, not on host A's disk...
    organization_id = Session.objects.get(pk=session_id).organization_id
    [key] = installation.bucket.keys(f"rlm/{organization_id}/{state_id}/")
    assert json.loads(installation.bucket.read(key)) == big
    for host in installation.webs + installation.workers:
        assert not any((host.directory / "media").iterdir()), host.name
    # ...reads back through web host B...
    read = writer.call("GET", f"/rlm/states/{state_id}/variables/logs", host=b)
    assert read.status_code == 200 and read.json()["value"] == big

    # ...and inside jobs on the worker hosts, both of which take some.
    results = [f"topology/{secrets.token_hex(4)}.json" for _ in range(6)]
    for name in results:
        app.send_task(
            "topology.rlm_state_read",
            args=[organization_id, state_id, name],
            queue=installation.queue,
        )
    done = _wait_for(
        lambda: set(results) <= set(installation.bucket.keys("topology/")), 90, "worker jobs"
    )
    assert done
    hosts_seen = set()
    for name in results:
        document = json.loads(installation.bucket.read(name))
        assert document["export"]["variables"]["logs"]["value"] == big
        hosts_seen.add(document["host"])
    assert hosts_seen == {"worker-1", "worker-2"}

    # A person logged in through web host A is logged in on web host B. (The hosts check
    # passwords with production's hashers, not the suite's fast one.)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user_create(org_name="Topology", username="ada", password="pw-for-topology-1")
    browser = httpx.Client(timeout=15)
    login_page = browser.get(installation.urls[a] + "/accounts/login/")
    assert login_page.status_code == 200
    logged_in = browser.post(
        installation.urls[a] + "/accounts/login/",
        data={
            "username": "ada",
            "password": "pw-for-topology-1",
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
    )
    assert logged_in.status_code == 302, logged_in.text
    # Behind one load balancer name the browser sends the same cookie to either host.
    dashboard = httpx.get(
        installation.urls[b] + "/", cookies={"sessionid": browser.cookies["sessionid"]}
    )
    assert dashboard.status_code == 200 and "ada" in dashboard.text

    # One rate limit for the installation: writes alternate hosts, the count is shared.
    limited = Agent(installation, "limited")
    _wait_for(lambda: time.time() % 60 < 40, 25, "room in this minute")
    statuses = [
        (
            index % 2,
            limited.call(
                "POST", "/sessions", {"title": f"Limited {index}"}, host=index % 2
            ).status_code,
        )
        for index in range(RATE_LIMIT + 4)
    ]
    assert [status for _, status in statuses[:RATE_LIMIT]] == [201] * RATE_LIMIT
    assert statuses[RATE_LIMIT:] == [(0, 429), (1, 429), (0, 429), (1, 429)]
    counters = redis.Redis.from_url(django_settings.REDIS_URL)
    [counter] = counters.keys(f"*ratelimit:{limited.key_id}:*")
    assert int(counters.get(counter)) == RATE_LIMIT + 4

    # Agents write through both hosts; web host A dies halfway; no acknowledged write is lost.
    agents = [Agent(installation, f"agent-{i}") for i in range(6)]
    acknowledged: dict[str, list] = {"frames": [], "usage": []}
    progress = threading.Semaphore(0)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(agent: Agent, number: int) -> None:
        try:
            started = agent.call("POST", "/sessions", {"title": f"Agent {number}"})
            assert started.status_code == 201, started.text
            frame = agent.call(
                "POST",
                f"/sessions/{started.json()['id']}/frames",
                {"goal": "Work", "budget": {"total": 1_000_000}},
            )
            assert frame.status_code == 201, frame.text
            with lock:
                acknowledged["frames"].append(frame.json()["id"])
            for call in range(14):
                message_id = f"msg-{number}-{call}"
                recorded = agent.call(
                    "POST",
                    f"/frames/{frame.json()['id']}/usage",
                    {"input_tokens": 100, "output_tokens": 10, "message_id": message_id},
                )
                assert recorded.status_code == 200, recorded.text
                with lock:
                    acknowledged["usage"].append(message_id)
                progress.release()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(agent, i)) for i, agent in enumerate(agents)]
    for thread in threads:
        thread.start()
    for _ in range(30):
        assert progress.acquire(timeout=60), errors
    installation.network.kill(installation.webs[a])
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(acknowledged["usage"]) == 6 * 14
    assert sum(agent.answered_by[a] for agent in agents) > 0
    assert sum(agent.failed_on[a] for agent in agents) > 0, "host A died after the run"
    assert sum(agent.answered_by[b] for agent in agents) > 0

    stored = Counter(
        Usage.objects.filter(message_id__in=acknowledged["usage"]).values_list(
            "message_id", flat=True
        )
    )
    assert stored == Counter(acknowledged["usage"])  # each once: none lost, none twice
    assert Frame.objects.filter(pk__in=acknowledged["frames"]).count() == 6
    for frame in Frame.objects.filter(pk__in=acknowledged["frames"]):
        assert frame.budget_used == 14 * 110
        assert budget_audit(frame.session) == [] and projection_diff(frame.session) == []

    # Host B ends the writer's session; the retention job on a worker archives its events
    # to the bucket, and the log still reads the same and verifies.
    ended = writer.call("POST", f"/sessions/{session_id}/end", host=b)
    assert ended.status_code == 200, ended.text
    events_before = writer.call("GET", f"/sessions/{session_id}/events", host=b).json()
    app.send_task("frames.events_archive", kwargs={"days": 0}, queue=installation.queue)
    archive = _wait_for(
        lambda: EventArchive.objects.filter(session_id=session_id).first(), 60, "the archive"
    )
    assert installation.bucket.keys(f"events/{organization_id}/{session_id}/") == [
        archive.file_name
    ]
    assert writer.call("GET", f"/sessions/{session_id}/events", host=b).json() == events_before
    call_command("rebuild_projections", "--verify")
    assert "match the event log" in capsys.readouterr().out
