"""The suspension API: suspend, learn the decision, resume with a single-use token."""

import secrets
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from frames.models import Event, Frame, Suspension
from frames.suspensions import services as suspensions


@pytest.fixture
def approver(make_user):
    return make_user(username="grace", approver=True)


def _decide(token, user, *, reject_note=None):
    suspension = Suspension.objects.get(pk=token)
    if reject_note is None:
        return suspensions.suspension_approve(suspension=suspension, user=user, note="Looks fine")
    return suspensions.suspension_reject(suspension=suspension, user=user, note=reject_note)


def _overdue(token):
    Suspension.objects.filter(pk=token).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_it_suspends_a_frame_and_hands_out_an_opaque_token(api, tree, suspend_ok):
    body = suspend_ok(
        tree["child"]["id"],
        reason="Need the manager's OK",
        requires_approval=True,
        expires_in_seconds=600,
    )
    assert len(body["token"]) >= 43  # 32 random bytes, base64url
    assert body["frame_id"] == tree["child"]["id"]
    assert body["status"] == "pending"
    assert body["requires_approval"] is True
    assert body["reason"] == "Need the manager's OK"
    assert body["approve_url"].endswith(f"/inbox/#frame-{tree['child']['id']}")
    assert body["suspended_at"] and body["expires_at"]
    assert api.get(f"/frames/{tree['child']['id']}").json()["status"] == "suspended"
    event = Event.objects.get(type="frame.suspended")
    assert body["token"] not in str(event.payload)
    assert event.payload["token_hash"] == suspensions.token_hash(body["token"])
    assert event.payload["reason"] == "Need the manager's OK"
    assert event.payload["requires_approval"] is True


def test_it_makes_tokens_unguessable(api, tree, suspend_ok):
    suspend_ok(tree["child"]["id"])
    for _ in range(20):
        assert api.get(f"/suspensions/{secrets.token_urlsafe(32)}").status_code == 404
        assert api.post(f"/suspensions/{secrets.token_urlsafe(32)}/resume").status_code == 404
    assert api.get("/suspensions/" + "x" * 200).status_code == 404
    assert (
        api.get("/suspensions/bad%00token").json()["error"] == "validation_error"
    )  # NUL: refused at the door


def test_it_resumes_without_approval_once(api, tree, suspend_ok, verify_log):
    token = suspend_ok(tree["child"]["id"])["token"]
    response = api.post(f"/suspensions/{token}/resume")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "active"
    assert response.json()["id"] == tree["child"]["id"]
    assert api.get(f"/suspensions/{token}").json()["status"] == "resumed"
    again = api.post(f"/suspensions/{token}/resume")
    assert again.status_code == 409
    assert again.json()["error"] == "token_used"
    verify_log()


def test_it_needs_approval_before_resuming(api, tree, suspend_ok, approver, verify_log):
    token = suspend_ok(tree["child"]["id"], requires_approval=True)["token"]
    refused = api.post(f"/suspensions/{token}/resume")
    assert refused.status_code == 409
    assert refused.json()["error"] == "suspension_not_approved"
    assert api.get(f"/frames/{tree['child']['id']}").json()["status"] == "suspended"
    _decide(token, approver)
    seen = api.get(f"/suspensions/{token}").json()
    assert seen["status"] == "approved"
    assert seen["decided_by"] == "grace"
    assert seen["decision_note"] == "Looks fine"
    resumed = api.post(f"/suspensions/{token}/resume")
    assert resumed.status_code == 200
    assert resumed.json()["status"] == "active"
    approved = Event.objects.get(type="suspension.approved")
    assert approved.actor == "user:grace"
    resumed_event = Event.objects.get(type="frame.resumed")
    assert resumed_event.payload["approved_by"] == "user:grace"
    assert resumed_event.actor == "agent:researcher"
    verify_log()


def test_it_resumes_a_waiting_frame_as_waiting_while_children_are_open(
    api, tree, suspend_ok, verify_log
):
    token = suspend_ok(tree["root"]["id"])["token"]
    assert api.post(f"/suspensions/{token}/resume").json()["status"] == "waiting"
    verify_log()


def test_it_keeps_a_suspended_parent_suspended_when_its_child_pops(
    api, tree, suspend_ok, verify_log
):
    token = suspend_ok(tree["root"]["id"])["token"]
    api.post(f"/frames/{tree['child']['id']}/usage", {"input_tokens": 100, "output_tokens": 50})
    assert (
        api.post(f"/frames/{tree['child']['id']}/pop", {"status": "completed"}).status_code == 200
    )
    root = api.get(f"/frames/{tree['root']['id']}").json()
    assert root["status"] == "suspended"
    assert root["budget"]["used"] == 150
    assert api.post(f"/suspensions/{token}/resume").json()["status"] == "active"
    verify_log()


def test_it_fails_a_rejected_frame_with_the_reason_and_settles_the_budget(
    api, tree, suspend_ok, approver, verify_log
):
    child_id = tree["child"]["id"]
    api.post(f"/frames/{child_id}/usage", {"input_tokens": 300, "output_tokens": 200})
    token = suspend_ok(child_id, requires_approval=True)["token"]
    _decide(token, approver, reject_note="Refunds over $500 need finance")
    seen = api.get(f"/suspensions/{token}").json()
    assert seen["status"] == "rejected"
    assert seen["decision_note"] == "Refunds over $500 need finance"
    child = api.get(f"/frames/{child_id}").json()
    assert child["status"] == "failed"
    root = api.get(f"/frames/{tree['root']['id']}").json()
    assert root["status"] == "active"
    assert root["budget"]["subcall_allocation"] == 0
    assert root["budget"]["used"] == 500
    assert Frame.objects.get(pk=child_id).result_refs == [
        {"rejected": "Refunds over $500 need finance"}
    ]
    refused = api.post(f"/suspensions/{token}/resume")
    assert refused.status_code == 409
    assert refused.json()["error"] == "suspension_not_approved"
    assert Event.objects.get(type="suspension.rejected").actor == "user:grace"
    verify_log()


def test_it_cancels_open_descendants_of_a_rejected_frame(
    api, tree, suspend_ok, push_ok, approver, verify_log
):
    grandchild = push_ok(
        tree["session"]["id"], 500, parent=tree["child"]["id"], goal="Draft the email"
    )
    inner = suspend_ok(grandchild["id"])["token"]
    token = suspend_ok(tree["root"]["id"], requires_approval=True)["token"]
    _decide(token, approver, reject_note="Not now")
    assert api.get(f"/frames/{tree['root']['id']}").json()["status"] == "failed"
    assert api.get(f"/frames/{tree['child']['id']}").json()["status"] == "cancelled"
    assert api.get(f"/frames/{grandchild['id']}").json()["status"] == "cancelled"
    assert api.get(f"/suspensions/{inner}").json()["status"] == "rejected"
    verify_log()


def test_it_answers_410_after_expiry_and_marks_it_expired(api, tree, suspend_ok, verify_log):
    token = suspend_ok(tree["child"]["id"], expires_in_seconds=60)["token"]
    _overdue(token)
    assert api.get(f"/suspensions/{token}").json()["status"] == "expired"
    response = api.post(f"/suspensions/{token}/resume")
    assert response.status_code == 410
    assert response.json()["error"] == "suspension_expired"
    assert Suspension.objects.get(pk=token).status == "expired"
    assert Event.objects.filter(type="suspension.expired").count() == 1
    assert api.post(f"/suspensions/{token}/resume").status_code == 410
    # The issue 19 contract: an expired suspension fails its frame (it used to stay suspended).
    frame = api.get(f"/frames/{tree['child']['id']}").json()
    assert (frame["status"], frame["failure_reason"]) == ("failed", "suspension_expired")
    verify_log()


def test_it_refuses_to_suspend_again_once_expiry_failed_the_frame(api, tree, suspend_ok, suspend):
    # Issue 19 changed this: an expired suspension fails its frame, so there is nothing
    # left to suspend anew (before, the frame stayed suspended and could be).
    first = suspend_ok(tree["child"]["id"])["token"]
    refused = suspend(tree["child"]["id"])
    assert refused.status_code == 409
    assert refused.json()["error"] == "frame_not_active"
    _overdue(first)
    again = suspend(tree["child"]["id"])
    assert again.status_code == 409
    assert again.json() | {"detail": ""} == {
        "error": "frame_not_active",
        "detail": "",
        "status": "failed",
    }
    assert Suspension.objects.get(pk=first).status == "expired"
    assert api.get(f"/frames/{tree['child']['id']}").json()["failure_reason"] == (
        "suspension_expired"
    )


def test_it_refuses_to_suspend_a_closed_frame(api, tree, suspend):
    api.post(f"/frames/{tree['child']['id']}/pop", {"status": "completed"})
    response = suspend(tree["child"]["id"])
    assert response.status_code == 409
    assert response.json()["error"] == "frame_not_active"


def test_it_resolves_several_suspended_frames_of_one_session_independently(
    api, tree, suspend_ok, push_ok, approver, verify_log
):
    sibling = push_ok(
        tree["session"]["id"], 1_000, parent=tree["root"]["id"], goal="Check the stock"
    )
    first = suspend_ok(tree["child"]["id"], requires_approval=True)["token"]
    second = suspend_ok(sibling["id"], requires_approval=True)["token"]
    _decide(second, approver)
    assert api.get(f"/suspensions/{first}").json()["status"] == "pending"
    assert api.post(f"/suspensions/{first}/resume").status_code == 409
    assert api.post(f"/suspensions/{second}/resume").status_code == 200
    _decide(first, approver, reject_note="No")
    assert api.get(f"/frames/{tree['child']['id']}").json()["status"] == "failed"
    assert api.get(f"/frames/{sibling['id']}").json()["status"] == "active"
    assert api.get(f"/frames/{tree['root']['id']}").json()["status"] == "waiting"
    verify_log()


def test_it_hides_suspensions_from_other_organizations(api, other_api, tree, suspend_ok, suspend):
    token = suspend_ok(tree["child"]["id"])["token"]
    assert other_api.get(f"/suspensions/{token}").status_code == 404
    assert other_api.post(f"/suspensions/{token}/resume").status_code == 404
    assert suspend(tree["child"]["id"], client=other_api).status_code == 404
    assert api.get(f"/suspensions/{token}").json()["status"] == "pending"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"reason": ""},
        {"reason": "x" * 5001},
        {"reason": "ok", "expires_in_seconds": 0},
        {"reason": "ok", "expires_in_seconds": 10**9},
        {"reason": "ok", "requires_approval": "maybe"},
        {"reason": "bad\u0000text"},
        {"reason": "   "},
    ],
)
def test_it_refuses_bad_suspend_bodies(api, tree, body):
    response = api.post(f"/frames/{tree['child']['id']}/suspend", body)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert api.get(f"/frames/{tree['child']['id']}").json()["status"] == "active"


def test_it_refuses_a_bad_wait(api, tree, suspend_ok):
    token = suspend_ok(tree["child"]["id"])["token"]
    for wait in ("31", "-1", "soon"):
        response = api.get(f"/suspensions/{token}", {"wait": wait})
        assert response.status_code == 422, wait
        assert response.json()["error"] == "validation_error"


def test_it_long_polls_until_the_wait_runs_out(api, tree, suspend_ok):
    token = suspend_ok(tree["child"]["id"], requires_approval=True)["token"]
    started = time.monotonic()
    response = api.get(f"/suspensions/{token}", {"wait": "1"})
    assert 0.9 <= time.monotonic() - started < 5
    assert response.json()["status"] == "pending"


def test_it_answers_a_decided_long_poll_at_once(api, tree, suspend_ok, approver):
    token = suspend_ok(tree["child"]["id"], requires_approval=True)["token"]
    _decide(token, approver)
    started = time.monotonic()
    assert api.get(f"/suspensions/{token}", {"wait": "30"}).json()["status"] == "approved"
    assert time.monotonic() - started < 2


def test_waits_past_a_keys_cap_or_the_servers_share_answer_429_at_once(
    api, make_api, settings, start_session, push_ok, suspend_ok
):
    """GET /suspensions/{token}?wait=N holds a thread; a key may hold
    CONTEXTOPS_WAITS_PER_KEY of them and all keys together CONTEXTOPS_WAIT_SLOTS, past
    which the wait answers 429 ``too_many_waits`` with Retry-After instead of waiting."""
    from contextops.waits import wait_slots

    settings.CONTEXTOPS_WAITS_PER_KEY = 1
    settings.CONTEXTOPS_WAIT_SLOTS = 2
    frame = push_ok(start_session()["id"], 1000)
    token = suspend_ok(frame["id"], requires_approval=True)["token"]
    colleague = make_api(agent="colleague")
    from contextops.models import ApiKey

    key_id = str(ApiKey.objects.get(prefix=api.key.split("_")[1]).pk)
    with wait_slots.hold(key_id):  # this key's one wait, in flight
        refused = api.get(f"/suspensions/{token}?wait=5")
        assert refused.status_code == 429, refused.content
        assert refused.json()["error"] == "too_many_waits"
        assert refused["Retry-After"] == "2"
        # A look without waiting needs no slot; another key of the organization has its own.
        assert api.get(f"/suspensions/{token}").json()["status"] == "pending"
        assert colleague.get(f"/suspensions/{token}?wait=0.1").status_code == 200
        with wait_slots.hold("another-key"):  # the server's share is now taken
            busy = colleague.get(f"/suspensions/{token}?wait=5")
            assert busy.status_code == 429 and busy.json()["error"] == "too_many_waits"
    # Slots are given back when a wait ends.
    assert api.get(f"/suspensions/{token}?wait=0.1").status_code == 200
