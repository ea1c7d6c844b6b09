"""Budgets that tell the truth: an overspent frame shows by how much, in red."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


def test_an_overspent_frame_shows_its_overrun_in_red(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Overspent work")
    frame = agent.frame_push(session, goal="Summarize the thread", budget=1_000)
    agent.usage_record(frame, input_tokens=5_000, output_tokens=10)
    page.goto(f"/frames/{frame.id}/")
    overrun = page.locator("#budget-overrun")
    expect(overrun).to_have_text("+4,010 over")
    assert overrun.evaluate("e => getComputedStyle(e).color") == "rgb(198, 40, 40)"
    expect(page.locator("#budget")).to_contain_text("used 5,010 / 1,000 total")


def test_the_budget_table_gives_true_shares_beside_its_colour_keys(logged_in, agent, prices):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Overspent work")
    frame = agent.frame_push(session, goal="Format the summary as a table", budget=60_000)
    agent.usage_record(
        frame,
        input_tokens=70_000,
        cache_creation_input_tokens=6_000,
        cache_read_input_tokens=2_000,
        output_tokens=340,
        model="claude-sonnet-4-5",
    )
    page.goto(f"/frames/{frame.id}/")
    rows = page.locator("#budget table.budget-table tr")
    used = rows.filter(has_text="Used")
    # 78,340 of 60,000: the bar is full, the table says how far past it went.
    expect(used).to_contain_text("130.6%")
    assert "overrun" in used.locator("td").nth(1).get_attribute("class")
    expect(rows.filter(has_text="Available")).to_contain_text("0.0%")
    keys = page.locator("#budget .legend-key i")
    expect(keys).to_have_count(4)
    colours = keys.evaluate_all("ks => ks.map(k => getComputedStyle(k).backgroundColor)")
    bar = page.locator("#budget .budget-bar .used").evaluate(
        "e => getComputedStyle(e).backgroundColor"
    )
    assert colours[0] == bar and len(set(colours)) == 4, colours  # one key per part, as in the bar
    # Each row's cells line up: the key's cell is a table cell, not a flex box.
    assert {used.locator("th").evaluate("e => getComputedStyle(e).display")} == {"table-cell"}

    # The side column's calls show their cost inside the card, not behind a scroll.
    call = page.locator("#frame-calls-table tbody tr").first
    expect(call).to_contain_text("78,000 / 340")
    cost, card = call.locator("td").last, page.locator("#frame-calls").locator("xpath=..")
    expect(cost).to_contain_text("$")
    right = cost.evaluate("e => e.getBoundingClientRect().right")
    assert right <= card.evaluate("e => e.getBoundingClientRect().right"), right
