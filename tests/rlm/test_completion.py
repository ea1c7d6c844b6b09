"""Final: completion, the frame popped, the leaf's answer returned up, the tree completed."""

import pytest

from frames.models import Event, Frame
from frames.rlm import protocol
from frames.rlm.models import RlmState
from frames.services.sessions import session_create
from frames.services.stack import frame_push


@pytest.fixture
def session(org):
    return session_create(
        organization=org, identity={"user_name": "Ada", "authority": "employee"}, environment={}
    )


@pytest.fixture
def tree(session):
    root = frame_push(session=session, goal="Fix all errors", budget_total=10_000)
    child = frame_push(session=session, parent=root, goal="Scan", budget_total=3_000)
    return root, child


def test_it_derives_the_tree_id_from_the_root_frame(api, tree):
    root, child = tree
    body = api.post("/rlm/states", {"prompt": "Scan", "frame_id": str(child.id)}).json()
    assert body["tree_id"] == f"tree-{root.id.hex[:8]}"
    assert body["root_frame_id"] == str(root.id) and body["frame_id"] == str(child.id)
    assert body["session_id"] == str(child.session_id)
    mismatch = api.post(
        "/rlm/states", {"prompt": "x", "frame_id": str(child.id), "tree_id": "tree-00000000"}
    )
    assert mismatch.status_code == 422


def test_it_pops_the_frame_and_returns_a_leafs_final_to_the_parent(api, org, tree):
    root, child = tree
    parent_state = protocol.state_initialize(organization=org, prompt="Fix", frame=root)
    child_state = protocol.state_initialize(organization=org, prompt="Scan", frame=child)
    response = api.put(
        f"/rlm/states/{child_state.state_id}/variables/Final",
        {"value": "2 errors found", "source": "task-scan"},
    )
    assert response.status_code == 200, response.content
    child.refresh_from_db()
    assert child.status == Frame.Status.COMPLETED
    assert child.result_refs == [f"rlm:{child_state.state_id}"]
    returned = f"child_{child_state.state_id.removeprefix('state-')}_final"
    value = api.get(f"/rlm/states/{parent_state.state_id}/variables/{returned}").json()
    assert value["value"] == "2 errors found" and value["source"] == child_state.state_id
    child_state.refresh_from_db()
    assert child_state.completion_status == "complete" and child_state.tree_completed_at is None
    types = list(Event.objects.filter(session=child.session).values_list("type", flat=True))
    assert "rlm.completed" in types and "frame.popped" in types


def test_it_refuses_final_while_the_frame_has_open_children(api, org, tree):
    root, _child = tree
    parent_state = protocol.state_initialize(organization=org, prompt="Fix", frame=root)
    response = api.put(f"/rlm/states/{parent_state.state_id}/variables/Final", {"value": "done"})
    assert response.status_code == 409 and response.json()["error"] == "children_incomplete"
    assert not parent_state.variables.filter(name="Final").exists()


def test_it_completes_the_whole_tree_when_the_root_sets_final(api, org, tree):
    root, child = tree
    parent_state = protocol.state_initialize(organization=org, prompt="Fix", frame=root)
    child_state = protocol.state_initialize(organization=org, prompt="Scan", frame=child)
    api.put(f"/rlm/states/{child_state.state_id}/variables/Final", {"value": "scanned"})
    response = api.put(
        f"/rlm/states/{parent_state.state_id}/variables/Final", {"value": "all fixed"}
    )
    assert response.status_code == 200, response.content
    root.refresh_from_db()
    assert root.status == Frame.Status.COMPLETED
    for state in (parent_state, child_state):
        state.refresh_from_db()
        assert state.tree_completed_at is not None
    assert RlmState.objects.get(pk=parent_state.pk).completion_status == "complete"


def test_it_rejects_a_null_final(api, new_state):
    sid = new_state()["state_id"]
    response = api.put(f"/rlm/states/{sid}/variables/Final", {"value": None})
    assert response.status_code == 422


def test_it_completes_a_state_without_a_frame(api, new_state):
    sid = new_state()["state_id"]
    assert (
        api.put(f"/rlm/states/{sid}/variables/Final", {"value": {"answer": 42}}).status_code == 200
    )
    assert api.get(f"/rlm/states/{sid}").json()["completion_status"] == "complete"


def test_rollback_before_final_makes_the_state_incomplete_again(api, new_state):
    state = new_state()
    sid, initial = state["state_id"], state["checkpoints"][0]["checkpoint_id"]
    api.put(f"/rlm/states/{sid}/variables/Final", {"value": "done"})
    body = api.post(f"/rlm/states/{sid}/rollback", {"checkpoint_id": initial}).json()
    assert body["completion_status"] == "incomplete" and body["Final"] is None
