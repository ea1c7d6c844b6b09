"""The lineage page's valid-time timeline in a real Chromium: bars over the time each
version held, a date picked shows the chain as it stood then; a 1,000-version chain pages."""

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.facts.chains import valid_chain

pytestmark = pytest.mark.django_db(transaction=True)


def test_picking_a_date_shows_the_version_that_held_then(logged_in, api):
    page = logged_in
    for key, value, start in (
        ("refund_limit", "20% of the order", "2026-01-01T00:00:00Z"),
        ("refund_limit_v2", "15% of the order", "2026-02-01T00:00:00Z"),
        ("refund_limit_v3", "10% of the order", "2026-03-01T00:00:00Z"),
    ):
        body = {"key": key, "value": value, "source": "policy", "valid_from": start}
        assert api.post("/facts", body).status_code == 201

    page.goto("/facts/refund_limit_v3/lineage/")
    bars = page.locator("#valid-time .valid-bar")
    expect(bars).to_have_count(3)
    expect(page.locator("#valid-time .supersession")).to_have_count(2)
    expect(bars.nth(2)).to_have_class("valid-bar current")
    title = bars.nth(1).locator("title")
    expect(title).to_contain_text("Held from 2026-02-01 00:00 until 2026-03-01 00:00")
    expect(title).to_contain_text("recorded")

    page.get_by_label("The chain as of").fill("2026-02-15")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**at=2026-02-15")
    expect(page.locator("#held-at")).to_contain_text("refund_limit_v2")
    expect(page.locator("#held-at")).to_contain_text("15% of the order")
    # The chain as it stood then: the versions up to the one that held, that one marked.
    expect(bars).to_have_count(2)
    expect(page.locator("#valid-time .valid-bar.picked")).to_have_attribute(
        "data-key", "refund_limit_v2"
    )
    screenshot(page, "lineage-valid-time")

    page.get_by_label("The chain as of").fill("2025-12-01")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("alert")).to_contain_text("No version of this chain held on 2025-12-01")
    assert page.console_errors == []


def test_a_1000_version_chain_pages_its_bars_and_finds_a_date_deep_in_it(logged_in, api):
    page = logged_in
    start = datetime(2020, 1, 1, tzinfo=UTC)
    valid_chain(api.organization, "rate", 1000, start)

    page.goto("/facts/rate_v1/lineage/")
    expect(page.locator("#valid-time .valid-bar")).to_have_count(100)
    picked = (start + timedelta(days=250)).date().isoformat()
    page.get_by_label("The chain as of").fill(picked)
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#held-at")).to_contain_text("rate_v250")
    expect(page.locator("#valid-time .valid-bar.picked")).to_have_attribute("data-key", "rate_v250")
    expect(page.locator("#valid-time .valid-bar")).to_have_count(100)
    page.get_by_role("link", name="Older versions").click()
    expect(page.locator("#valid-time .valid-bar").first).to_have_attribute("data-key", "rate_v51")
    assert page.console_errors == []
