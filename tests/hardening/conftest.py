"""The hardening suites' shared world: Acme's objects, and jobs recorded instead of sent."""

import pytest

from contextops.notifications.services import destination_create
from frames.graphs.models import GraphThread
from frames.models import token_hash
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from frames.services.usage import usage_record


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


@pytest.fixture(scope="session")
def production_web(tmp_path_factory):
    """A production gunicorn of the tests' own (tests/hardening/production.py)."""
    from tests.hardening.production import production_web_start

    web = production_web_start(tmp_path_factory.mktemp("production-web"))
    yield web
    web.close()
