"""The approval inbox: listing, htmx Approve / Reject, permissions, CSRF, escaping."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from frames.models import Event, Frame, Suspension, token_hash


def _url(action, body):
    return f"/inbox/{body['frame_id']}/{token_hash(body['token'])}/{action}/"


@pytest.fixture
def waiting(tree, suspend_ok):
    """The child frame suspended until a person approves; the suspend response."""
    return suspend_ok(tree["child"]["id"], reason="Refund of $900", requires_approval=True)


def test_it_lists_pending_suspensions_oldest_first(api, tree, suspend_ok, push_ok, member_client):
    older = suspend_ok(tree["child"]["id"], reason="Older reason", requires_approval=True)
    sibling = push_ok(tree["session"]["id"], 1_000, parent=tree["root"]["id"], goal="Newer goal")
    suspend_ok(sibling["id"], reason="Newer reason", requires_approval=True)
    Suspension.objects.filter(pk=older["token"]).update(
        suspended_at=timezone.now() - timedelta(minutes=5)
    )
    suspend_ok(
        push_ok(tree["session"]["id"], 100, parent=tree["root"]["id"], goal="No approval needed")[
            "id"
        ]
    )
    response = member_client.get("/inbox/")
    assert response.status_code == 200
    page = response.content.decode()
    assert page.index("Older reason") < page.index("Newer reason")
    assert "No approval needed" not in page
    assert "Ask the customer" in page and "Plan the refund" in page  # goal and breadcrumbs
    assert "Context on resume" in page and "tokens used" in page  # the pack preview
    assert "expires in" in page
    assert older["token"] not in page
    assert 'aria-current="page"' in page


def test_it_says_what_to_do_when_nothing_waits(member_client):
    page = member_client.get("/inbox/").content.decode()
    assert "Nothing waits for approval" in page
    assert 'hx-trigger="every 10s"' in page  # the empty list refreshes itself
    fragment = member_client.get("/inbox/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and 'id="pending-suspensions"' in fragment


def _shown(html):
    return re.search(r'hx-get="/inbox/\?shown=(\w+)" hx-trigger="every 10s"', html).group(1)


def test_the_open_inbox_refreshes_only_when_the_pending_list_changes(
    tree, suspend_ok, push_ok, approver_client
):
    suspend_ok(tree["child"]["id"], reason="First reason", requires_approval=True)
    page = approver_client.get("/inbox/").content.decode()
    shown = _shown(page)
    assert "hx-preserve" in page  # a note being typed survives a refresh

    def unchanged_poll(shown):
        with CaptureQueriesContext(connection) as queries:
            response = approver_client.get("/inbox/", {"shown": shown}, HTTP_HX_REQUEST="true")
        assert response.status_code == 204  # nothing to swap, no previews assembled
        return len(queries)

    one_waiting = unchanged_poll(shown)
    for i in range(4):
        sibling = push_ok(tree["session"]["id"], 100, parent=tree["root"]["id"], goal=f"S{i}")
        suspend_ok(sibling["id"], reason=f"Reason {i}", requires_approval=True)
    changed = approver_client.get("/inbox/", {"shown": shown}, HTTP_HX_REQUEST="true")
    assert changed.status_code == 200
    html = changed.content.decode()
    assert "First reason" in html and "Reason 3" in html and "<html" not in html
    assert _shown(html) != shown
    assert unchanged_poll(_shown(html)) == one_waiting


def test_it_shows_the_inbox_read_only_without_the_permission(api, waiting, member_client):
    page = member_client.get("/inbox/").content.decode()
    assert "Refund of $900" in page
    assert ">Approve<" not in page and ">Reject<" not in page
    frame_before = api.get(f"/frames/{waiting['frame_id']}").json()
    events_before = Event.objects.count()
    response = member_client.post(_url("approve", waiting))
    assert response.status_code == 403
    assert member_client.post(_url("reject", waiting), {"note": "no"}).status_code == 403
    # Nothing changed: the suspension, its frame and the event log are as they were.
    assert Suspension.objects.get(pk=waiting["token"]).status == "pending"
    assert api.get(f"/frames/{waiting['frame_id']}").json() == frame_before
    assert Event.objects.count() == events_before
    assert api.get(f"/suspensions/{waiting['token']}").json()["status"] == "pending"


def test_it_approves_with_htmx_and_returns_only_the_row(api, waiting, approver_client):
    page = approver_client.get("/inbox/").content.decode()
    assert ">Approve</button>" in page and ">Reject</button>" in page
    assert f'hx-post="{_url("approve", waiting)}"' in page
    response = approver_client.post(_url("approve", waiting), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    fragment = response.content.decode()
    assert "<html" not in fragment
    assert "approved" in fragment and "grace" in fragment
    assert api.get(f"/suspensions/{waiting['token']}").json()["status"] == "approved"
    assert Event.objects.get(type="suspension.approved").actor == "user:grace"
    refreshed = approver_client.get("/inbox/", HTTP_HX_REQUEST="true").content.decode()
    pending, decided = refreshed.split('id="decided-suspensions"')
    assert "Refund of $900" not in pending
    assert 'hx-swap-oob="true"' in decided and "Refund of $900" in decided
    again = approver_client.post(_url("approve", waiting), HTTP_HX_REQUEST="true")
    assert again.status_code == 409
    assert "already approved" in again.content.decode()


def test_it_approves_and_rejects_with_plain_form_posts(
    api, tree, suspend_ok, push_ok, approver_client, verify_log
):
    first = suspend_ok(tree["child"]["id"], requires_approval=True)
    sibling = push_ok(tree["session"]["id"], 1_000, parent=tree["root"]["id"], goal="Check stock")
    second = suspend_ok(sibling["id"], requires_approval=True)
    response = approver_client.post(_url("approve", first))
    assert response.status_code == 302 and response["Location"] == "/inbox/"
    response = approver_client.post(_url("reject", second), {"note": "Out of policy"})
    assert response.status_code == 302
    assert api.get(f"/suspensions/{first['token']}").json()["status"] == "approved"
    decided = api.get(f"/suspensions/{second['token']}").json()
    assert decided["status"] == "rejected" and decided["decision_note"] == "Out of policy"
    assert Frame.objects.get(pk=sibling["id"]).status == "failed"
    page = approver_client.get("/inbox/").content.decode()
    assert "Recently decided" in page and "Out of policy" in page
    # The failed frame's page says who rejected it and why, beside its status.
    frame_page = approver_client.get(f"/frames/{sibling['id']}/").content.decode()
    status = frame_page[frame_page.index('id="frame-status"') :]
    status = status[: status.index("</p>")]
    assert "failed" in status and "rejected by " in status and ": Out of policy" in status
    verify_log()


def test_it_refuses_a_reject_without_a_note(waiting, approver_client):
    response = approver_client.post(_url("reject", waiting), {"note": "  "}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    fragment = response.content.decode()
    assert "<html" not in fragment and "Say why" in fragment
    plain = approver_client.post(_url("reject", waiting), {})
    assert plain.status_code == 422 and "Say why" in plain.content.decode()
    assert Suspension.objects.get(pk=waiting["token"]).status == "pending"
    assert Frame.objects.get(pk=waiting["frame_id"]).status == "suspended"


def test_it_answers_410_for_an_expired_suspension(waiting, approver_client):
    Suspension.objects.filter(pk=waiting["token"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = approver_client.post(_url("approve", waiting), HTTP_HX_REQUEST="true")
    assert response.status_code == 410
    assert Suspension.objects.get(pk=waiting["token"]).status == "expired"


def test_it_hides_other_organizations_suspensions(other_api, make_user, start_session, push_ok):
    session = start_session(client=other_api)
    frame = push_ok(session["id"], 1_000, client=other_api, goal="Globex secret goal")
    body = other_api.post(
        f"/frames/{frame['id']}/suspend", {"reason": "Globex reason", "requires_approval": True}
    ).json()
    client = Client()
    client.force_login(make_user(username="grace", approver=True))
    assert "Globex" not in client.get("/inbox/").content.decode()
    assert client.post(_url("approve", body)).status_code == 404
    assert client.post(_url("reject", body), {"note": "no"}).status_code == 404
    assert client.post(f"/inbox/{frame['id']}/{'0' * 64}/approve/").status_code == 404
    assert client.post(f"/inbox/{frame['id']}/caf%C3%A9/approve/").status_code == 404
    assert Suspension.objects.get(pk=body["token"]).status == "pending"


def test_it_refuses_a_post_without_csrf_token(waiting, make_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(username="grace", approver=True))
    assert client.post(_url("approve", waiting), HTTP_HX_REQUEST="true").status_code == 403
    assert Suspension.objects.get(pk=waiting["token"]).status == "pending"


def test_it_escapes_html_in_goals_and_reasons(
    api, start_session, push_ok, suspend_ok, approver_client
):
    session = start_session()
    frame = push_ok(session["id"], 5_000, goal="<script>alert('goal')</script>")
    suspend_ok(frame["id"], reason="<img src=x onerror=alert(1)>", requires_approval=True)
    page = approver_client.get("/inbox/").content.decode()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert" in page and "&lt;img src=x" in page


def test_it_shows_the_page_when_the_preview_cannot_be_assembled(
    waiting, member_client, monkeypatch
):
    from frames.suspensions import views as suspension_views

    monkeypatch.setattr(
        suspension_views, "PREVIEW_BUDGET", 10
    )  # below the packer's minimum: a real refusal
    response = member_client.get("/inbox/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Refund of $900" in page and "at least 500 tokens" in page


def test_it_does_not_store_preview_packs(waiting, member_client):
    from frames.models import ContextPackRecord

    member_client.get("/inbox/")
    assert ContextPackRecord.objects.count() == 0


def test_it_requires_a_login(client, waiting):
    assert client.get("/inbox/").status_code == 302
    assert client.post(_url("approve", waiting)).status_code == 302
    assert Suspension.objects.get(pk=waiting["token"]).status == "pending"


def test_the_admin_lists_suspensions_without_their_token(tree, suspend_ok, make_user):
    """The token resumes the frame: the admin shows its hash, and no page of a suspension
    (its address would be the token) opens."""
    from frames.models import token_hash

    suspended = suspend_ok(tree["child"]["id"], requires_approval=True)
    token = suspended["token"]
    client = Client()
    client.force_login(make_user(username="olga", admin=True))
    listed = client.get("/admin/frames/suspension/")
    html = listed.content.decode()
    assert listed.status_code == 200 and "Ask the customer" in html
    assert token not in html and token_hash(token)[:12] in html
    opened = client.get(f"/admin/frames/suspension/{token}/change/")
    assert opened.status_code in (302, 403) and token not in opened.content.decode()
