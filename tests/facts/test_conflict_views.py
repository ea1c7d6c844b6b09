"""The dashboard's review queue refuses what a person may not do, and changes nothing then."""

import pytest

from facts.models import Fact, FactConflict


@pytest.fixture
def proposal(api, write):
    write(api, key="meeting_day", value="Tuesday 2pm")
    return write(api, key="sync_meeting", value="Thursday 3pm")["proposed_conflicts"][0]


@pytest.mark.django_db
def test_a_member_without_the_permission_cannot_decide(client, make_user, proposal):
    member = make_user(username="mo")
    client.force_login(member)
    assert client.get("/facts/conflicts/").status_code == 200
    response = client.post(f"/facts/conflicts/{proposal['id']}/accept/")
    assert response.status_code == 403
    assert FactConflict.objects.get().status == "proposed"
    assert Fact.objects.get(key="meeting_day").is_valid


@pytest.mark.django_db
def test_an_unknown_decision_or_proposal_is_a_404_and_a_second_decision_says_why(
    client, make_user, proposal
):
    client.force_login(make_user(username="grace", approver=True))
    assert client.post(f"/facts/conflicts/{proposal['id']}/maybe/").status_code == 404
    assert client.post("/facts/conflicts/999999/reject/").status_code == 404
    assert client.post(f"/facts/conflicts/{proposal['id']}/reject/").status_code == 302
    again = client.post(f"/facts/conflicts/{proposal['id']}/accept/")
    assert again.status_code == 409
    assert "already decided" in again.content.decode()
    assert FactConflict.objects.get().status == "rejected"
    assert Fact.objects.get(key="meeting_day").is_valid
