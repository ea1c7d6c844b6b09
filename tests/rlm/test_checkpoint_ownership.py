"""A rollback restores a checkpoint of its own state only."""

from frames.rlm.models import RlmVariable


def test_it_refuses_another_states_checkpoint(api, new_state):
    mine, theirs = new_state("mine")["state_id"], new_state("theirs")["state_id"]
    api.put(f"/rlm/states/{theirs}/variables/secret", {"value": "their value"})
    foreign = api.post(f"/rlm/states/{theirs}/checkpoints", {"name": "theirs"}).json()
    api.put(f"/rlm/states/{mine}/variables/note", {"value": "mine"})

    response = api.post(f"/rlm/states/{mine}/rollback", {"checkpoint_id": foreign["checkpoint_id"]})

    assert (response.status_code, response.json()["error"]) == (404, "not_found")
    names = set(RlmVariable.objects.filter(state__state_id=mine).values_list("name", flat=True))
    assert "note" in names and "secret" not in names
