"""The LangGraph thread API: checkpoints, channel blobs, pending writes, deletes, copies, pruning."""

import base64
import json

import pytest

from frames.graphs.models import GraphBlob, GraphCheckpoint, GraphThread
from frames.models import Event, Session


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def blob(text: str, type: str = "json") -> dict:
    return {"type": type, "data": b64(text)}


def put_body(thread_id="t-1", checkpoint_id="0001", ns="", parent=None, **extra) -> dict:
    body = {
        "thread_id": thread_id,
        "checkpoint_ns": ns,
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": parent,
        "checkpoint": blob(f'{{"id": "{checkpoint_id}"}}'),
        "channel_versions": {"messages": 1},
        "blobs": [{"channel": "messages", "version": "1", **blob('["hi"]'), "preview": ["hi"]}],
        "metadata": {"source": "input", "step": -1, "run_id": "run-1"},
    }
    body.update(extra)
    return body


@pytest.fixture
def put(api):
    def put(client=None, **kwargs):
        response = (client or api).post("/langgraph/checkpoints", put_body(**kwargs))
        assert response.status_code == 201, response.content
        return response.json()

    return put


def listed(api, **params):
    response = api.get("/langgraph/checkpoints", params)
    assert response.status_code == 200, response.content
    return response.json()["items"]


def test_it_stores_a_checkpoint_in_a_new_session_and_reads_it_back(api, put):
    saved = put()
    session = Session.objects.get(pk=saved["session_id"])
    assert session.organization == api.organization
    assert session.title == "LangGraph thread t-1"
    [item] = listed(api, thread_id="t-1", checkpoint_ns="")
    assert item["checkpoint_id"] == "0001"
    assert item["parent_checkpoint_id"] is None
    assert base64.b64decode(item["checkpoint"]["data"]) == b'{"id": "0001"}'
    assert item["metadata"] == {"source": "input", "step": -1, "run_id": "run-1"}
    assert [(v["channel"], v["version"]) for v in item["channel_values"]] == [("messages", "1")]
    assert base64.b64decode(item["channel_values"][0]["data"]) == b'["hi"]'
    assert item["pending_writes"] == []
    types = list(Event.objects.filter(session=session).values_list("type", flat=True))
    assert types[-3:] == ["graph.thread_created", "graph.checkpoint_saved", "session.activated"]


def test_a_checkpoint_moves_a_loading_session_to_active_once(api, put, start_session):
    session = start_session()
    assert session["lifecycle_state"] == "loading"
    put(session_id=session["id"])
    put(checkpoint_id="0002", parent="0001", session_id=session["id"])
    stored = Session.objects.get(pk=session["id"])
    assert stored.lifecycle_state == "active"
    assert Event.objects.filter(session=stored, type="session.activated").count() == 1


def test_it_puts_a_thread_in_the_session_given(api, put, start_session):
    session = start_session()
    saved = put(session_id=session["id"])
    assert saved["session_id"] == session["id"]
    put(checkpoint_id="0002", session_id=session["id"])
    assert GraphThread.objects.get().session_id == Session.objects.get().pk


def test_a_checkpoint_holds_unchanged_channels_at_their_earlier_versions(api, put):
    put(
        checkpoint_id="0001",
        channel_versions={"a": 1, "b": 1},
        blobs=[
            {"channel": "a", "version": "1", **blob("a1")},
            {"channel": "b", "version": "1", **blob("b1")},
        ],
    )
    put(
        checkpoint_id="0002",
        parent="0001",
        channel_versions={"a": 2, "b": 1},
        blobs=[{"channel": "a", "version": "2", **blob("a2")}],
    )
    newest, oldest = listed(api, thread_id="t-1")
    values = {v["channel"]: base64.b64decode(v["data"]) for v in newest["channel_values"]}
    assert values == {"a": b"a2", "b": b"b1"}
    assert newest["parent_checkpoint_id"] == "0001"
    values = {v["channel"]: base64.b64decode(v["data"]) for v in oldest["channel_values"]}
    assert values == {"a": b"a1", "b": b"b1"}


def test_list_filters_by_namespace_metadata_before_and_limit(api, put):
    for i, source in enumerate(["input", "loop", "input", "loop"]):
        put(checkpoint_id=f"000{i}", metadata={"source": source, "step": i, "we__ird": i})
    put(checkpoint_id="0009", ns="child:1")
    ids = lambda **p: [i["checkpoint_id"] for i in listed(api, thread_id="t-1", **p)]  # noqa: E731
    assert ids() == ["0009", "0003", "0002", "0001", "0000"]
    assert ids(checkpoint_ns="") == ["0003", "0002", "0001", "0000"]
    assert ids(checkpoint_ns="child:1") == ["0009"]
    assert ids(checkpoint_ns="", metadata=json.dumps({"source": "input"})) == ["0002", "0000"]
    assert ids(metadata=json.dumps({"source": "input", "step": 2})) == ["0002"]
    assert ids(metadata=json.dumps({"we__ird": 1})) == ["0001"]
    assert ids(metadata=json.dumps({"source": "update"})) == []
    assert ids(checkpoint_ns="", before="0002") == ["0001", "0000"]
    assert ids(checkpoint_ns="", before="0003", limit=1) == ["0002"]
    assert ids(checkpoint_ns="", checkpoint_id="0001") == ["0001"]
    assert listed(api, thread_id="nope") == []


def test_a_metadata_filter_that_is_not_a_json_object_is_a_422(api):
    for bad in ("not json", "[1, 2]"):
        response = api.get("/langgraph/checkpoints", {"metadata": bad})
        assert response.status_code == 422
        assert response.json()["error"] == "validation_error"


def test_writes_keep_the_first_regular_write_and_replace_special_ones(api, put):
    put()
    base = {"thread_id": "t-1", "checkpoint_id": "0001", "task_id": "task-a"}
    first = {
        **base,
        "writes": [
            {"idx": 0, "channel": "ch", **blob("one")},
            {"idx": -3, "channel": "__interrupt__", **blob("i1")},
        ],
    }
    again = {
        **base,
        "writes": [
            {"idx": 0, "channel": "ch", **blob("two")},
            {"idx": -3, "channel": "__interrupt__", **blob("i2")},
        ],
    }
    assert api.post("/langgraph/writes", first).json() == {"stored": 2}
    assert api.post("/langgraph/writes", again).json() == {"stored": 1}
    [item] = listed(api, thread_id="t-1")
    writes = {w["channel"]: base64.b64decode(w["data"]) for w in item["pending_writes"]}
    assert writes == {"ch": b"one", "__interrupt__": b"i2"}
    assert {w["task_id"] for w in item["pending_writes"]} == {"task-a"}


def test_writes_sent_before_their_checkpoint_wait_for_it(api, put):
    # LangGraph's async durability sends a step's writes while its checkpoint is on its way.
    put()
    body = {
        "thread_id": "t-1",
        "checkpoint_id": "0002",
        "task_id": "x",
        "writes": [{"idx": 0, "channel": "ch", **blob("v")}],
    }
    assert api.post("/langgraph/writes", body).json() == {"stored": 1}
    assert [i["checkpoint_id"] for i in listed(api, thread_id="t-1")] == ["0001"]
    put(checkpoint_id="0002", parent="0001")
    latest = listed(api, thread_id="t-1")[0]
    assert latest["checkpoint_id"] == "0002"
    assert [w["channel"] for w in latest["pending_writes"]] == ["ch"]
    assert GraphThread.objects.count() == 1


def test_writes_for_a_thread_not_stored_are_not_found_and_create_nothing(api):
    body = {
        "thread_id": "never-checkpointed",
        "checkpoint_id": "0001",
        "task_id": "x",
        "writes": [{"idx": 0, "channel": "ch", **blob("v")}],
    }
    sessions = Session.objects.count()
    response = api.post("/langgraph/writes", body)
    assert response.status_code == 404, response.content
    assert response.json()["error"] == "not_found"
    assert "never-checkpointed" in response.json()["detail"]
    assert not GraphThread.objects.exists()
    assert Session.objects.count() == sessions
    assert api.get("/langgraph/threads/never-checkpointed").status_code == 404


def test_deleting_a_thread_removes_every_namespace_and_leaves_others(api, put):
    put(thread_id="keep")
    put(thread_id="t-1")
    put(thread_id="t-1", ns="child:1", checkpoint_id="0002")
    assert api.delete("/langgraph/threads/t-1").status_code == 204
    assert listed(api, thread_id="t-1") == []
    assert len(listed(api, thread_id="keep")) == 1
    assert api.delete("/langgraph/threads/t-1").status_code == 404  # the saver takes it as done
    assert GraphBlob.objects.filter(thread__thread_id="t-1").count() == 0


def test_runs_are_deleted_in_every_namespace(api, put):
    put(checkpoint_id="0001", metadata={"run_id": "r1"})
    put(checkpoint_id="0002", ns="child:1", metadata={"run_id": "r1"})
    put(checkpoint_id="0003", metadata={"run_id": "r2"})
    response = api.post("/langgraph/runs/delete", {"run_ids": ["r1", "r9"]})
    assert response.json() == {"removed": 2}
    assert [i["checkpoint_id"] for i in listed(api, thread_id="t-1")] == ["0003"]
    assert api.post("/langgraph/runs/delete", {"run_ids": []}).json() == {"removed": 0}


def test_copying_a_thread_copies_checkpoints_blobs_and_writes(api, put):
    put(checkpoint_id="0001")
    put(checkpoint_id="0002", parent="0001", ns="child:1")
    api.post(
        "/langgraph/writes",
        {
            "thread_id": "t-1",
            "checkpoint_id": "0001",
            "task_id": "t",
            "writes": [{"idx": 0, "channel": "c", **blob("w")}],
        },
    )
    response = api.post("/langgraph/threads/t-1/copy", {"target_thread_id": "t-2"})
    assert response.status_code == 201, response.content
    assert response.json()["checkpoints"] == 2
    source, target = listed(api, thread_id="t-1"), listed(api, thread_id="t-2")

    def strip(items):
        return [{k: v for k, v in i.items() if k not in ("thread_id", "created_at")} for i in items]

    assert strip(source) == strip(target)
    assert (
        GraphThread.objects.get(thread_id="t-2").session_id
        == GraphThread.objects.get(thread_id="t-1").session_id
    )


def test_copying_a_missing_thread_is_a_404(api):
    response = api.post("/langgraph/threads/nope/copy", {"target_thread_id": "t-2"})
    assert response.status_code == 404
    assert not GraphThread.objects.exists()


def test_prune_keeps_the_latest_checkpoint_of_each_namespace(api, put):
    put(
        checkpoint_id="0001",
        channel_versions={"a": 1},
        blobs=[{"channel": "a", "version": "1", **blob("a1")}],
    )
    put(
        checkpoint_id="0002",
        channel_versions={"a": 2},
        blobs=[{"channel": "a", "version": "2", **blob("a2")}],
    )
    put(checkpoint_id="0003", ns="child:1")
    put(checkpoint_id="0001", thread_id="other")
    response = api.post("/langgraph/threads/prune", {"thread_ids": ["t-1", "nope"]})
    assert response.json() == {"removed": 1}
    assert sorted(i["checkpoint_id"] for i in listed(api, thread_id="t-1")) == ["0002", "0003"]
    assert not GraphBlob.objects.filter(thread__thread_id="t-1", channel="a", version="1").exists()
    assert len(listed(api, thread_id="other")) == 1
    response = api.post("/langgraph/threads/prune", {"thread_ids": ["t-1"], "strategy": "delete"})
    assert response.json() == {"removed": 2}
    assert listed(api, thread_id="t-1") == []


def test_an_unknown_prune_strategy_is_a_422_naming_the_available_ones(api, put):
    put()
    response = api.post("/langgraph/threads/prune", {"thread_ids": ["t-1"], "strategy": "all"})
    assert response.status_code == 422
    assert response.json()["available"] == ["keep_latest", "delete"]
    assert GraphCheckpoint.objects.count() == 1


@pytest.mark.parametrize(
    "change, field",
    [
        ({"thread_id": "a/b"}, "thread_id"),
        ({"checkpoint": {"type": "json", "data": "***"}}, "checkpoint"),
        ({"surprise": 1}, "surprise"),
        ({"checkpoint": {"type": "json", "data": "", "extra": 1}}, "checkpoint"),
        ({"channel_versions": {"a": [1]}}, "channel_versions"),
    ],
)
def test_bad_checkpoints_are_422s_and_store_nothing(api, change, field):
    response = api.post("/langgraph/checkpoints", {**put_body(), **change})
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert field in json.dumps(response.json()["errors"])
    assert not GraphThread.objects.exists()
    assert not Session.objects.exists()


def test_another_organizations_threads_are_invisible(api, other_api, put, start_session):
    put()
    assert listed(other_api, thread_id="t-1") == []
    assert other_api.get("/langgraph/threads/t-1").status_code == 404
    assert other_api.get("/langgraph/threads").json()["count"] == 0
    body = {
        "thread_id": "t-1",
        "checkpoint_id": "0001",
        "task_id": "x",
        "writes": [{"idx": 0, "channel": "ch", **blob("v")}],
    }
    assert (
        other_api.post("/langgraph/threads/t-1/copy", {"target_thread_id": "mine"}).status_code
        == 404
    )
    assert other_api.delete("/langgraph/threads/t-1").status_code == 404
    assert other_api.post("/langgraph/writes", body).status_code == 404  # no t-1 of its own
    other_api.post("/langgraph/threads/prune", {"thread_ids": ["t-1"], "strategy": "delete"})
    other_api.post("/langgraph/runs/delete", {"run_ids": ["run-1"]})
    [ours] = listed(api, thread_id="t-1")
    assert ours["pending_writes"] == []
    # The same thread id in another organization is a thread of its own.
    put(client=other_api)
    assert GraphThread.objects.filter(thread_id="t-1").count() == 2
    # Another organization's session cannot hold a thread.
    session = start_session()
    response = other_api.post(
        "/langgraph/checkpoints", put_body(thread_id="x", session_id=session["id"])
    )
    assert response.status_code == 404


def test_a_thread_of_an_ended_session_takes_no_more_checkpoints(api, put):
    saved = put()
    assert api.post(f"/sessions/{saved['session_id']}/end").status_code == 200
    response = api.post("/langgraph/checkpoints", put_body(checkpoint_id="0002"))
    assert response.status_code == 409
    assert response.json()["error"] == "session_ended"
    assert GraphCheckpoint.objects.count() == 1


def test_the_thread_list_names_sessions_and_counts(api, put):
    saved = put()
    put(checkpoint_id="0002")
    body = api.get("/langgraph/threads").json()
    assert body["count"] == 1
    [thread] = body["items"]
    assert thread["thread_id"] == "t-1"
    assert thread["session_id"] == saved["session_id"]
    assert thread["checkpoints"] == 2
    assert api.get("/langgraph/threads/t-1").json()["checkpoints"] == 2


def interrupt_write(task_id="task-a", text="Approve the refund?"):
    return {
        "thread_id": "t-1",
        "checkpoint_id": "0001",
        "task_id": task_id,
        "task_path": "('~__pregel_pull', 'approve')",
        "writes": [
            {
                "idx": -3,
                "channel": "__interrupt__",
                **blob("x"),
                "preview": [{"value": text, "id": "i-1"}],
            }
        ],
    }


def test_an_interrupt_suspends_a_frame_of_the_session_for_the_inbox(api, put, approver_client):
    saved = put()
    assert api.post("/langgraph/writes", interrupt_write()).status_code == 200
    api.post("/langgraph/writes", interrupt_write())  # replaced by a retry: still one
    [interrupt] = api.get("/langgraph/threads/t-1/interrupts").json()["items"]
    assert interrupt["node"] == "approve"
    assert interrupt["status"] == "pending"
    assert interrupt["value"] == [{"value": "Approve the refund?", "id": "i-1"}]
    frame = api.get(f"/frames/{interrupt['frame_id']}").json()
    assert frame["session_id"] == saved["session_id"]
    assert frame["status"] == "suspended"
    assert frame["goal"] == "LangGraph approve in thread t-1"
    suspension = api.get(f"/suspensions/{interrupt['token']}").json()
    assert suspension["requires_approval"] is True
    assert suspension["reason"] == "Approve the refund?"
    inbox = approver_client.get("/inbox/").content.decode()
    assert "Approve the refund?" in inbox
    # Another task's interrupt is another frame.
    api.post("/langgraph/writes", interrupt_write(task_id="task-b", text="And this?"))
    assert len(api.get("/langgraph/threads/t-1/interrupts").json()["items"]) == 2


def test_another_organization_sees_no_interrupts(api, other_api, put):
    put()
    api.post("/langgraph/writes", interrupt_write())
    assert other_api.get("/langgraph/threads/t-1/interrupts").status_code == 404


def test_raw_resume_tokens_go_only_to_the_suspending_agent_and_approvers(
    api, make_api, make_user, put
):
    """Another agent's key, or a read-only one, of the same organization sees the token's
    hash: with the raw token it could consume someone else's approved suspension."""
    from contextops.tenancy import api_key_create
    from frames.models import token_hash
    from tests.conftest import ApiClient

    put()
    api.post("/langgraph/writes", interrupt_write())
    [mine] = api.get("/langgraph/threads/t-1/interrupts").json()["items"]
    assert mine["token"] and mine["token_hash"] == token_hash(mine["token"])
    make_user(username="grace", approver=True)
    make_user(username="max")
    _, approver_raw = api_key_create(org_name="Acme", agent_name="grace-key", username="grace")
    _, member_raw = api_key_create(org_name="Acme", agent_name="max-key", username="max")
    _, reader_raw = api_key_create(org_name="Acme", agent_name="dashboard", read_only=True)
    readers = {
        "another agent": make_api(agent="someone-else"),
        "a read-only key": ApiClient(key=reader_raw),
        "a member who may not approve": ApiClient(key=member_raw),
    }
    for who, client in readers.items():
        [seen] = client.get("/langgraph/threads/t-1/interrupts").json()["items"]
        assert seen["token"] is None, who
        assert seen["token_hash"] == mine["token_hash"], who
    [approver_sees] = (
        ApiClient(key=approver_raw).get("/langgraph/threads/t-1/interrupts").json()["items"]
    )
    assert approver_sees["token"] == mine["token"]
