"""The hardening suites' shared world: Acme's objects, and jobs recorded instead of sent."""

import copy
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import transaction
from django.utils import timezone

from contextops.models import ApiKey
from contextops.notifications.services import destination_create
from contextops.tenancy import api_key_create
from frames.graphs.models import GraphThread
from frames.models import token_hash
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from frames.services.usage import usage_record
from tests.conftest import ApiClient
from tests.snapshot import TablesSnapshot, committed_once, restored_for_each_test


@pytest.fixture
def jobs_sent(monkeypatch) -> list:
    """Record jobs instead of publishing them: a page-out then needs no broker or worker."""
    sent: list = []

    def record(task, *args):
        sent.append((task.name, args))
        return True

    monkeypatch.setattr("frames.context.paging.job_send", record)
    monkeypatch.setattr("frames.conversation.compaction.job_send", record)
    return sent


@pytest.fixture
def acme(api):
    """Acme's objects, with the secrets a leak would reveal."""
    return acme_build(api)


def acme_build(api) -> dict:
    """Acme's world, made through ``api`` (Acme's own agent) as an agent would make it."""
    session = session_create(
        organization=api.organization,
        agent=api.agent,
        identity={"user_name": "Acme person"},
        title="acme-secret-title shared-project",
        model="acme-secret-model",
    )
    root = frame_push(session=session, goal="acme-secret-goal", budget_total=100_000)
    frame = frame_push(session=session, parent=root, goal="acme-child-goal", budget_total=10_000)
    waiting = frame_push(session=session, parent=root, goal="acme-waiting-goal", budget_total=1_000)
    handle = handle_add(frame=frame, kind="document", content="acme-secret-content")
    ids = {"session_id": str(session.pk), "frame_id": str(frame.pk), "handle_id": str(handle.pk)}
    secrets = {str(session.pk), str(frame.pk), str(root.pk), str(handle.pk), "acme-secret"}

    def created(response, status=201):
        assert response.status_code == status, response.content
        return response.json()

    created(
        api.post(
            "/facts",
            {
                "key": "acme_secret_fact",
                "subject": "acme-secret-subject",
                "value": "acme-secret-value",
                "source": "user",
            },
        )
    )
    created(
        api.post(
            "/facts",
            {
                "key": "acme_draft_fact",
                "subject": "acme-secret-draft",
                "value": "acme-secret-draft-value",
                "source": "user",
                "scope": "draft",
                "scope_id": "acme-secret-scope",
            },
        )
    )
    created(
        api.post(
            "/facts",
            {
                "key": "acme_budget_cap",
                "subject": "acme-secret-budget",
                "value": 10,
                "source": "policy",
                "is_constraint": True,
                "constraint_type": "budget",
                "constraint": {"max": 10},
            },
        )
    )
    # Two facts that name one meeting differently: a proposed supersession to settle.
    created(
        api.post(
            "/facts",
            {"key": "acme_secret_meeting_day", "value": "Tuesday 2pm", "source": "user"},
        )
    )
    conflict = created(
        api.post(
            "/facts",
            {"key": "acme_secret_sync_meeting", "value": "Thursday 3pm", "source": "user"},
        )
    )["proposed_conflicts"][0]
    ids["conflict_id"] = str(conflict["id"])
    ids["key"] = "acme_secret_fact"
    secrets |= {"acme_secret_fact", "acme_draft_fact", "acme_budget_cap"}
    secrets |= {"acme_secret_meeting_day", "acme_secret_sync_meeting"}
    created(
        api.put(
            f"/sessions/{session.pk}/working-set/acme_secret_fact", {"value": "acme-secret-ws"}
        ),
        200,
    )
    created(
        api.post(
            f"/sessions/{session.pk}/messages",
            {"messages": [{"role": "user", "content": "acme-secret-message"}]},
        ),
        200,
    )
    state = created(
        api.post("/rlm/states", {"prompt": "acme-secret-prompt", "session_id": str(session.pk)})
    )
    ids["state_id"] = state["state_id"]
    ids["checkpoint_id"] = state["checkpoints"][0]["checkpoint_id"]
    created(
        api.put(f"/rlm/states/{ids['state_id']}/variables/acme_var", {"value": "acme-secret-var"}),
        200,
    )
    ids["name"] = "acme_var"
    secrets |= {ids["state_id"], ids["checkpoint_id"]}
    created(
        api.post(
            "/langgraph/checkpoints",
            {
                "thread_id": "acme-secret-thread",
                "checkpoint_id": "acme-secret-checkpoint",
                "checkpoint": {"type": "json", "data": "ImFjbWUtc2VjcmV0Ig=="},
                "channel_versions": {"messages": 1},
                "blobs": [{"channel": "messages", "version": "1", "type": "json", "data": "IiI="}],
                "metadata": {"source": "input", "step": -1, "run_id": "acme-secret-run"},
                "session_id": str(session.pk),
            },
        )
    )
    ids["thread_id"] = "acme-secret-thread"
    ids["graph_thread_pk"] = str(
        GraphThread.objects.get(organization=api.organization, thread_id=ids["thread_id"]).pk
    )
    ids["graph_checkpoint_id"] = "acme-secret-checkpoint"
    secrets |= {"acme-secret-thread", "acme-secret-checkpoint"}
    suspension = created(
        api.post(
            f"/frames/{waiting.pk}/suspend",
            {"reason": "acme-secret-reason", "requires_approval": True},
        )
    )
    ids["token"] = suspension["token"]
    ids["waiting_frame_id"] = str(waiting.pk)
    secrets |= {ids["token"], str(waiting.pk), token_hash(ids["token"])}
    compaction = created(api.post(f"/sessions/{session.pk}/compactions", {}), 202)
    ids["compaction_id"] = compaction["id"]
    secrets.add(compaction["id"])
    transcript = (
        '{"type":"user","sessionId":"acme-secret-transcript","message":'
        '{"role":"user","content":"acme-secret-prompt"}}\n'
    )
    upload = created(
        api.post("/imports", {"file_name": "acme-secret.jsonl", "content": transcript}), 202
    )
    ids["import_id"] = upload["id"]
    secrets.add(upload["id"])
    # A recorded pack for the pack diff (a replay: it moves no lifecycle).
    session.refresh_from_db()
    pack = created(
        api.post(
            f"/sessions/{session.pk}/context-pack",
            {"budget_tokens": 2000, "as_of_seq": session.last_event_seq},
        ),
        200,
    )
    ids["a"] = ids["b"] = ids["pack_id"] = pack["id"]
    secrets.add(pack["id"])
    call = usage_record(
        session=session, frame=frame, input_tokens=10, output_tokens=2, model="claude-sonnet-4-5"
    )
    ids["call_id"] = str(call.pk)
    ids["seq"] = "1"
    destination, _ = destination_create(
        organization=api.organization,
        name="acme-secret-destination",
        kind="webhook",
        url="https://hooks.example/acme-secret-hook",
    )
    ids["destination_id"] = str(destination.pk)
    secrets |= {ids["destination_id"], "acme-secret-hook"}
    return {"ids": ids, "secrets": secrets, "session": session, "frame": frame}


class AcmeOnce:
    """Acme's world built once for a module (``acme_once``), handed to each test afresh."""

    def __init__(self, api, world: dict) -> None:
        self.api = api
        self.world = world

    def api_for_test(self):
        """Acme's agent and key, with a client of the test's own (no cookie carries over)."""
        return ApiClient(key=self.api.key, organization=self.api.organization, agent=self.api.agent)

    def world_for_test(self) -> dict:
        """A copy per test, as Django's setUpTestData gives one: an instance a test changes
        in memory (``refresh_from_db``, a field set) is not the next test's."""
        return copy.deepcopy(self.world)


@pytest.fixture(scope="module")
def acme_once(django_db_setup, django_db_blocker) -> Iterator[AcmeOnce]:
    """Acme's key and world for a module of non-transactional tests, built once.

    It is made inside a transaction opened for the module and rolled back after its last
    test. Each test's own transaction (pytest-django's ``db``) is a savepoint inside it,
    rolled back when the test ends, so what a test writes or deletes (a revoked key, a
    popped frame, an action's rows) is gone before the next one starts, exactly as when
    the world was built per test. A module opts in by defining ``api`` and ``acme`` from
    it (test_authorization.py, test_strict_queries.py). Jobs are recorded while it is
    built, as ``jobs_sent`` does for a test."""
    atomic = transaction.atomic()
    # As Django marks its TestCase transactions: a durable block inside is still allowed.
    atomic._from_testcase = True  # type: ignore[attr-defined]
    with django_db_blocker.unblock():
        atomic.__enter__()
        try:
            api, world = acme_key_and_world()
        except BaseException:
            atomic.__exit__(*sys.exc_info())
            raise
    try:
        yield AcmeOnce(api, world)
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def acme_key_and_world() -> tuple[ApiClient, dict]:
    """Acme's key and world, with jobs recorded (not sent) while they are built."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("frames.context.paging.job_send", lambda task, *args: True)
        patch.setattr("frames.conversation.compaction.job_send", lambda task, *a: True)
        key, raw = api_key_create(
            org_name="Acme", agent_name="researcher", authority="employee", department=""
        )
        api = ApiClient(key=raw, organization=key.agent.organization, agent=key.agent)
        return api, acme_build(api)


class AcmeCommitted(AcmeOnce):
    """Acme's world committed once for a module (``acme_committed``), its tables put back
    before each test."""

    def __init__(self, api, world: dict, snapshot: TablesSnapshot) -> None:
        super().__init__(api, world)
        self.snapshot = snapshot

    def restore(self) -> None:
        """Every table as the world left it. The keys' last use is dated now, as a world
        just built has it: a key last used over a minute ago has its use stamped by the
        next request (contextops/auth.py), a commit of its own that a test counting
        commits (test_commit_answers.py) would take for the request's."""
        self.snapshot.restore(
            then=lambda: ApiKey.objects.exclude(last_used_at=None).update(
                last_used_at=timezone.now()
            )
        )

    @contextmanager
    def restored_for_test(self, django_db_blocker) -> Iterator[None]:
        with restored_for_each_test(django_db_blocker, self.restore):
            yield


@pytest.fixture(scope="module")
def acme_committed(django_db_setup, django_db_blocker) -> Iterator[AcmeCommitted]:
    """Acme's key and world for a module of transactional tests, built and committed once.

    ``acme`` builds the world through about thirty API calls for every test, and the test
    ends with Django's flush of every table: in a module of a hundred tests on a live
    server (test_fuzz.py) that is most of its time. Here the world is built once, on
    emptied tables, and a snapshot of every table taken (tests/snapshot.py); before each
    test the tables are put back to it in one transaction, so a test starts from exactly
    the rows, ids and secrets it did, committed, whatever the test before it wrote or
    deleted. After the module's last test every table is emptied, as a transactional
    test leaves them. A module opts in by defining ``_django_db_helper`` (the fixture
    behind pytest-django's ``db``, ``transactional_db``, ``live_server`` and ``django_db``
    mark) from ``restored_for_test``, and ``api`` and ``acme`` from ``api_for_test`` and
    ``world_for_test`` (test_fuzz.py, test_commit_answers.py). What a test makes of its own
    (a user, another key) is gone at the next test's restore."""
    with committed_once(django_db_blocker, acme_key_and_world) as ((api, world), snapshot):
        yield AcmeCommitted(api, world, snapshot)


def acme_committed_fixtures() -> tuple:
    """What puts a module of transactional tests on ``acme_committed``: its
    ``_django_db_helper`` (every table put back before each test, none flushed after it),
    ``api`` and ``acme``. A module opts in with
    ``_django_db_helper, api, acme = acme_committed_fixtures()``."""

    @pytest.fixture
    def _django_db_helper(acme_committed, django_db_blocker):
        with acme_committed.restored_for_test(django_db_blocker):
            yield

    @pytest.fixture
    def api(acme_committed, db):
        return acme_committed.api_for_test()

    @pytest.fixture
    def acme(acme_committed, db) -> dict:
        return acme_committed.world_for_test()

    return _django_db_helper, api, acme


@pytest.fixture(scope="session")
def production_web(tmp_path_factory):
    """A production gunicorn of the tests' own (tests/hardening/production.py)."""
    from tests.hardening.production import production_web_start

    web = production_web_start(tmp_path_factory.mktemp("production-web"))
    yield web
    web.close()
