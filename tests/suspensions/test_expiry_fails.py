"""An approval nobody gave in time ends: the expired suspension fails its frame.

The clock is frozen (the ``clock`` fixture) and moved past the expiry: nothing waits."""

from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from frames.models import Event, Frame, Suspension, token_hash
from frames.projections import projection_diff


def test_a_suspension_read_after_its_expiry_has_a_failed_frame(api, tree, suspend_ok, clock):
    api.post(f"/frames/{tree['child']['id']}/usage", {"input_tokens": 300, "output_tokens": 20})
    token = suspend_ok(tree["child"]["id"], requires_approval=True, expires_in_seconds=1)["token"]
    clock.shift(timedelta(seconds=1))  # exactly at the expiry
    read = api.get(f"/suspensions/{token}")
    assert read.status_code == 200 and read.json()["status"] == "expired"
    frame = api.get(f"/frames/{tree['child']['id']}").json()
    assert frame["status"] == "failed"
    assert frame["failure_reason"] == "suspension_expired"
    assert frame["completed_at"] is not None
    popped = Event.objects.get(type="frame.popped", frame_id=tree["child"]["id"])
    assert popped.payload["failure_reason"] == "suspension_expired"
    # Settled as on any pop: the parent no longer delegates the child's total and
    # carries what the child used.
    root = api.get(f"/frames/{tree['root']['id']}").json()["budget"]
    assert (root["subcall_allocation"], root["used"]) == (0, 320)
    session = Frame.objects.get(pk=tree["root"]["id"]).session
    assert projection_diff(session) == []


def test_the_inbox_applies_an_expiry_and_lists_it_in_its_history(
    approver_client, tree, suspend_ok, clock
):
    token = suspend_ok(tree["child"]["id"], requires_approval=True, expires_in_seconds=1)["token"]
    clock.shift(timedelta(seconds=2))
    page = approver_client.get("/inbox/").content.decode()
    assert Suspension.objects.get(pk=token).status == "expired"
    assert Frame.objects.get(pk=tree["child"]["id"]).status == "failed"
    decided = page[page.index('id="decided-suspensions"') :]
    assert "Ask the customer" in decided and "expired unanswered" in decided
    assert (
        'id="pending-suspensions"' in page
        and "Ask the customer"
        not in page.split('id="decided-suspensions"')[0].split('id="pending-suspensions"')[1]
    )


def test_an_expired_suspension_cancels_the_frames_open_children(
    api, tree, suspend_ok, push_ok, clock
):
    grandchild = push_ok(tree["session"]["id"], 500, parent=tree["child"]["id"], goal="Look up")
    token = suspend_ok(tree["child"]["id"], expires_in_seconds=1)["token"]
    clock.shift(timedelta(seconds=2))
    assert api.get(f"/suspensions/{token}").json()["status"] == "expired"
    assert api.get(f"/frames/{grandchild['id']}").json()["status"] == "cancelled"
    assert api.get(f"/frames/{tree['child']['id']}").json()["status"] == "failed"


@pytest.mark.parametrize("path", ["/suspensions/{token}", "/suspensions/{token}/resume"])
def test_another_organizations_read_expires_nothing(other_api, api, tree, suspend_ok, path, clock):
    token = suspend_ok(tree["child"]["id"], expires_in_seconds=1)["token"]
    clock.shift(timedelta(seconds=2))
    call = other_api.get if path.endswith("}") else other_api.post
    assert call(path.format(token=token)).status_code == 404
    assert Suspension.objects.get(pk=token).status == "pending"
    assert Frame.objects.get(pk=tree["child"]["id"]).status == "suspended"


def test_another_organizations_inbox_expires_nothing_of_ours(tree, suspend_ok, make_user, clock):
    token = suspend_ok(tree["child"]["id"], requires_approval=True, expires_in_seconds=1)["token"]
    clock.shift(timedelta(seconds=2))
    outsider = Client()
    outsider.force_login(make_user(username="globex-grace", org="Globex", approver=True))
    assert outsider.get("/inbox/").status_code == 200
    assert Suspension.objects.get(pk=token).status == "pending"


def test_a_decision_refreshes_recently_decided_out_of_band(approver_client, tree, suspend_ok):
    token = suspend_ok(tree["child"]["id"], requires_approval=True)["token"]
    response = approver_client.post(
        f"/inbox/{tree['child']['id']}/{token_hash(token)}/approve/", HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    oob = html[html.index('id="decided-suspensions"') :]
    assert 'hx-swap-oob="true"' in oob[:120] and "Ask the customer" in oob


def test_a_frame_read_applies_its_suspensions_expiry_at_once(api, tree, suspend_ok):
    """``GET /frames/{id}`` reads the frame failed the moment its suspension is overdue, as
    the suspension's own read does, without waiting for the periodic job (frozen clock)."""
    child = tree["child"]["id"]
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        token = suspend_ok(child, requires_approval=True, expires_in_seconds=60)["token"]
    with time_machine.travel(start + timedelta(seconds=59), tick=False):
        assert api.get(f"/frames/{child}").json()["status"] == "suspended"
    assert Suspension.objects.get(pk=token).status == "pending"
    with time_machine.travel(start + timedelta(seconds=60), tick=False):
        frame = api.get(f"/frames/{child}").json()
    assert (frame["status"], frame["failure_reason"]) == ("failed", "suspension_expired")
    assert Suspension.objects.get(pk=token).status == "expired"
    assert Event.objects.filter(type="suspension.expired", frame_id=child).count() == 1
    # Read again: nothing more happens.
    assert api.get(f"/frames/{child}").json()["status"] == "failed"
    assert Event.objects.filter(type="frame.popped", frame_id=child).count() == 1


def test_the_frame_page_applies_the_expiry_too(approver_client, tree, suspend_ok):
    child = tree["child"]["id"]
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        suspend_ok(child, requires_approval=True, expires_in_seconds=60)
    with time_machine.travel(start + timedelta(seconds=61), tick=False):
        page = approver_client.get(f"/frames/{child}/")
    assert page.status_code == 200
    assert Frame.objects.get(pk=child).status == "failed"
    assert "the suspension expired before anyone answered" in page.content.decode()
