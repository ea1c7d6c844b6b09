"""Notifications in a real Chromium: an admin adds a webhook (its secret shown once) and a
Slack-compatible destination, an approval is asked for and decided in the inbox, and the
Deliveries page shows each delivery, the retried one with its two attempts."""

import pytest
from django.test import override_settings
from playwright.sync_api import expect

from contextops.notifications import messages
from tests.browser.conftest import PASSWORD, login, screenshot
from tests.notifications.receivers import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


def _add(page, name: str, kind: str, url: str) -> None:
    page.goto("/notifications/")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Kind").select_option(kind)
    page.get_by_label("URL (webhooks; empty for e-mail)").fill(url)
    page.get_by_role("button", name="Add").click()
    expect(page.locator("#created-destination")).to_contain_text(f"{name} added.")


@override_settings(CONTEXTOPS_NOTIFY_RETRY_SECONDS=0)
def test_an_admin_sets_up_destinations_and_sees_every_delivery(
    page, make_user, start_session, push_ok, suspend_ok
):
    make_user(username="root", approver=True, admin=True, password=PASSWORD)
    with Receiver(500) as hook, Receiver() as slack:
        login(page, "root")
        page.get_by_role("link", name="Notifications").click()
        _add(page, "ops hook", "webhook", hook.url)
        secret = page.locator("#destination-secret").inner_text()
        assert secret.startswith("whsec_")
        _add(page, "#approvals", "slack", slack.url)
        expect(page.locator("#destination-secret")).to_have_count(0)  # Slack has none
        expect(page.get_by_text(secret)).to_have_count(0)  # shown once, never again

        session = start_session(title="Refunds")
        frame = push_ok(session["id"], 3_000, goal="Issue a $900 refund")
        suspend_ok(frame["id"], reason="Refunds over $500 need a manager", requires_approval=True)

        page.goto("/inbox/")
        card = page.locator(f"#frame-{frame['id']}")
        card.get_by_role("button", name="Approve").click()
        expect(card).to_contain_text("Approved.")

        page.goto("/notifications/deliveries/")
        delivered = page.locator('#deliveries tr[data-status="delivered"]')
        for _ in range(100):  # the worker delivers on its own threads
            if delivered.count() == 4:
                break
            page.wait_for_timeout(100)
            page.reload()
        expect(delivered).to_have_count(4)
        retried = page.locator("#deliveries tr", has_text="ops hook").filter(
            has_text="approval.pending"
        )
        expect(retried.locator("td").nth(4)).to_have_text("2")  # 500, then 200
        expect(retried.locator("td").nth(5)).to_have_text("200")
        screenshot(page, "notification-deliveries")

        signed = [r for r in hook.received if r.json()["event"] == "approval.decided"][0]
        assert messages.signature_valid(
            secret, signed.headers["X-Contextops-Signature"], signed.body
        )
        assert "Issue a $900 refund" in slack.received[0].json()["text"]

        page.goto("/notifications/")
        page.locator("tr", has_text="#approvals").get_by_role("button", name="Send a test").click()
        expect(page).to_have_url(f"{page.url.split('/notifications')[0]}/notifications/deliveries/")
        expect(page.locator("#deliveries tr", has_text="test").first).to_be_visible()
