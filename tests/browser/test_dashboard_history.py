"""Stepping through a session's events on its page shows the tree as it stood."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


def test_a_person_steps_back_to_before_a_frame_was_pushed(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Replay me")
    root = agent.frame_push(session, goal="Plan the trip", budget=10_000)
    agent.usage_record(root, input_tokens=1_200, output_tokens=34)
    agent.frame_push(session, goal="Book the train", budget=2_000, parent=root)

    page.goto(f"/sessions/{session.id}/")
    history = page.locator("#session-history")
    expect(history.locator("#history-tree")).to_contain_text("Book the train")
    # The push logged two events (frame.pushed, then the parent's frame.updated to waiting).
    page.locator("#history-previous").click()
    expect(history).to_contain_text("frame.pushed")
    page.locator("#history-previous").click()
    expect(history.locator("#history-tree")).not_to_contain_text("Book the train")
    expect(history.locator("#history-tree")).to_contain_text("used 1,234 / 10,000")
    page.locator("#history-previous").click()
    expect(history.locator("#history-tree")).to_contain_text("used 0 / 10,000")
    page.locator("#history-next").click()
    expect(history.locator("#history-tree")).to_contain_text("used 1,234 / 10,000")
