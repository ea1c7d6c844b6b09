"""The sessions list people keep open: filters, sorting, tokens, cost and refreshing."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("prices")]

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


def test_the_list_filters_by_status_and_shows_tokens_and_cost(logged_in, agent):
    page = logged_in
    done = agent.session_create(
        identity=IDENTITY, title="Finished refund", model="claude-sonnet-4-5"
    )
    frame = agent.frame_push(done, goal="Refund", budget=2_000_000)
    agent.usage_record(frame, input_tokens=1_000_000, output_tokens=0)
    agent.frame_pop(frame)
    agent.session_end(done)
    agent.session_create(identity=IDENTITY, title="Still working")

    page.goto("/")
    results = page.locator("#session-results")
    expect(results).to_contain_text("Still working")
    row = results.locator("tr", has_text="Finished refund")
    expect(row).to_contain_text("1,000,000")
    expect(row).to_contain_text("$3")

    page.get_by_label("Lifecycle").select_option("ended")
    expect(results).not_to_contain_text("Still working")
    expect(results).to_contain_text("Finished refund")
    assert "status=ended" in page.url

    # The open page refreshes itself with its filters: a new ended session shows up.
    later = agent.session_create(identity=IDENTITY, title="Ended later")
    agent.session_end(later)
    expect(results).to_contain_text("Ended later", timeout=15_000)
    expect(results).not_to_contain_text("Still working")


def test_an_admin_deletes_a_session_behind_a_second_step_and_the_list_says_so(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Scratch work")
    agent.session_create(identity=IDENTITY, title="Kept work")
    page.goto(f"/sessions/{session.id}/")
    delete = page.get_by_role("button", name="Delete session")
    expect(delete).to_be_hidden()  # no red button beside Export until asked for
    page.locator(".session-delete summary").click()
    page.get_by_label("Delete this session and everything").check()
    delete.click()
    page.wait_for_url(lambda url: "/sessions/" not in url)  # back on the list
    expect(page.get_by_role("status")).to_contain_text("Deleted the session “Scratch work”")
    results = page.locator("#session-results")
    expect(results).to_contain_text("Kept work")
    expect(results).not_to_contain_text("Scratch work")
