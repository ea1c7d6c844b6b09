"""The sessions pages in a real browser: list, tree expansion, frame budget, no CSP errors."""

import re

import pytest
from playwright.sync_api import expect

from frames.demo import demo_build
from tests.browser.conftest import PASSWORD, login, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("prices")]


@pytest.fixture
def demo(live_server):
    return demo_build(password=PASSWORD)


def test_a_person_opens_a_session_expands_the_tree_and_reads_a_budget(page, demo):
    login(page, "demo")
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    page.get_by_role("link", name="Security review of the token-binding RFC").click()
    expect(page.get_by_role("heading", name=re.compile("Security review"))).to_be_visible()
    tree = page.locator("#frame-tree")
    expect(tree.get_by_text("Summarize the RFC's security risks")).to_be_visible()
    expect(page.locator("#pressure-gauge")).to_be_visible()

    # The tree opens at its first level (issue 19): the root's children show at once;
    # deeper levels load on expand.
    read = tree.locator("summary", has_text="Read the RFC section by section")
    expect(read).to_be_visible()
    read.click(position={"x": 8, "y": 12})  # the disclosure triangle: the goal is a link
    expect(tree.get_by_text("Extract risks from “Key rotation”")).to_be_visible()
    screenshot(page, "session")

    tree.get_by_role("link", name="Extract risks from “Key rotation”").click()
    expect(page.get_by_role("heading", name="Extract risks from “Key rotation”")).to_be_visible()
    expect(page.locator("#budget")).to_contain_text("Delegated to children")
    expect(page.locator(".budget-bar").first).to_be_visible()
    screenshot(page, "frame")
    assert page.console_errors == []


def test_searching_sessions_updates_the_list_in_place(page, demo):
    login(page, "demo")
    page.get_by_label("Search").fill("refund")
    expect(page.locator("#session-results")).to_contain_text("Refund request for order 4411")
    expect(page.locator("#session-results")).not_to_contain_text("Security review")
    assert "q=refund" in page.url
    assert page.console_errors == []
