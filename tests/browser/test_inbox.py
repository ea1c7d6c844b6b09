"""The approval inbox in a real Chromium: approve one frame, reject another, the agent sees both."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD, login, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_person_approves_one_frame_and_rejects_another(
    page, make_user, api, start_session, push_ok, suspend_ok
):
    make_user(username="grace", approver=True, password=PASSWORD)
    session = start_session(title="Customer refunds")
    root = push_ok(session["id"], 20_000, goal="Handle refund request 4411")
    refund = push_ok(session["id"], 3_000, parent=root["id"], goal="Issue a $900 refund")
    email = push_ok(session["id"], 1_000, parent=root["id"], goal="Email the customer a coupon")
    api.post(f"/frames/{refund['id']}/usage", {"input_tokens": 800, "output_tokens": 120})
    first = suspend_ok(
        refund["id"], reason="Refunds over $500 need a manager", requires_approval=True
    )
    second = suspend_ok(email["id"], reason="Coupons need marketing's OK", requires_approval=True)

    login(page, "grace")
    page.get_by_role("link", name="Approvals").click()
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
    rows = page.locator("#pending-suspensions .suspension")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("Issue a $900 refund")
    expect(rows.nth(0)).to_contain_text("Context on resume")
    screenshot(page, "inbox-pending")  # "inbox" is the tour's, on the demo data

    rows.nth(0).get_by_role("button", name="Approve").click()
    expect(page.locator(f"#frame-{refund['id']}")).to_contain_text("Approved.")

    coupon = page.locator(f"#frame-{email['id']}")
    coupon.get_by_role("button", name="Reject").click()  # no note: the browser refuses to send it
    expect(coupon.get_by_role("button", name="Reject")).to_be_visible()
    assert api.get(f"/suspensions/{second['token']}").json()["status"] == "pending"
    coupon.get_by_label("Why reject? (required)").fill("No coupons this quarter")
    coupon.get_by_role("button", name="Reject").click()
    expect(page.locator(f"#frame-{email['id']}")).to_contain_text("Rejected.")

    assert api.get(f"/suspensions/{first['token']}", {"wait": "5"}).json()["status"] == "approved"
    assert api.post(f"/suspensions/{first['token']}/resume").json()["status"] == "active"
    seen = api.get(f"/suspensions/{second['token']}").json()
    assert seen["status"] == "rejected" and seen["decision_note"] == "No coupons this quarter"
    assert api.get(f"/frames/{email['id']}").json()["status"] == "failed"

    page.reload()
    expect(page.get_by_text("Nothing waits for approval")).to_be_visible()
    expect(page.get_by_role("heading", name="Recently decided")).to_be_visible()
    screenshot(page, "inbox-decided")
    assert page.console_errors == []


def test_a_member_without_the_permission_sees_the_inbox_read_only(
    page, make_user, start_session, push_ok, suspend_ok
):
    make_user(username="ada", password=PASSWORD)
    session = start_session()
    frame = push_ok(session["id"], 1_000, goal="Delete the staging database")
    suspend_ok(frame["id"], reason="Destructive", requires_approval=True)
    login(page, "ada")
    page.goto("/inbox/")
    expect(page.locator("#pending-suspensions")).to_contain_text("Delete the staging database")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.get_by_role("button", name="Reject")).to_have_count(0)
    assert page.console_errors == []


def test_the_open_inbox_shows_a_new_suspension_and_keeps_a_note_being_typed(
    page, make_user, start_session, push_ok, suspend_ok
):
    make_user(username="grace", approver=True, password=PASSWORD)
    session = start_session(title="Vendor payments")
    root = push_ok(session["id"], 20_000, goal="Pay this month's vendors")
    first = push_ok(session["id"], 2_000, parent=root["id"], goal="Pay the cloud invoice")
    second = push_ok(session["id"], 2_000, parent=root["id"], goal="Pay the new vendor")
    suspend_ok(first["id"], reason="Over the monthly limit", requires_approval=True)
    login(page, "grace")
    page.goto("/inbox/")
    rows = page.locator("#pending-suspensions .suspension")
    expect(rows).to_have_count(1)
    note = page.locator(f"#frame-{first['id']}").get_by_label("Why reject? (required)")
    note.fill("Half typed")
    page.evaluate("window.contextopsTestMark = 'still here'")

    suspend_ok(second["id"], reason="New vendors need a check", requires_approval=True)
    expect(rows).to_have_count(2)  # the list polls (every second here)
    expect(page.locator(f"#frame-{second['id']}")).to_contain_text("New vendors need a check")
    expect(note).to_have_value("Half typed")
    assert page.evaluate("window.contextopsTestMark") == "still here"
    assert page.console_errors == []
