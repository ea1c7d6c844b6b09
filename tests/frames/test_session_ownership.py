"""Data a user owns: a whole session exported as one JSON document and deleted with
everything that belongs only to it, from the API and the dashboard, both audited."""

import io

import pytest
from django.core.management import call_command
from django.test import Client

from contextops.models import AuditEntry
from facts.models import Fact
from frames.models import Event, Frame, Session, Usage
from frames.rlm.models import RlmState, RlmVariable
from tests.conftest import ApiClient
from tests.hardening.snapshots import session_rows


@pytest.fixture
def world(api, other_api, start_session, push_ok):
    """Acme's session with a frame, usage, a turn, a session fact, a global fact and an
    RLM state; and Globex's session, which nothing here may touch."""
    session = start_session(title="Refund for order 7")
    frame = push_ok(session["id"], 10_000, goal="Plan the refund")
    sid = session["id"]
    usage = {"input_tokens": 120, "output_tokens": 30, "message_id": "msg_export_1"}
    assert api.post(f"/frames/{frame['id']}/usage", usage).status_code == 200
    messages = [
        {"role": "user", "content": "Refund order 7?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Refunding it."}]},
    ]
    assert api.post(f"/sessions/{sid}/messages", {"messages": messages}).status_code in (200, 201)
    own = {"key": "order_7_state", "value": "refunding", "source": "user"}
    written = api.post("/facts", {**own, "scope": "session", "scope_id": sid})
    assert written.status_code == 201, written.content
    shared = api.post("/facts", {"key": "refund_window", "value": "30 days", "source": "user"})
    assert shared.status_code == 201, shared.content
    state = api.post("/rlm/states", {"prompt": "Refund order 7", "session_id": sid})
    assert state.status_code == 201, state.content
    state_id = state.json()["state_id"]
    put = api.put(f"/rlm/states/{state_id}/variables/plan", {"value": "refund"})
    assert put.status_code in (200, 201), put.content
    theirs = start_session(client=other_api, title="Globex work")
    push_ok(theirs["id"], 500, client=other_api)
    return {"session": session, "frame": frame, "state_id": state_id, "theirs": theirs}


def test_the_export_holds_the_whole_session_in_one_document(api, world):
    sid = world["session"]["id"]
    response = api.get(f"/sessions/{sid}/export")
    assert response.status_code == 200, response.content
    doc = response.json()
    assert doc["format"] == "contextops.session-export" and doc["version"] == 1
    assert doc["session"]["id"] == sid and doc["session"]["title"] == "Refund for order 7"
    assert [f["goal"] for f in doc["frames"]] == ["Plan the refund"]
    assert len(doc["events"]) == Event.objects.filter(session_id=sid).count() > 0
    assert [u["message_id"] for u in doc["usage"]] == ["msg_export_1"]
    assert [t["user_message"] for t in doc["turns"]] == ["Refund order 7?"]
    assert [f["key"] for f in doc["facts"]] == ["order_7_state"]  # not the global fact
    (state,) = doc["rlm_states"]
    assert state["state_id"] == world["state_id"]
    assert "plan" in {v["name"] for v in state["variables"]}
    entry = AuditEntry.objects.get(action=AuditEntry.Action.SESSION_EXPORTED)
    assert entry.actor.startswith("agent:researcher (key ") and entry.target == f"session {sid}"


def test_another_organization_can_neither_export_nor_delete_it(world, other_api):
    sid = world["session"]["id"]
    assert other_api.get(f"/sessions/{sid}/export").status_code == 404
    assert other_api.delete(f"/sessions/{sid}").status_code == 404
    assert Session.objects.filter(pk=sid).exists()
    assert not AuditEntry.objects.filter(action__startswith="session.").exists()


def test_deleting_removes_everything_that_belongs_only_to_the_session(api, world):
    sid = world["session"]["id"]
    before = Frame.objects.filter(session_id=world["theirs"]["id"]).count()
    response = api.delete(f"/sessions/{sid}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["session_id"] == sid and body["deleted"]["frames.Session"] == 1
    assert body["deleted"]["frames.Frame"] == 1 and body["deleted"]["facts.Fact"] == 1
    assert all(rows == [] for rows in session_rows(sid).values())
    assert not RlmState.objects.filter(state_id=world["state_id"]).exists()
    assert not RlmVariable.objects.filter(state__state_id=world["state_id"]).exists()
    assert not Fact.objects.filter(key="order_7_state").exists()
    assert Fact.objects.filter(key="refund_window").exists()  # other sessions read it
    assert not Usage.objects.filter(message_id="msg_export_1").exists()
    assert Frame.objects.filter(session_id=world["theirs"]["id"]).count() == before
    assert api.get(f"/sessions/{sid}").status_code == 404
    assert api.delete(f"/sessions/{sid}").status_code == 404
    entry = AuditEntry.objects.get(action=AuditEntry.Action.SESSION_DELETED)
    assert entry.detail["title"] == "Refund for order 7"
    assert entry.detail["deleted"]["frames.Frame"] == 1
    call_command("rebuild_projections", "--verify", stdout=io.StringIO())


def test_a_read_only_key_exports_but_cannot_delete(world, db):
    out = io.StringIO()
    call_command(
        "create_api_key",
        "--org",
        "Acme",
        "--agent",
        "auditor",
        "--read-only",
        stdout=out,
        stderr=io.StringIO(),
    )
    reader = ApiClient(key=out.getvalue().strip().splitlines()[-1])
    sid = world["session"]["id"]
    assert reader.get(f"/sessions/{sid}/export").status_code == 200
    refused = reader.delete(f"/sessions/{sid}")
    assert refused.status_code == 403 and refused.json()["error"] == "read_only_key"
    assert Session.objects.filter(pk=sid).exists()


def test_the_dashboard_exports_for_members_and_deletes_for_admins(world, make_user, other_api):
    sid = world["session"]["id"]
    member = Client()
    member.force_login(make_user(username="ada"))
    page = member.get(f"/sessions/{sid}/").content.decode()
    assert f"/sessions/{sid}/export/" in page and "Delete session" not in page
    download = member.get(f"/sessions/{sid}/export/")
    assert download.status_code == 200
    assert download["Content-Disposition"] == f'attachment; filename="session-{sid}.json"'
    assert b'"contextops.session-export"' in download.content
    assert member.post(f"/sessions/{sid}/delete/", {"confirm": "on"}).status_code == 403
    assert Session.objects.filter(pk=sid).exists()
    admin = Client(REMOTE_ADDR="192.0.2.61")
    admin.force_login(make_user(username="root", admin=True))
    assert "Delete session" in admin.get(f"/sessions/{sid}/").content.decode()
    gone = admin.post(f"/sessions/{sid}/delete/", {"confirm": "on"})
    assert gone.status_code == 302 and gone["Location"] == f"/?deleted={sid}"
    assert not Session.objects.filter(pk=sid).exists()
    # The list it lands on says what went, read from the deletion's audit entry.
    listed = admin.get(gone["Location"]).content.decode()
    assert "Deleted the session “Refund for order 7” and everything" in listed
    assert "Deleted the session" not in admin.get("/").content.decode()
    entries = AuditEntry.objects.filter(action__startswith="session.").order_by("created_at")
    assert [(e.action, e.actor) for e in entries] == [
        ("session.exported", "ada"),
        ("session.deleted", "root"),
    ]
    assert entries[1].address == "192.0.2.61"
    # The address alone proves nothing: a session of no deletion, or another
    # organization's deleted one, says nothing.
    other = world["theirs"]["id"]
    assert other_api.delete(f"/sessions/{other}").status_code == 200
    for made_up in (other, "00000000-0000-0000-0000-000000000000", "nonsense"):
        assert "Deleted the session" not in admin.get(f"/?deleted={made_up}").content.decode()


def test_the_dashboard_refuses_another_organizations_session(world, make_user):
    sid = world["session"]["id"]
    eve = Client()
    eve.force_login(make_user(username="eve", org="Globex", admin=True))
    assert eve.get(f"/sessions/{sid}/export/").status_code == 404
    assert eve.post(f"/sessions/{sid}/delete/", {"confirm": "on"}).status_code == 404
    assert Session.objects.filter(pk=sid).exists()
