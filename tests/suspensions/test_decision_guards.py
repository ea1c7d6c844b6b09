"""A dashboard decision names its suspension by the token's hash: a wrong or stale hash
decides nothing, even when the frame has a suspension waiting."""

from django.test import Client

from frames.models import Suspension, token_hash


def _post(client, frame_id, hashed, action="approve"):
    data = {"note": "no"} if action == "reject" else {}
    return client.post(f"/inbox/{frame_id}/{hashed}/{action}/", data, HTTP_HX_REQUEST="true")


def test_a_wrong_hash_decides_nothing(tree, suspend_ok, make_user):
    waiting = suspend_ok(tree["child"]["id"], reason="Refund", requires_approval=True)
    client = Client()
    client.force_login(make_user(username="ada", approver=True))

    wrong = token_hash(waiting["token"] + "x")
    assert _post(client, waiting["frame_id"], wrong).status_code == 404
    assert _post(client, waiting["frame_id"], wrong, "reject").status_code == 404

    assert Suspension.objects.get(pk=waiting["token"]).status == "pending"


def test_a_stale_hash_does_not_decide_the_newer_suspension(api, tree, suspend_ok, make_user):
    first = suspend_ok(tree["child"]["id"], reason="First ask")
    resumed = api.post(f"/suspensions/{first['token']}/resume")
    assert resumed.status_code == 200, resumed.content
    newer = suspend_ok(tree["child"]["id"], reason="Second ask", requires_approval=True)
    client = Client()
    client.force_login(make_user(username="ada", approver=True))

    stale = _post(client, newer["frame_id"], token_hash(first["token"]))

    assert stale.status_code in (404, 409)
    assert Suspension.objects.get(pk=newer["token"]).status == "pending"
    assert Suspension.objects.get(pk=first["token"]).status == "resumed"
