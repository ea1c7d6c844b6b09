"""Export validates against the seed schema; the seed's examples import and round-trip."""

import copy
import hashlib
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from frames.rlm import protocol, snapshots
from frames.rlm.models import RlmState
from frames.rlm.schema import SEED_PATH, seed_document

from .conftest import FIXTURE

EXAMPLES = ["basic_state", "completed_state", "file_reference_state"]


def test_it_ships_the_seed_file_unchanged_with_the_app():
    assert Path(SEED_PATH).read_bytes() == FIXTURE.read_bytes()


def test_the_seeds_own_basic_state_breaks_its_schema_as_the_issue_says(
    seed_document, seed_validator
):
    errors = {
        e.message for e in seed_validator.iter_errors(seed_document["examples"]["basic_state"])
    }
    assert errors == {
        "None is not of type 'object'",
        "'ckpt-init001' does not match '^ckpt-[a-f0-9]{8}$'",
    }


def _meaning(document: dict) -> dict:
    """What a document says, leaving out what export adds or recomputes."""
    variables = {
        name: {
            k: v[k]
            for k in ("name", "value", "type", "description", "source", "created_at")
            if k in v
        }
        for name, v in document["variables"].items()
        if v is not None and v.get("value") is not None
    }
    history = document.get("history") or {}
    return {
        "version": document["version"],
        "state_id": document["state_id"],
        "session_id": document.get("session_id"),
        "tree_id": document.get("tree_id"),
        "variables": variables,
        "mutations": [
            {
                k: m[k]
                for k in (
                    "mutation_id",
                    "operation",
                    "variable_name",
                    "new_value",
                    "source",
                    "timestamp",
                )
                if k in m
            }
            for m in history.get("mutations", [])
        ],
        "checkpoints": [
            (c["name"], c["timestamp"], c.get("description"))
            for c in history.get("checkpoints", [])
        ],
        "completion_status": (document.get("metadata") or {}).get(
            "completion_status", "incomplete"
        ),
    }


@pytest.mark.parametrize("example", EXAMPLES)
def test_it_round_trips_the_seed_examples(
    api, make_api, seed_document, assert_valid_export, example
):
    original = copy.deepcopy(seed_document["examples"][example])
    imported = api.post("/rlm/states/import", original)
    assert imported.status_code == 201, imported.content
    exported = api.get(f"/rlm/states/{original['state_id']}/export")
    assert exported.status_code == 200
    document = assert_valid_export(exported.json())
    assert _meaning(document) == _meaning(original)
    # and the export itself imports again (in another organization) to the same document
    other = make_api(org="Initech", agent="copy")
    assert other.post("/rlm/states/import", document).status_code == 201
    assert other.get(f"/rlm/states/{original['state_id']}/export").json() == document


def test_it_normalizes_the_basic_states_quirks(api, seed_document):
    body = api.post("/rlm/states/import", seed_document["examples"]["basic_state"]).json()
    assert body["Final"] is None and "Final" not in body["variables"]
    assert body["completion_status"] == "incomplete" and body["session_id"] == "sess-12345678"
    [checkpoint] = body["checkpoints"]
    assert checkpoint["original_checkpoint_id"] == "ckpt-init001"
    expected = "ckpt-" + hashlib.sha256(b"ckpt-init001").hexdigest()[:8]
    assert checkpoint["checkpoint_id"] == expected
    assert checkpoint["restorable"] is False
    assert body["variables"]["prompt"]["read_only"] is True
    assert body["mutation_count"] == 3  # the seed counts 3 and lists 2; the larger is kept
    rollback = api.post(f"/rlm/states/{body['state_id']}/rollback", {"checkpoint_id": expected})
    assert rollback.status_code == 409 and rollback.json()["error"] == "checkpoint_not_restorable"
    # writes continue the imported log
    api.put(f"/rlm/states/{body['state_id']}/variables/total_errors", {"value": 3})
    log = api.get(f"/rlm/states/{body['state_id']}/mutations").json()
    assert [m["mutation_id"] for m in log] == ["mut-00000001", "mut-00000002", "mut-00000004"]


def test_it_marks_the_completed_example_complete_with_a_read_only_final(api, seed_document):
    body = api.post("/rlm/states/import", seed_document["examples"]["completed_state"]).json()
    assert (
        body["complete"] is True
        and body["Final"] == "Found 2 TypeScript errors. Both have been fixed."
    )
    assert body["variables"]["Final"]["read_only"] is True


def test_it_refuses_to_import_a_state_id_twice(api, seed_document):
    example = seed_document["examples"]["file_reference_state"]
    assert api.post("/rlm/states/import", example).status_code == 201
    again = api.post("/rlm/states/import", example)
    assert again.status_code == 409 and again.json()["error"] == "state_exists"


def test_it_imports_the_same_id_in_another_organization(api, other_api, seed_document):
    example = seed_document["examples"]["file_reference_state"]
    assert api.post("/rlm/states/import", example).status_code == 201
    assert other_api.post("/rlm/states/import", example).status_code == 201


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d.pop("version"), []),
        (lambda d: d.update(state_id="state-XYZ"), ["state_id"]),
        (
            lambda d: d["variables"]["doc_summary"].update(type="weird"),
            ["variables", "doc_summary", "type"],
        ),
        (
            lambda d: d["variables"]["doc_summary"].update(name="other"),
            ["variables", "doc_summary", "name"],
        ),
        (
            lambda d: d["variables"].update(
                {"bad-name": {"name": "bad-name", "value": 1, "type": "number"}}
            ),
            ["variables", "bad-name", "name"],
        ),
        (
            lambda d: d["variables"]["doc_summary"].update(type="number"),
            ["variables", "doc_summary", "type"],
        ),
        (
            lambda d: d["variables"]["doc_summary"].update(created_at="yesterday"),
            ["variables", "doc_summary", "created_at"],
        ),
        (lambda d: d.update(tree_id=None), ["tree_id"]),
    ],
)
def test_it_refuses_documents_the_schema_refuses(api, seed_document, mutate, where):
    document = copy.deepcopy(seed_document["examples"]["file_reference_state"])
    mutate(document)
    response = api.post("/rlm/states/import", document)
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["error"] == "validation_error"
    assert body["errors"][0]["loc"][: 1 + len(where)] == ["body", *where]


def test_it_refuses_a_document_over_the_variable_limit(api):
    variables = {f"v{i}": {"name": f"v{i}", "value": i, "type": "number"} for i in range(1001)}
    response = api.post(
        "/rlm/states/import",
        {"version": "1.0.0", "state_id": "state-0000beef", "variables": variables},
    )
    assert response.status_code == 409 and response.json()["error"] == "variable_limit_reached"


def test_it_exports_every_kind_of_state_valid_against_the_seed(
    api, new_state, assert_valid_export, make_session
):
    session = make_session()
    state = new_state(
        "Analyze", session_id=str(session.id), execution_config={"model": "m", "temperature": 0.2}
    )
    sid, ckpt = state["state_id"], state["checkpoints"][0]["checkpoint_id"]
    for name, value, extra in [
        ("nothing", None, {}),
        ("flag", True, {}),
        ("score", 0.5, {}),
        ("items", [1, "a", None], {}),
        ("obj", {"k": [1]}, {}),
        ("doc", "file:x.txt", {"type": "file_path"}),
        ("content", "text body", {"type": "file_content", "description": "d"}),
        ("big", "z" * 30_000, {}),
        ("cache", 1, {"scope": "temporary", "ttl_seconds": 600}),
    ]:
        assert (
            api.put(f"/rlm/states/{sid}/variables/{name}", {"value": value, **extra}).status_code
            == 200
        )
    api.delete(f"/rlm/states/{sid}/variables/flag")
    api.post(f"/rlm/states/{sid}/checkpoints", {"name": "mid"})
    api.post(f"/rlm/states/{sid}/rollback", {"checkpoint_id": ckpt})
    api.put(f"/rlm/states/{sid}/variables/Final", {"value": "answer"})
    document = assert_valid_export(api.get(f"/rlm/states/{sid}/export").json())
    assert document["session_id"] == str(session.id)
    assert document["metadata"]["completion_status"] == "complete"
    assert document["metadata"]["execution_config"] == {"model": "m", "temperature": 0.2}
    rollback = [m for m in document["history"]["mutations"] if m["variable_name"] == "*"]
    assert (
        rollback[0]["operation"] == "update"
        and rollback[0]["metadata"]["reason"] == f"rollback to {ckpt}"
    )
    big = [m for m in document["history"]["mutations"] if m["variable_name"] == "big"]
    assert big[0]["new_value"] == "z" * 30_000


def test_it_round_trips_a_null_typed_variable_and_a_rollback_entry(
    api, new_state, assert_valid_export
):
    state = new_state()
    sid, ckpt = state["state_id"], state["checkpoints"][0]["checkpoint_id"]
    api.put(f"/rlm/states/{sid}/variables/nothing", {"value": None})
    api.put(f"/rlm/states/{sid}/variables/big", {"value": "q" * 12_000})
    api.post(f"/rlm/states/{sid}/rollback", {"checkpoint_id": ckpt})
    api.put(f"/rlm/states/{sid}/variables/nothing", {"value": None})
    api.put(f"/rlm/states/{sid}/variables/big", {"value": "q" * 12_000})
    document = assert_valid_export(api.get(f"/rlm/states/{sid}/export").json())
    assert document["variables"]["nothing"]["type"] == "json"
    assert document["variables"]["nothing"]["metadata"]["value_type"] == "null"
    document["state_id"] = "state-0badc0de"
    imported = api.post("/rlm/states/import", document)
    assert imported.status_code == 201, imported.content
    body = imported.json()
    assert body["variables"]["nothing"]["type"] == "null"
    assert (
        body["variables"]["big"]["in_file"] is True
        and body["variables"]["big"]["value"] == "q" * 12_000
    )
    log = api.get("/rlm/states/state-0badc0de/mutations").json()
    assert [m["operation"] for m in log].count("rollback") == 1
    again = assert_valid_export(api.get("/rlm/states/state-0badc0de/export").json())
    assert again["variables"] == document["variables"]
    assert again["history"]["mutations"] == document["history"]["mutations"]


def test_it_accepts_a_yaml_null_type_on_import(api):
    document = {
        "version": "1.0.0",
        "state_id": "state-00c0ffee",
        "variables": {"empty": {"name": "empty", "value": None, "type": None}},
    }
    body = api.post("/rlm/states/import", document).json()
    assert body["variables"]["empty"]["type"] == "null"


def test_the_runtime_copy_is_what_the_app_validates_with():
    assert seed_document()["limits"]["max_variables_per_state"] == 1000


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["variables"]["doc_summary"].update(access_count=10**30),
        lambda d: d["variables"]["doc_summary"].update(source="s" * 201),
        lambda d: d["variables"]["doc_summary"].update(created_at="0001-01-01T00:00:00+05:00"),
        lambda d: d["variables"]["doc_summary"].update(
            metadata={"scope": "temporary", "ttl_seconds": 2**40}
        ),
        lambda d: d["variables"]["doc_summary"].update(metadata={"scope": "temporary"}),
        lambda d: d.update(version="1." + "0" * 40 + ".0"),
        lambda d: d.update(metadata={"mutation_count": 2**40}),
        lambda d: d.update(
            history={
                "mutations": [
                    {
                        "mutation_id": "mut-00000001",
                        "operation": "create",
                        "variable_name": "x",
                        "timestamp": "2026-01-01T00:00:00Z",
                    },
                    {
                        "mutation_id": "mut-00000001",
                        "operation": "create",
                        "variable_name": "y",
                        "timestamp": "2026-01-01T00:00:00Z",
                    },
                ]
            }
        ),
    ],
)
def test_it_refuses_values_no_column_can_hold(api, seed_document, mutate):
    document = copy.deepcopy(seed_document["examples"]["file_reference_state"])
    mutate(document)
    response = api.post("/rlm/states/import", document)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"


@pytest.mark.parametrize("body", [[], "text", 3, {"variables": []}])
def test_it_refuses_bodies_that_are_not_state_documents(api, body):
    response = api.post("/rlm/states/import", body)
    assert response.status_code == 422


def test_it_keeps_checkpoints_restorable_through_an_export_with_snapshots(
    api, make_api, new_state, assert_valid_export
):
    state = new_state()
    sid = state["state_id"]
    api.put(f"/rlm/states/{sid}/variables/big", {"value": "b" * 11_000})
    api.put(f"/rlm/states/{sid}/variables/n", {"value": 1})
    api.get(f"/rlm/states/{sid}/variables/n")
    ckpt = api.post(f"/rlm/states/{sid}/checkpoints", {"name": "mid"}).json()["checkpoint_id"]
    expected = api.get(f"/rlm/states/{sid}").json()["variables"]
    api.put(f"/rlm/states/{sid}/variables/n", {"value": 2})
    api.delete(f"/rlm/states/{sid}/variables/big")
    document = assert_valid_export(
        api.get(f"/rlm/states/{sid}/export", {"snapshots": "true"}).json()
    )
    assert "snapshot" in document["history"]["checkpoints"][1]
    assert (
        "snapshot" not in api.get(f"/rlm/states/{sid}/export").json()["history"]["checkpoints"][1]
    )
    other = make_api(org="Initech", agent="copy")
    assert other.post("/rlm/states/import", document).status_code == 201
    rolled = other.post(f"/rlm/states/{sid}/rollback", {"checkpoint_id": ckpt})
    assert rolled.status_code == 200, rolled.content
    assert rolled.json()["variables"] == expected
    assert rolled.json()["variables"]["big"]["in_file"] is True


def test_it_refuses_a_malformed_checkpoint_snapshot(api):
    document = {
        "version": "1.0.0",
        "state_id": "state-0000cafe",
        "variables": {},
        "history": {
            "checkpoints": [
                {
                    "checkpoint_id": "ckpt-00000001",
                    "name": "x",
                    "timestamp": "2026-01-01T00:00:00Z",
                    "snapshot": {"variables": {"a": {"name": "a", "value": "s", "type": "number"}}},
                }
            ]
        },
    }
    response = api.post("/rlm/states/import", document)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][:5] == [
        "body",
        "history",
        "checkpoints",
        0,
        "snapshot",
    ]


def test_it_keeps_history_folded_out_of_a_full_log_through_export_and_import(
    api, make_api, org, monkeypatch, seed_validator, assert_valid_export
):
    monkeypatch.setattr(snapshots, "MAX_HISTORY_ENTRIES", 20)
    monkeypatch.setattr(snapshots, "MAX_CHECKPOINTS", 4)
    state = protocol.state_initialize(organization=org, prompt="p")
    initial = state.checkpoints.get().checkpoint_id
    protocol.variable_write(state=state, name="big", value="b" * 11_000)
    protocol.variable_delete(state=state, name="big")
    snapshots.state_rollback(state=state, checkpoint_id=initial)
    for i in range(60):
        protocol.variable_write(state=state, name=f"n{i % 7}", value=i)
    state.refresh_from_db()
    folded_in_db = [m for c in state.checkpoints.all() for m in c.folded_mutations]
    assert len(folded_in_db) + state.history_length == state.mutation_total == 64

    path = f"/rlm/states/{state.state_id}/export"
    document = assert_valid_export(api.get(path, {"snapshots": "true"}).json())
    assert api.get(path).json()["history"]["checkpoints"] == [
        {k: v for k, v in c.items() if k != "snapshot"} for c in document["history"]["checkpoints"]
    ]
    mutation_schema = Draft202012Validator(
        {"$defs": seed_validator.schema["$defs"], "$ref": "#/$defs/StateMutation"}
    )
    folded = [m for c in document["history"]["checkpoints"] for m in c.get("folded_mutations", [])]
    assert len(folded) == len(folded_in_db)
    for mutation in folded:
        assert list(mutation_schema.iter_errors(mutation)) == []
    everything = folded + document["history"]["mutations"]
    assert sorted(int(m["mutation_id"][4:], 16) for m in everything) == list(range(1, 65))
    by_id = {m["mutation_id"]: m for m in folded}
    assert by_id["mut-00000002"]["new_value"] == "b" * 11_000  # loaded from its file
    assert by_id["mut-00000003"]["operation"] == "delete"
    assert by_id["mut-00000004"]["variable_name"] == "*"
    assert by_id["mut-00000004"]["metadata"]["reason"] == f"rollback to {initial}"

    other = make_api(org="Initech", agent="copy")
    assert other.post("/rlm/states/import", document).status_code == 201
    assert other.get(path, {"snapshots": "true"}).json() == document
    imported = RlmState.objects.get(organization=other.organization, state_id=state.state_id)
    assert sorted(
        m["mutation_id"] for c in imported.checkpoints.all() for m in c.folded_mutations
    ) == sorted(m["mutation_id"] for m in folded)
    assert {c.kind for c in imported.checkpoints.all() if c.folded_mutations} == {"history_fold"}
    rollback = next(
        m for c in imported.checkpoints.all() for m in c.folded_mutations if m["seq"] == 4
    )
    assert rollback["operation"] == "rollback" and rollback["new_value"]["checkpoint_id"] == initial
    written = other.put(f"/rlm/states/{state.state_id}/variables/after", {"value": 1})
    assert written.status_code == 200, written.content
    log = other.get(f"/rlm/states/{state.state_id}/mutations", {"limit": 500}).json()
    assert log[-1]["mutation_id"] == "mut-00000041"  # continues after every folded id


def test_it_refuses_a_folded_mutation_the_seed_refuses(api):
    document = {
        "version": "1.0.0",
        "state_id": "state-0000d00d",
        "variables": {},
        "history": {
            "checkpoints": [
                {
                    "checkpoint_id": "ckpt-00000001",
                    "name": "history_fold",
                    "timestamp": "2026-01-01T00:00:00Z",
                    "folded_mutations": [
                        {"mutation_id": "mut-00000001", "operation": "create", "variable_name": "x"}
                    ],
                }
            ]
        },
    }
    response = api.post("/rlm/states/import", document)
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"] == [
        "body",
        "history",
        "checkpoints",
        0,
        "folded_mutations",
        0,
    ]
