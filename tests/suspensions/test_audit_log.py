"""The audit log: a person's approval and rejection appear with who, when, from where and
what; admins of the organization read it in the dashboard and can change nothing there."""

from django.test import Client

from contextops.models import AuditEntry
from frames.models import token_hash


def _decide(client: Client, body: dict, action: str, note: str):
    url = f"/inbox/{body['frame_id']}/{token_hash(body['token'])}/{action}/"
    return client.post(url, {"note": note}, HTTP_HX_REQUEST="true", REMOTE_ADDR="192.0.2.80")


def _admin(make_user, org: str = "Acme", username: str = "root") -> Client:
    client = Client()
    client.force_login(make_user(username=username, org=org, admin=True))
    return client


def test_an_approval_appears_in_the_audit_log_with_its_user(tree, suspend_ok, make_user):
    waiting = suspend_ok(tree["child"]["id"], reason="Refund of $900", requires_approval=True)
    grace = make_user(username="grace", approver=True)
    approver = Client()
    approver.force_login(grace)
    assert _decide(approver, waiting, "approve", "Within policy").status_code == 200
    entry = AuditEntry.objects.get(action=AuditEntry.Action.SUSPENSION_APPROVED)
    assert entry.user == grace and entry.actor == "grace"
    assert entry.address == "192.0.2.80" and entry.via.startswith("POST /inbox/")
    assert entry.detail["frame_id"] == tree["child"]["id"]
    assert entry.detail["note"] == "Within policy" and entry.detail["reason"] == "Refund of $900"
    page = _admin(make_user).get("/audit/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "grace" in html and "Approved a suspension" in html and "192.0.2.80" in html
    assert "Within policy" in html


def test_a_rejection_is_audited_too(tree, suspend_ok, approver_client):
    waiting = suspend_ok(tree["child"]["id"], reason="Delete the bucket", requires_approval=True)
    assert _decide(approver_client, waiting, "reject", "Too risky").status_code == 200
    entry = AuditEntry.objects.get(action=AuditEntry.Action.SUSPENSION_REJECTED)
    assert entry.actor == "grace" and entry.detail["note"] == "Too risky"


def test_only_the_organizations_admins_read_it_and_only_their_own(
    tree, suspend_ok, approver_client, member_client, make_user
):
    waiting = suspend_ok(tree["child"]["id"], reason="Refund", requires_approval=True)
    _decide(approver_client, waiting, "approve", "ok")
    assert member_client.get("/audit/").status_code == 403  # a member, not an admin
    assert approver_client.get("/audit/").status_code == 403
    other = _admin(make_user, org="Globex", username="eve").get("/audit/").content.decode()
    assert "<td>grace</td>" not in other and "<td>Approved a suspension</td>" not in other
    assert Client().get("/audit/").status_code == 302  # anonymous: to the login page


def test_nothing_in_the_dashboard_or_the_admin_changes_an_entry(
    tree, suspend_ok, approver_client, make_user
):
    waiting = suspend_ok(tree["child"]["id"], reason="Refund", requires_approval=True)
    _decide(approver_client, waiting, "approve", "ok")
    entry = AuditEntry.objects.get(action=AuditEntry.Action.SUSPENSION_APPROVED)
    admin = _admin(make_user)
    assert admin.post("/audit/", {"action": "delete"}).status_code == 405
    assert admin.get("/admin/contextops/auditentry/").status_code == 200  # readable there
    assert (
        admin.post(f"/admin/contextops/auditentry/{entry.pk}/change/", {"actor": "x"}).status_code
        == 403
    )
    assert (
        admin.post(f"/admin/contextops/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert admin.get("/admin/contextops/auditentry/add/").status_code == 403
    entry.refresh_from_db()
    assert entry.actor == "grace"
