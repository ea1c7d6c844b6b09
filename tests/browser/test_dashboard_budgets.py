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
