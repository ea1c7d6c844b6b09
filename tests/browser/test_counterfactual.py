"""The counterfactual page in a real browser, on the 2.x Claude Code fixture with its real
automatic compaction: a person moves our trigger and reads the tables."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from contextops.models import Organization
from frames.conversation.importing import transcript_import
from frames.conversation.readers import read_transcript
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
