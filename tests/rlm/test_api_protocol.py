"""The seed's agent protocol through the API: initialize, read, write, checkpoint, rollback."""

import re

import pytest

from frames.rlm.models import RlmMutation, RlmVariable


def test_it_initializes_a_state_with_a_read_only_prompt_and_no_final(api, new_state):
    state = new_state("Analyze security risks")
    assert re.fullmatch(r"state-[a-f0-9]{8}", state["state_id"])
    assert state["Final"] is None and "Final" not in state["variables"]
    assert state["prompt"] == "Analyze security risks"
    assert state["variables"]["prompt"]["read_only"] is True
    assert state["completion_status"] == "incomplete" and state["complete"] is False
    [initial] = state["checkpoints"]
    assert re.fullmatch(r"ckpt-[a-f0-9]{8}", initial["checkpoint_id"])
    assert initial["name"] == "initial_state" and initial["restorable"] is True
    mutations = api.get(f"/rlm/states/{state['state_id']}/mutations").json()
    assert [(m["operation"], m["variable_name"], m["mutation_id"]) for m in mutations] == [
        ("create", "prompt", "mut-00000001")
    ]


def test_it_refuses_to_change_or_delete_the_prompt(api, new_state):
    sid = new_state()["state_id"]
    response = api.put(f"/rlm/states/{sid}/variables/prompt", {"value": "other"})
    assert response.status_code == 409
    assert response.json()["error"] == "read_only_variable"
    assert api.delete(f"/rlm/states/{sid}/variables/prompt").json()["error"] == "read_only_variable"


def test_it_writes_logs_and_reads_variables_with_access_counts(api, new_state):
    sid = new_state()["state_id"]
    written = api.put(
        f"/rlm/states/{sid}/variables/total_errors", {"value": 2, "source": "computation"}
    )
    assert written.status_code == 200, written.content
    assert written.json()["type"] == "number" and written.json()["access_count"] == 0
    api.put(
        f"/rlm/states/{sid}/variables/total_errors", {"value": 3, "description": "Errors found"}
    )
    for expected in (1, 2):
        read = api.get(f"/rlm/states/{sid}/variables/total_errors").json()
        assert read["value"] == 3 and read["access_count"] == expected
    log = api.get(f"/rlm/states/{sid}/mutations", {"after": 1}).json()
    assert [(m["mutation_id"], m["operation"], m["old_value"], m["new_value"]) for m in log] == [
        ("mut-00000002", "create", None, 2),
        ("mut-00000003", "update", 2, 3),
    ]
    assert log[0]["source"] == "computation"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("x", "text"),
        (1.5, "number"),
        (True, "boolean"),
        (None, "null"),
        ({"a": 1}, "json"),
        ([1], "array"),
    ],
)
def test_it_infers_the_type_of_a_value(api, new_state, value, expected):
    sid = new_state()["state_id"]
    body = api.put(f"/rlm/states/{sid}/variables/v", {"value": value}).json()
    assert body["type"] == expected and body["value"] == value


def test_it_accepts_explicit_types_and_refuses_a_value_of_the_wrong_type(api, new_state):
    sid = new_state()["state_id"]
    ok = api.put(f"/rlm/states/{sid}/variables/doc", {"value": "file:doc.txt", "type": "file_path"})
    assert ok.json()["type"] == "file_path"
    bad = api.put(f"/rlm/states/{sid}/variables/count", {"value": "three", "type": "number"})
    assert bad.status_code == 422 and bad.json()["error"] == "validation_error"
    unknown = api.put(f"/rlm/states/{sid}/variables/count", {"value": 3, "type": "integer"})
    assert unknown.status_code == 422


def test_it_deletes_a_variable_with_a_logged_mutation(api, new_state):
    sid = new_state()["state_id"]
    api.put(f"/rlm/states/{sid}/variables/tmp", {"value": [1, 2]})
    deleted = api.delete(f"/rlm/states/{sid}/variables/tmp")
    assert deleted.status_code == 200
    assert deleted.json()["operation"] == "delete" and deleted.json()["old_value"] == [1, 2]
    assert api.get(f"/rlm/states/{sid}/variables/tmp").status_code == 404
    assert api.delete(f"/rlm/states/{sid}/variables/tmp").status_code == 404


def test_it_checkpoints_and_rolls_back_exactly_logging_the_rollback(api, new_state):
    sid = new_state()["state_id"]
    api.put(f"/rlm/states/{sid}/variables/a", {"value": 1})
    api.get(f"/rlm/states/{sid}/variables/a")
    created = api.post(
        f"/rlm/states/{sid}/checkpoints", {"name": "before_decomposition", "description": "d"}
    )
    assert created.status_code == 201
    ckpt = created.json()["checkpoint_id"]
    assert re.fullmatch(r"ckpt-[a-f0-9]{8}", ckpt)
    before = api.get(f"/rlm/states/{sid}").json()["variables"]
    api.put(f"/rlm/states/{sid}/variables/a", {"value": 2})
    api.put(f"/rlm/states/{sid}/variables/b", {"value": "new"})
    api.get(f"/rlm/states/{sid}/variables/a")
    rolled = api.post(f"/rlm/states/{sid}/rollback", {"checkpoint_id": ckpt})
    assert rolled.status_code == 200, rolled.content
    assert rolled.json()["variables"] == before
    last = api.get(f"/rlm/states/{sid}/mutations", {"after": 4}).json()[-1]
    assert last["operation"] == "rollback" and last["metadata"]["reason"] == f"rollback to {ckpt}"
    detail = api.get(f"/rlm/states/{sid}/checkpoints/{ckpt}").json()
    assert [v["name"] for v in detail["variables"]] == ["a", "prompt"]


def test_it_answers_404_for_an_unknown_checkpoint(api, new_state):
    sid = new_state()["state_id"]
    response = api.post(f"/rlm/states/{sid}/rollback", {"checkpoint_id": "ckpt-00000000"})
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert api.get(f"/rlm/states/{sid}/checkpoints/nope").status_code == 404


def test_it_stores_large_values_in_files_transparently(api, new_state, org):
    sid = new_state()["state_id"]
    big = "x" * 20_000
    written = api.put(f"/rlm/states/{sid}/variables/large_document", {"value": big})
    assert written.json()["in_file"] is True and written.json()["size_bytes"] == 20_002
    row = RlmVariable.objects.get(state__state_id=sid, name="large_document")
    assert row.value is None and row.file_name.startswith(f"rlm/{org.pk}/{sid}/variables/")
    read = api.get(f"/rlm/states/{sid}/variables/large_document").json()
    assert read["value"] == big and read["access_count"] == 1
    api.put(f"/rlm/states/{sid}/variables/large_document", {"value": "small"})
    mutation = RlmMutation.objects.get(state__state_id=sid, mutation_id="mut-00000003")
    assert mutation.old_file == row.file_name
    log = api.get(f"/rlm/states/{sid}/mutations", {"after": 2}).json()
    assert log[0]["old_value"] == big and log[0]["new_value"] == "small"


def test_it_keeps_a_value_of_exactly_10_kb_inline(api, new_state):
    sid = new_state()["state_id"]
    body = api.put(f"/rlm/states/{sid}/variables/edge", {"value": "y" * 10_238}).json()
    assert body["size_bytes"] == 10_240 and body["in_file"] is False
    body = api.put(f"/rlm/states/{sid}/variables/edge", {"value": "y" * 10_239}).json()
    assert body["size_bytes"] == 10_241 and body["in_file"] is True


def test_it_lists_states_and_filters_them_by_session_and_tree(api, new_state, make_session):
    session = make_session()
    first = new_state(session_id=str(session.id))
    second = new_state(tree_id="tree-87654321")
    listing = api.get("/rlm/states").json()
    assert listing["count"] == 2
    assert [s["state_id"] for s in listing["items"]] == [second["state_id"], first["state_id"]]
    by_session = api.get("/rlm/states", {"session_id": str(session.id)}).json()["items"]
    assert [s["state_id"] for s in by_session] == [first["state_id"]]
    assert by_session[0]["session_id"] == str(session.id)
    by_tree = api.get("/rlm/states", {"tree_id": "tree-87654321"}).json()["items"]
    assert [s["state_id"] for s in by_tree] == [second["state_id"]]


def test_it_reports_completion_through_the_check(api, new_state):
    sid = new_state()["state_id"]
    assert api.get(f"/rlm/states/{sid}/completion").json() == {
        "complete": False,
        "completion_status": "incomplete",
        "final": None,
    }
    api.put(f"/rlm/states/{sid}/variables/Final", {"value": "Done: 2 errors fixed."})
    assert api.get(f"/rlm/states/{sid}/completion").json() == {
        "complete": True,
        "completion_status": "complete",
        "final": "Done: 2 errors fixed.",
    }
    state = api.get(f"/rlm/states/{sid}").json()
    assert state["Final"] == "Done: 2 errors fixed." and state["complete"] is True
    again = api.put(f"/rlm/states/{sid}/variables/Final", {"value": "changed"})
    assert again.status_code == 409 and again.json()["error"] == "read_only_variable"
