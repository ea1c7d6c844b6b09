"""Every limit of the seed, bad input, other organizations, temporary variables."""

from datetime import timedelta

import pytest
from django.utils import timezone

from frames.rlm import protocol, snapshots
from frames.rlm.models import RlmCheckpoint, RlmMutation, RlmVariable


def test_it_refuses_the_variable_after_the_thousandth(api, new_state):
    state = new_state()
    sid = state["state_id"]
    from frames.rlm.models import RlmState

    row = RlmState.objects.get(state_id=sid)
    RlmVariable.objects.bulk_create(
        [
            RlmVariable(state=row, name=f"v{i}", type="number", value=i, size_bytes=1)
            for i in range(999)
        ]
    )
    response = api.put(f"/rlm/states/{sid}/variables/one_too_many", {"value": 1})
    assert response.status_code == 409
    assert response.json()["error"] == "variable_limit_reached" and response.json()["limit"] == 1000
    assert (
        api.put(f"/rlm/states/{sid}/variables/v5", {"value": "updates still work"}).status_code
        == 200
    )
    assert api.delete(f"/rlm/states/{sid}/variables/v5").status_code == 200
    assert api.put(f"/rlm/states/{sid}/variables/one_more", {"value": 1}).status_code == 200


@pytest.mark.parametrize("name", ["1abc", "has-dash", "space name", "é", "a" * 129])
def test_it_refuses_bad_variable_names(api, new_state, name):
    sid = new_state()["state_id"]
    response = api.put(f"/rlm/states/{sid}/variables/{name}", {"value": 1})
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"
    assert response.json()["errors"][0]["loc"] == ["path", "name"]


def test_it_accepts_a_name_of_128_characters(api, new_state):
    sid = new_state()["state_id"]
    assert api.put(f"/rlm/states/{sid}/variables/{'a' * 128}", {"value": 1}).status_code == 200


def test_it_refuses_the_hundred_and_first_checkpoint(api, new_state):
    sid = new_state()["state_id"]
    for i in range(99):
        assert api.post(f"/rlm/states/{sid}/checkpoints", {"name": f"c{i}"}).status_code == 201
    response = api.post(f"/rlm/states/{sid}/checkpoints", {"name": "too_many"})
    assert response.status_code == 409
    assert response.json() | {"detail": ""} == {
        "error": "checkpoint_limit_reached",
        "detail": "",
        "limit": 100,
    }


def test_it_folds_the_oldest_history_into_a_checkpoint_when_the_log_is_full(api, new_state):
    from frames.rlm.models import RlmState

    sid = new_state()["state_id"]
    state = RlmState.objects.get(state_id=sid)
    start = state.mutation_total
    RlmMutation.objects.bulk_create(
        [
            RlmMutation(
                state=state,
                seq=start + i,
                mutation_id=f"mut-{start + i:08x}",
                operation="update",
                variable_name="x",
                new_value=i,
            )
            for i in range(1, 10_000)
        ],
        batch_size=2_000,
    )
    RlmState.objects.filter(pk=state.pk).update(mutation_total=start + 9_999, history_length=10_000)
    assert api.put(f"/rlm/states/{sid}/variables/x", {"value": "next"}).status_code == 200
    state.refresh_from_db()
    assert state.history_length == 9_001 and state.mutations.count() == 9_001
    assert state.mutation_total == 10_001
    fold = state.checkpoints.get(kind=RlmCheckpoint.Kind.HISTORY_FOLD)
    assert len(fold.folded_mutations) == 1_000
    assert fold.folded_mutations[0]["mutation_id"] == "mut-00000001"
    assert fold.folded_mutations[-1]["mutation_id"] == "mut-000003e8"
    assert state.mutations.order_by("seq").first().mutation_id == "mut-000003e9"
    detail = api.get(f"/rlm/states/{sid}/checkpoints/{fold.checkpoint_id}").json()
    assert len(detail["folded_mutations"]) == 1_000 and detail["restorable"] is True


def test_it_merges_folds_at_the_checkpoint_limit_and_refuses_when_it_cannot(monkeypatch, org):
    monkeypatch.setattr(snapshots, "MAX_HISTORY_ENTRIES", 10)
    monkeypatch.setattr(snapshots, "MAX_CHECKPOINTS", 3)
    state = protocol.state_initialize(organization=org, prompt="p")
    for i in range(40):
        protocol.variable_write(state=state, name="n", value=i)
    state.refresh_from_db()
    assert state.history_length <= 10 and state.mutation_total == 41
    kinds = list(state.checkpoints.values_list("kind", flat=True))
    assert len(kinds) == 3 and kinds.count("history_fold") == 2
    folded = sum(len(c.folded_mutations) for c in state.checkpoints.filter(kind="history_fold"))
    assert folded + state.history_length == 41  # nothing dropped


def test_it_refuses_a_write_when_the_history_has_nowhere_to_fold(monkeypatch, org):
    monkeypatch.setattr(snapshots, "MAX_HISTORY_ENTRIES", 3)
    monkeypatch.setattr(snapshots, "MAX_CHECKPOINTS", 2)
    state = protocol.state_initialize(organization=org, prompt="p")
    snapshots.checkpoint_create(state=state, name="mine")
    protocol.variable_write(state=state, name="a", value=1)
    protocol.variable_write(state=state, name="a", value=2)
    from contextops.errors import Conflict

    with pytest.raises(Conflict) as caught:
        protocol.variable_write(state=state, name="a", value=3)
    assert caught.value.code == "history_full"


def test_it_answers_404_to_another_organization(api, other_api, new_state):
    state = new_state()
    sid, ckpt = state["state_id"], state["checkpoints"][0]["checkpoint_id"]
    api.put(f"/rlm/states/{sid}/variables/secret", {"value": "x"})
    calls = [
        other_api.get(f"/rlm/states/{sid}"),
        other_api.get(f"/rlm/states/{sid}/export"),
        other_api.get(f"/rlm/states/{sid}/completion"),
        other_api.get(f"/rlm/states/{sid}/variables/secret"),
        other_api.put(f"/rlm/states/{sid}/variables/secret", {"value": "y"}),
        other_api.delete(f"/rlm/states/{sid}/variables/secret"),
        other_api.get(f"/rlm/states/{sid}/mutations"),
        other_api.get(f"/rlm/states/{sid}/checkpoints"),
        other_api.get(f"/rlm/states/{sid}/checkpoints/{ckpt}"),
        other_api.post(f"/rlm/states/{sid}/checkpoints", {"name": "x"}),
        other_api.post(f"/rlm/states/{sid}/rollback", {"checkpoint_id": ckpt}),
    ]
    assert [c.status_code for c in calls] == [404] * len(calls)
    assert {c.json()["error"] for c in calls} == {"not_found"}
    assert other_api.get("/rlm/states").json()["count"] == 0
    assert api.get(f"/rlm/states/{sid}/variables/secret").json()["value"] == "x"


def test_it_refuses_a_session_or_frame_of_another_organization(
    api, other_api, make_session, make_frame
):
    session = make_session()
    frame = make_frame(session)
    assert (
        other_api.post("/rlm/states", {"prompt": "p", "session_id": str(session.id)}).status_code
        == 404
    )
    assert (
        other_api.post("/rlm/states", {"prompt": "p", "frame_id": str(frame.id)}).status_code == 404
    )
    assert api.post("/rlm/states", {"prompt": "p", "session_id": "not-a-uuid"}).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"prompt": ""},
        {"prompt": 3},
        {"prompt": "p", "tree_id": "tree-XYZ"},
        {"prompt": "p", "execution_config": {"temperature": 5}},
        {"prompt": "p", "execution_config": {"execution_mode": "chaotic"}},
    ],
)
def test_it_refuses_bad_state_bodies(api, body):
    response = api.post("/rlm/states", body)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"


def test_it_refuses_bad_variable_bodies_and_unknown_states(api, new_state):
    sid = new_state()["state_id"]
    assert api.put(f"/rlm/states/{sid}/variables/x", {}).status_code == 422
    assert (
        api.put(f"/rlm/states/{sid}/variables/x", {"value": 1, "scope": "galaxy"}).status_code
        == 422
    )
    assert (
        api.put(f"/rlm/states/{sid}/variables/x", {"value": 1, "ttl_seconds": 5}).status_code == 422
    )
    assert (
        api.put(f"/rlm/states/{sid}/variables/x", {"value": 1, "scope": "temporary"}).status_code
        == 422
    )
    assert api.put(f"/rlm/states/{sid}/variables/x", {"value": "a\u0000b"}).status_code == 422
    assert api.post(f"/rlm/states/{sid}/checkpoints", {"name": ""}).status_code == 422
    assert api.post(f"/rlm/states/{sid}/rollback", {}).status_code == 422
    assert api.get("/rlm/states/state-00000000").status_code == 404
    assert api.get("/rlm/states/whatever").status_code == 404
    assert api.get(f"/rlm/states/{sid}/variables/missing").status_code == 404


def test_it_refuses_nan_values(api, new_state):
    sid = new_state()["state_id"]
    response = api.client.put(
        f"/api/v1/rlm/states/{sid}/variables/x",
        data='{"value": NaN}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )
    assert response.status_code == 422


def test_it_makes_a_read_only_variable_refuse_writes(api, new_state):
    sid = new_state()["state_id"]
    api.put(f"/rlm/states/{sid}/variables/config", {"value": {"a": 1}, "read_only": True})
    response = api.put(f"/rlm/states/{sid}/variables/config", {"value": {"a": 2}})
    assert response.status_code == 409 and response.json()["error"] == "read_only_variable"
    assert api.delete(f"/rlm/states/{sid}/variables/config").status_code == 409


def test_it_expires_temporary_variables_and_logs_their_deletion(api, new_state):
    sid = new_state()["state_id"]
    body = api.put(
        f"/rlm/states/{sid}/variables/cache",
        {"value": [1], "scope": "temporary", "ttl_seconds": 60},
    ).json()
    assert body["scope"] == "temporary" and body["expires_at"] is not None
    assert api.get(f"/rlm/states/{sid}/variables/cache").status_code == 200
    RlmVariable.objects.filter(state__state_id=sid, name="cache").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert api.get(f"/rlm/states/{sid}/variables/cache").status_code == 404
    assert "cache" not in api.get(f"/rlm/states/{sid}").json()["variables"]
    api.put(f"/rlm/states/{sid}/variables/other", {"value": 1})
    log = api.get(f"/rlm/states/{sid}/mutations").json()
    assert ("delete", "cache", "ttl_expired") in [
        (m["operation"], m["variable_name"], m["source"]) for m in log
    ]
    assert not RlmVariable.objects.filter(state__state_id=sid, name="cache").exists()


def _values(state) -> dict:
    return dict(state.variables.values_list("name", "value"))


def _checkpoint_folded_over(monkeypatch, org):
    """A state whose log holds 10 entries, with checkpoint ``mine`` at seq 3 (a=1, b=1)
    and a rewritten ten times since: the next logged mutation folds seq 4 away, which
    stores ``mine``'s snapshot (no later pre-image of seq 4 or older is kept)."""
    monkeypatch.setattr(snapshots, "MAX_HISTORY_ENTRIES", 10)
    state = protocol.state_initialize(organization=org, prompt="p")  # seq 1
    protocol.variable_write(state=state, name="a", value=1)  # seq 2
    protocol.variable_write(state=state, name="b", value=1)  # seq 3
    mine = snapshots.checkpoint_create(state=state, name="mine")
    for i in range(2, 12):  # seq 4..13, folding seq 1..3 on the way
        protocol.variable_write(state=state, name="a", value=i)
    state.refresh_from_db()
    assert state.mutation_total == 13 and state.mutations.order_by("seq").first().seq == 4
    mine.refresh_from_db()
    assert mine.snapshot is None  # still a position in the log
    return state, mine


def test_a_write_that_folds_a_checkpoints_history_keeps_the_checkpoint_exact(monkeypatch, org):
    state, mine = _checkpoint_folded_over(monkeypatch, org)
    protocol.variable_write(state=state, name="b", value=99)  # seq 14 folds seq 4
    mine.refresh_from_db()
    assert mine.snapshot is not None
    snapshots.rollback(state=state, checkpoint_id=mine.checkpoint_id)
    assert _values(state) == {"prompt": "p", "a": 1, "b": 1}


def test_a_rollback_that_folds_a_checkpoints_history_keeps_the_checkpoint_exact(monkeypatch, org):
    state, mine = _checkpoint_folded_over(monkeypatch, org)
    initial = state.checkpoints.get(kind=RlmCheckpoint.Kind.INITIAL)
    snapshots.rollback(state=state, checkpoint_id=initial.checkpoint_id)  # seq 14 folds seq 4
    assert _values(state) == {"prompt": "p"}
    snapshots.rollback(state=state, checkpoint_id=mine.checkpoint_id)
    assert _values(state) == {"prompt": "p", "a": 1, "b": 1}


def test_a_history_fold_holds_the_state_at_its_own_position(monkeypatch, org):
    state, _ = _checkpoint_folded_over(monkeypatch, org)
    fold = state.checkpoints.filter(kind=RlmCheckpoint.Kind.HISTORY_FOLD).latest("timestamp")
    # The newest fold happened at seq 13 (a=11), folding seq 3; it stands at seq 12 (a=10).
    assert fold.mutation_seq == 12
    snapshots.rollback(state=state, checkpoint_id=fold.checkpoint_id)
    assert _values(state) == {"prompt": "p", "a": 10, "b": 1}
