"""Scopes through the API: a name a state does not define resolves tree, session, then global."""

from datetime import timedelta

import pytest
from django.utils import timezone

from frames.rlm.models import RlmVariable


@pytest.fixture
def states(api, make_session, make_frame, new_state):
    """Five states of Acme: two in one task tree, one in another tree of the same session,
    one in another session and one in neither; ``{label: state_id}``."""
    session, elsewhere = make_session(), make_session()
    root = make_frame(session, goal="Fix all errors")
    child = make_frame(session, parent=root, goal="Scan")
    other_root = make_frame(session, goal="Write the report")
    made = {
        "leaf": new_state("Scan", frame_id=str(child.id)),
        "root": new_state("Fix", frame_id=str(root.id)),
        "sibling_tree": new_state("Report", frame_id=str(other_root.id)),
        "other_session": new_state("Other", session_id=str(elsewhere.id)),
        "loose": new_state("Loose"),
    }
    assert made["leaf"]["tree_id"] == made["root"]["tree_id"] != made["sibling_tree"]["tree_id"]
    assert made["leaf"]["session_id"] == made["sibling_tree"]["session_id"] == str(session.id)
    return {label: body["state_id"] for label, body in made.items()}


def _write(api, sid, name, value, scope, **extra):
    response = api.put(
        f"/rlm/states/{sid}/variables/{name}", {"value": value, "scope": scope, **extra}
    )
    assert response.status_code == 200, response.content
    return response.json()


def _read(api, sid, name):
    return api.get(f"/rlm/states/{sid}/variables/{name}")


def _readers(api, states, name) -> set[str]:
    return {label for label, sid in states.items() if _read(api, sid, name).status_code == 200}


def test_it_shares_a_tree_variable_with_the_states_of_its_tree_only(api, states):
    _write(api, states["root"], "scan_plan", ["src/"], "tree")
    assert _readers(api, states, "scan_plan") == {"root", "leaf"}
    read = _read(api, states["leaf"], "scan_plan").json()
    assert read["value"] == ["src/"] and read["state_id"] == states["root"]
    assert read["scope"] == "tree"


def test_it_shares_a_session_variable_with_the_states_of_its_session_only(api, states):
    _write(api, states["leaf"], "user_context", {"tz": "Europe/London"}, "session")
    assert _readers(api, states, "user_context") == {"leaf", "root", "sibling_tree"}


def test_session_is_the_default_scope(api, states):
    assert _write(api, states["sibling_tree"], "notes", "n", None)["scope"] == "session"
    assert _readers(api, states, "notes") == {"leaf", "root", "sibling_tree"}


def test_it_shares_a_global_variable_with_the_whole_organization_only(api, other_api, states):
    _write(api, states["loose"], "max_retries", 3, "global")
    assert _readers(api, states, "max_retries") == set(states)
    outsider = other_api.post("/rlm/states", {"prompt": "x"}).json()["state_id"]
    assert _read(other_api, outsider, "max_retries").status_code == 404


def test_it_never_shares_a_temporary_variable(api, states):
    _write(api, states["root"], "cache", 1, "temporary", ttl_seconds=600)
    assert _readers(api, states, "cache") == {"root"}


def test_it_resolves_the_narrowest_scope_first_and_the_states_own_before_all(api, states):
    _write(api, states["loose"], "limit", "global", "global")
    _write(api, states["sibling_tree"], "limit", "session", "session")
    _write(api, states["root"], "limit", "tree", "tree")
    leaf = states["leaf"]
    assert _read(api, leaf, "limit").json()["value"] == "tree"
    api.delete(f"/rlm/states/{states['root']}/variables/limit")
    assert _read(api, leaf, "limit").json()["value"] == "session"
    api.delete(f"/rlm/states/{states['sibling_tree']}/variables/limit")
    assert _read(api, leaf, "limit").json()["value"] == "global"
    _write(api, leaf, "limit", "mine", "temporary", ttl_seconds=600)
    own = _read(api, leaf, "limit").json()
    assert own["value"] == "mine" and own["state_id"] == leaf
    # once its TTL runs out, the state's own temporary no longer hides the shared one
    RlmVariable.objects.filter(state__state_id=leaf, name="limit").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert _read(api, leaf, "limit").json()["value"] == "global"


def test_the_latest_write_wins_within_one_scope(api, states):
    _write(api, states["other_session"], "model", "old", "global")
    _write(api, states["loose"], "model", "new", "global")
    assert _read(api, states["leaf"], "model").json()["value"] == "new"
    _write(api, states["other_session"], "model", "newest", "global")
    assert _read(api, states["leaf"], "model").json()["value"] == "newest"


def test_a_shared_read_counts_on_the_variable_it_found_and_writes_stay_local(api, states):
    root, leaf = states["root"], states["leaf"]
    _write(api, root, "findings", 2, "tree")
    assert _read(api, leaf, "findings").json()["access_count"] == 1
    assert _read(api, root, "findings").json()["access_count"] == 2
    assert "findings" not in api.get(f"/rlm/states/{leaf}").json()["variables"]
    _write(api, leaf, "findings", 5, "tree")  # the leaf's own now shadows the root's
    assert _read(api, leaf, "findings").json()["value"] == 5
    assert _read(api, root, "findings").json()["value"] == 2
    log = api.get(f"/rlm/states/{root}/mutations").json()
    assert [m["variable_name"] for m in log].count("findings") == 1


def test_final_and_prompt_never_resolve_to_another_states(api, states):
    root, leaf = states["root"], states["leaf"]
    final = api.put(f"/rlm/states/{leaf}/variables/Final", {"value": "done", "scope": "global"})
    assert final.status_code == 200 and final.json()["scope"] == "global"
    assert _read(api, root, "Final").status_code == 404
    assert _read(api, root, "prompt").json()["value"] == "Fix"
    assert api.get(f"/rlm/states/{root}/completion").json()["complete"] is False


def test_it_resolves_sessions_and_trees_of_imported_states(api, seed_document):
    basic = seed_document["examples"]["basic_state"]
    assert api.post("/rlm/states/import", basic).status_code == 201
    peer = {
        "version": "1.0.0",
        "state_id": "state-0000feed",
        "session_id": basic["session_id"],
        "variables": {
            "user_context": {
                "name": "user_context",
                "value": "prefers tables",
                "type": "text",
                "metadata": {"scope": "session"},
            },
        },
    }
    assert api.post("/rlm/states/import", peer).status_code == 201
    read = _read(api, basic["state_id"], "user_context").json()
    assert read["value"] == "prefers tables" and read["state_id"] == "state-0000feed"
    assert _read(api, "state-0000feed", "total_errors").json()["value"] == 2
    lone = {"version": "1.0.0", "state_id": "state-0000f00d", "variables": {}}
    assert api.post("/rlm/states/import", lone).status_code == 201
    assert _read(api, "state-0000f00d", "user_context").status_code == 404


def test_it_documents_the_resolution_in_the_openapi_description(api):
    schema = api.client.get("/api/v1/openapi.json").json()
    operation = schema["paths"]["/api/v1/rlm/states/{state_id}/variables/{name}"]["get"]
    description = operation["description"]
    assert "narrowest first" in description and "never shared" in description
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert "state_id" in schema["components"]["schemas"][answer.rsplit("/", 1)[-1]]["properties"]
