"""Approvals that end: a decision shows under "Recently decided" at once, and an expired
suspension is listed there with its failed frame."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from frames.models import Suspension
from tests.browser.conftest import PASSWORD, login

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_decision_and_an_expiry_show_under_recently_decided(
    page, make_user, api, start_session, push_ok, suspend_ok
):
    make_user(username="grace", approver=True, password=PASSWORD)
    session = start_session(title="Refunds")
    root = push_ok(session["id"], 20_000, goal="Handle refund request 4411")
    refund = push_ok(session["id"], 3_000, parent=root["id"], goal="Issue a $900 refund")
    late = push_ok(session["id"], 1_000, parent=root["id"], goal="Send a late apology")
    suspend_ok(refund["id"], reason="Over $500", requires_approval=True)
    suspend_ok(late["id"], reason="Tone check", requires_approval=True, expires_in_seconds=60)
    # The live server runs on threads of its own: the expiry is dated past, not waited for.
    Suspension.objects.filter(frame_id=late["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    login(page, "grace")
    page.goto("/inbox/")
    decided = page.locator("#decided-suspensions")
    expect(decided).to_contain_text("Send a late apology")
    expect(decided).to_contain_text("expired unanswered")
    assert api.get(f"/frames/{late['id']}").json()["failure_reason"] == "suspension_expired"

    page.evaluate("window.contextopsTestMark = 'still here'")
    page.locator(f"#frame-{refund['id']}").get_by_role("button", name="Approve").click()
    expect(page.locator("#decided-suspensions")).to_contain_text("Issue a $900 refund")
    assert page.evaluate("window.contextopsTestMark") == "still here"
