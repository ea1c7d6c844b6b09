"""The pack explains itself: the session's preview and a pack's own page show, for every
item in or out, its rank, its score parts and why."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


def test_the_preview_and_the_pack_page_show_each_items_score_parts(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Vendor review")
    frame = agent.frame_push(session, goal="Review the vendors", budget=50_000)
    agent.handle_add(
        frame, kind="system_prompt", content="You review vendors.", priority="critical"
    )
    planted = agent.handle_add(
        frame, kind="message", content="Okonkwo Freight raised its pallet rate to 41 euros."
    )
    for index in range(80):
        agent.handle_add(
            frame,
            kind="message",
            content=f"Status note {index}: the weekly sync moved, nothing else changed here.",
        )
    pack = agent.context_pack(
        session, frame=frame, budget_tokens=600, query="What is the Okonkwo pallet rate?"
    )
    found = next(s for s in pack["segments"] if s["handle_id"] == planted["id"])
    assert found["score"]["lexical"] == 1.0 and found["reason"] == "ranked"

    page.goto(f"/sessions/{session.id}/")
    preview = page.locator("#context-preview")
    preview.get_by_label("Query").fill("Okonkwo pallet rate")
    # The slider moved to its smallest budget, as a drag ends: one change event.
    preview.locator("#preview-budget").evaluate(
        "e => { e.value = e.min; e.dispatchEvent(new Event('change', {bubbles: true})); }"
    )
    expect(preview.locator("output")).to_have_text("500")
    expect(preview.locator("h3").first).to_have_text("Ranking for “Okonkwo pallet rate”")
    ranking = page.locator("#context-preview table.pack-ranking")
    expect(ranking).to_be_visible()
    row = ranking.locator("tbody tr").filter(has_text="Okonkwo Freight")
    expect(row).to_contain_text("in · full")
    expect(row.locator("td").nth(6)).to_have_text("1.000")  # lexical: the best match
    expect(ranking.locator("thead")).to_contain_text("Semantic")
    expect(ranking.locator("tbody tr").filter(has_text="fitted in no form").first).to_be_visible()

    page.locator("#context-packs summary").first.click()
    page.get_by_role("link", name="Every item, in or out, with its score and why").click()
    expect(page.locator("h1")).to_have_text("Context pack")
    table = page.locator("table.pack-ranking")
    planted_row = table.locator("tbody tr").filter(has_text="Okonkwo Freight")
    expect(planted_row).to_contain_text("ranked; whole")
    out = table.locator("tbody tr.pack-out").first
    expect(out).to_contain_text("out · over_budget")
    expect(page.locator("dl")).to_contain_text("What is the Okonkwo pallet rate?")
    screenshot(page, "context-pack")
