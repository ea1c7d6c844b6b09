"""Approving and rejecting from a terminal: a person's own key decides, an agent's never does."""

from datetime import timedelta

import pytest
from django.utils import timezone

from contextops.models import ApiKey
from contextops.tenancy import api_key_create
from frames.models import Event, Frame, Suspension
from tests.conftest import ApiClient


@pytest.fixture
def personal(db, make_user):
    """Factory: the personal key of a user of ``org`` (an approver unless told otherwise)."""

    def make(username: str = "grace", org: str = "Acme", approver: bool = True) -> ApiClient:
        make_user(username=username, org=org, approver=approver)
        key, raw = api_key_create(org_name=org, agent_name=f"{username}-cli", username=username)
        return ApiClient(key=raw, organization=key.agent.organization, agent=key.agent)

    return make


@pytest.fixture
def pending(tree, suspend_ok):
    """The child frame, suspended and waiting for a person's approval; its token."""
    return suspend_ok(tree["child"]["id"], requires_approval=True)["token"]


def _unchanged(token: str) -> tuple:
    suspension = Suspension.objects.get(pk=token)
    return (
        suspension.status,
        suspension.decided_by_id,
        suspension.frame.status,
        Event.objects.filter(session_id=suspension.session_id).count(),
    )


def test_a_person_approves_with_their_own_key_and_the_agent_resumes(
    api, tree, pending, personal, verify_log
):
    grace = personal()
    response = grace.post(f"/suspensions/{pending}/approve", {"note": "Go ahead"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "approved"
    assert body["decided_by"] == "grace"
    assert body["decision_note"] == "Go ahead"
    assert body["token"] == pending
    assert Event.objects.get(type="suspension.approved").actor == "user:grace"
    resumed = api.post(f"/suspensions/{pending}/resume")
    assert resumed.status_code == 200 and resumed.json()["status"] == "active"
    assert Event.objects.get(type="frame.resumed").payload["approved_by"] == "user:grace"
    verify_log()


def test_a_person_approves_without_a_note(tree, pending, personal):
    response = personal().post(f"/suspensions/{pending}/approve")
    assert response.status_code == 200, response.content
    assert response.json()["decision_note"] == ""


def test_a_person_rejects_with_a_note_and_the_frame_fails(api, tree, pending, personal, verify_log):
    response = personal().post(f"/suspensions/{pending}/reject", {"note": "Needs finance"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "rejected"
    assert response.json()["decision_note"] == "Needs finance"
    frame = api.get(f"/frames/{tree['child']['id']}").json()
    assert frame["status"] == "failed"
    assert frame["failure_reason"] == "rejected by grace: Needs finance"
    assert Frame.objects.get(pk=tree["child"]["id"]).result_refs == [{"rejected": "Needs finance"}]
    assert api.post(f"/suspensions/{pending}/resume").json()["error"] == "suspension_not_approved"
    verify_log()


@pytest.mark.parametrize("body", [{}, {"note": ""}, {"note": "   "}])
def test_rejecting_needs_a_note_and_changes_nothing_without_one(pending, personal, body):
    before = _unchanged(pending)
    response = personal().post(f"/suspensions/{pending}/reject", body)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert response.json()["errors"][0]["loc"] == ["body", "note"]
    assert _unchanged(pending) == before


def test_an_agents_key_may_not_decide(api, pending, make_api):
    before = _unchanged(pending)
    for client in (api, make_api(agent="boss", authority="admin")):
        for verb, body in (("approve", {}), ("reject", {"note": "no"})):
            response = client.post(f"/suspensions/{pending}/{verb}", body)
            assert response.status_code == 403, response.content
            assert response.json()["error"] == "permission_denied"
            assert "create_api_key --user" in response.json()["detail"]
    assert _unchanged(pending) == before


def test_a_personal_key_without_the_approvers_right_may_not_decide(pending, personal):
    before = _unchanged(pending)
    member = personal(username="ada", approver=False)
    for verb, body in (("approve", {}), ("reject", {"note": "no"})):
        response = member.post(f"/suspensions/{pending}/{verb}", body)
        assert response.status_code == 403, response.content
        assert response.json()["error"] == "permission_denied"
        assert "frames.approve_suspension" in response.json()["detail"]
    assert _unchanged(pending) == before


def test_a_personal_key_stops_deciding_when_its_user_loses_the_right(pending, personal):
    grace = personal()
    user = ApiKey.objects.get(user__username="grace").user
    user.is_active = False
    user.save()
    assert grace.post(f"/suspensions/{pending}/approve").status_code == 403
    assert Suspension.objects.get(pk=pending).status == "pending"


def test_a_key_tied_to_a_user_of_another_organization_may_not_decide(pending, personal, api):
    """Keys are issued to members only; one edited by hand to name an outsider is refused."""
    personal(username="eve", org="Globex")
    ApiKey.objects.filter(agent=api.agent).update(
        user=ApiKey.objects.get(user__username="eve").user
    )
    response = api.post(f"/suspensions/{pending}/approve")
    assert response.status_code == 403, response.content
    assert Suspension.objects.get(pk=pending).status == "pending"


def test_another_organizations_approver_finds_nothing(pending, personal):
    before = _unchanged(pending)
    eve = personal(username="eve", org="Globex")
    for verb, body in (("approve", {}), ("reject", {"note": "no"})):
        response = eve.post(f"/suspensions/{pending}/{verb}", body)
        assert response.status_code == 404, response.content
        assert response.json()["error"] == "not_found"
        assert pending not in response.content.decode()
    assert _unchanged(pending) == before


def test_a_decided_suspension_answers_already_decided(pending, personal):
    grace = personal()
    assert grace.post(f"/suspensions/{pending}/approve").status_code == 200
    for verb, body in (("approve", {}), ("reject", {"note": "changed my mind"})):
        response = grace.post(f"/suspensions/{pending}/{verb}", body)
        assert response.status_code == 409, response.content
        assert response.json()["error"] == "already_decided"
    assert Suspension.objects.get(pk=pending).status == "approved"


def test_an_overdue_suspension_answers_410(pending, personal):
    Suspension.objects.filter(pk=pending).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = personal().post(f"/suspensions/{pending}/approve")
    assert response.status_code == 410, response.content
    assert response.json()["error"] == "suspension_expired"
    assert Suspension.objects.get(pk=pending).status == "expired"


def test_an_unknown_token_is_not_found(personal):
    response = personal().post("/suspensions/not-a-token/approve")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_a_note_longer_than_the_inbox_takes_is_refused(pending, personal):
    response = personal().post(f"/suspensions/{pending}/approve", {"note": "x" * 5_001})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "note"]
    assert Suspension.objects.get(pk=pending).status == "pending"
