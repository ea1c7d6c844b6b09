"""The counterfactual page in a real browser, on the 2.x Claude Code fixture with its real
automatic compaction: a person moves our trigger and reads the tables."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from contextops.models import Organization
from contextops.tenancy import api_key_create
from frames.conversation.importing.executing import transcript_import
from frames.conversation.readers import read_transcript
from frames.demo import _compacted_session
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.django_db(transaction=True)

SPOTTER = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "transcripts"
    / "claude-code"
    / "spotter"
    / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
)


def test_a_person_compares_the_strategies_where_the_agent_compacted(logged_in, person):
    organization = Organization.objects.get(name="Acme")
    session = transcript_import(
        organization=organization, transcript=read_transcript(SPOTTER)
    ).session
    page = logged_in
    page.goto(f"/sessions/{session.pk}/")
    page.get_by_role("link", name="Counterfactual").click()
    expect(page.get_by_role("heading", name="Counterfactual compaction")).to_be_visible()
    expect(page.get_by_role("heading", name="Compaction before call 73")).to_be_visible()
    table = page.locator(".cf-compaction table")
    expect(table).to_contain_text("the agent (actual)")
    expect(table).to_contain_text("summarize_oldest")
    expect(page.locator(".cf-chart")).to_be_visible()

    page.get_by_label("Our trigger at").fill("0.6")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("#cf-report")).to_contain_text("Trigger at 60%")
    page.wait_for_url(lambda url: "threshold=0.6" in url)
    screenshot(page, "counterfactual")
    assert page.console_errors == []


@pytest.fixture
def demo_session(transactional_db):
    """The demo's compacted session, built in Acme before the page's worker starts: the
    build runs the compaction its trigger queued itself, and a worker would race it for
    the run (the worker starts on an empty queue)."""
    key, _ = api_key_create(org_name="Acme", agent_name="coding-agent", issued_by="test")
    return _compacted_session(key.agent.organization, key.agent)


def test_a_person_reads_the_axes_of_the_demo_sessions_chart(demo_session, logged_in):
    """The demo's compacted session: a 12,000-token window, our trigger at 90 %, one of
    our runs. The chart says what it plots on both axes, with ticks a person can read."""
    session = demo_session
    page = logged_in
    page.goto(f"/sessions/{session.pk}/turns/counterfactual/")
    chart = page.get_by_role("img", name="Window occupancy per call")
    expect(chart).to_be_visible()
    expect(chart).to_have_accessible_description(
        re.compile(r"^Across: model calls 1 to 13\. Up: tokens in the window, 0 to 15,000\.")
    )
    expect(chart.locator(".cf-axis-y .cf-axis-title")).to_have_text("Tokens in the window")
    expect(chart.locator(".cf-axis-x .cf-axis-title")).to_have_text(
        "Model call (numbered as on the call pages)"
    )
    # Tokens from 0 to the first round figure above the window (no curve passes it).
    expect(chart.locator(".cf-axis-y .conv-tick")).to_have_text(["0", "5,000", "10,000", "15,000"])
    # Its 13 calls, numbered from 1 as their pages number them, ticked every 2.
    expect(chart.locator(".cf-axis-x .conv-tick")).to_have_text(["1", "4", "6", "8", "10", "12"])
    expect(chart.locator(".cf-line-label")).to_have_text(
        ["context window: 12,000 tokens", "our trigger, 90%: 10,800 tokens"]
    )
    screenshot(page, "counterfactual-axes")
    assert page.console_errors == []
