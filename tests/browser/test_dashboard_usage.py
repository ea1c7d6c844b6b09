"""Cost and the calls trace in a real browser: the Usage page's charts, a session's
calls timeline, a call's page with its anatomy; no console error, no CSP violation."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("prices")]

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


def test_a_person_reads_cost_charts_and_a_calls_anatomy(logged_in, agent):
    page = logged_in
    session = agent.session_create(
        identity=IDENTITY, title="Priced work", model="claude-sonnet-4-5"
    )
    frame = agent.frame_push(session, goal="Answer", budget=5_000_000)
    agent.messages_append(
        session,
        [
            {"role": "user", "content": "What is the refund policy? " + "Details. " * 200},
            {"role": "assistant", "content": "Thirty days."},
        ],
        usage={
            "input_tokens": 1_000_000,
            "output_tokens": 5,
            "started_at": (datetime.now(UTC) - timedelta(days=2)).isoformat(),
            "latency_ms": 900,
        },
        frame=frame.id,
    )

    page.get_by_role("link", name="Usage").click()
    expect(page.get_by_role("heading", name="Usage")).to_be_visible()
    expect(page.locator("#usage-total-cost")).to_have_text("$3.00")
    expect(page.locator("svg.chart rect").first).to_be_visible()
    by_model = page.locator("#usage-by-model")
    expect(by_model).to_be_visible()
    expect(by_model.locator("tbody tr")).to_have_count(1)
    expect(by_model.locator("tbody tr")).to_contain_text("claude-sonnet-4-5")
    expect(by_model.locator("tfoot")).to_contain_text("$3.00")
    expect(page.locator("#usage-by-agent tfoot")).to_contain_text("$3.00")
    expect(page.locator("#usage-range [aria-current=page]")).to_have_text("Last 30 days")
    page.get_by_role("link", name="Last 7 days").click()
    expect(page).to_have_url(re.compile(r"/usage/\?days=7$"))
    expect(page.locator("#usage-range [aria-current=page]")).to_have_text("Last 7 days")
    expect(page.get_by_text("The last 7 days (UTC)")).to_be_visible()
    expect(page.locator("#usage-total-cost")).to_have_text("$3.00")  # sent 2 days ago
    page.get_by_role("link", name="Last 90 days").click()
    expect(page.locator("#usage-range [aria-current=page]")).to_have_text("Last 90 days")
    expect(page.locator("#usage-total-cost")).to_have_text("$3.00")

    page.goto(f"/sessions/{session.id}/")
    calls = page.locator("#session-calls")
    expect(calls).to_contain_text("900 ms")
    expect(calls).to_contain_text("$3.0001")  # 3 + 5 output tokens at $15 per million
    calls.get_by_role("link").first.click()
    expect(page.locator("#call-anatomy")).to_contain_text("System prompt and tools")
    expect(page.locator("#call-anatomy")).to_contain_text("User text")
    request = page.locator("#call-request")
    expect(request.locator("details")).to_have_count(1)  # the long question, collapsed
    expect(page.locator("#call-response")).to_contain_text("Thirty days.")
