"""A tour of every dashboard page on the demo data, in a real browser: each page opens
without a console error (CSP included) and is captured for the README."""

import pytest
from playwright.sync_api import expect

from frames.demo import demo_build
from frames.models import Session
from tests.browser.conftest import PASSWORD, login, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("prices")]


def test_every_page_of_the_demo_opens_cleanly(page, live_server):
    demo_build(password=PASSWORD)
    session = Session.objects.get(title="Security review of the token-binding RFC")
    login(page, "demo")
    expect(
        page.get_by_role("link", name="Security review of the token-binding RFC")
    ).to_be_visible()
    screenshot(page, "sessions")

    page.goto("/inbox/")
    expect(page.get_by_text("Ask the security lead to approve publishing").first).to_be_visible()
    expect(page.get_by_role("button", name="Approve")).to_be_visible()
    screenshot(page, "inbox")

    page.goto("/facts/")
    expect(page.get_by_text("key_rotation_days_v2").first).to_be_visible()
    screenshot(page, "facts")
    page.goto("/facts/key_rotation_days_v2/lineage/")
    expect(page.locator("svg").first).to_be_visible()
    expect(page.locator("main")).to_contain_text("jwks_overlap_days")
    screenshot(page, "lineage")

    page.goto(f"/sessions/{session.pk}/")
    state_link = page.locator(".rlm-session-states a").first
    expect(state_link).to_contain_text("state-")
    page.goto(state_link.get_attribute("href"))
    expect(page.locator("main")).to_contain_text("complete")
    expect(page.locator("main")).to_contain_text("after-reading")
    screenshot(page, "rlm")

    page.goto(f"/sessions/{session.pk}/turns/")
    expect(page.get_by_text("Draft -07 moved").first).to_be_visible()
    screenshot(page, "turns")

    page.goto(f"/sessions/{session.pk}/calls/")
    expect(page.locator("main")).to_contain_text("claude-sonnet-4-5")
    screenshot(page, "calls")
    page.goto("/usage/")
    expect(page.locator("svg.chart").first).to_be_visible()
    screenshot(page, "usage")
    assert page.console_errors == []
