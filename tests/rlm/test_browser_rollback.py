"""A real Chromium rolls a state back from its page: htmx POST, CSRF header, hx-confirm dialog."""

import pytest

from frames.rlm import protocol, snapshots

# Importing the browser tests' conftest also sets DJANGO_ALLOW_ASYNC_UNSAFE, as they need.
from tests.browser.conftest import PASSWORD, chromium_launch, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


@pytest.fixture(scope="module")
def chromium():
    """Started before any database connection of the test, with the browser tests' launch settings."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = chromium_launch(playwright)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, live_server):
    context = chromium.new_context(
        base_url=live_server.url, viewport={"width": 1366, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.console_errors = errors
    yield page
    context.close()


@pytest.mark.django_db(transaction=True)
def test_it_rolls_back_from_the_timeline_after_confirmation(page, make_user, org):
    make_user(username="rollo", admin=True, password=PASSWORD)
    state = protocol.state_initialize(organization=org, prompt="Find all TypeScript errors")
    protocol.variable_write(state=state, name="risk_count", value=3)
    checkpoint = snapshots.checkpoint_create(state=state, name="after_scan")
    protocol.variable_write(state=state, name="risk_count", value=7)
    protocol.variable_write(state=state, name="scratch", value={"tmp": True})

    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("rollo")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto(f"/rlm/{state.state_id}/")
    assert page.locator(".rlm-variables").get_by_text("scratch").count() == 1

    dialogs: list[str] = []

    def accept(dialog):
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    item = page.locator(".rlm-checkpoint", has_text="after_scan")
    item.get_by_role("button", name="Rollback").click()
    page.get_by_text(f"Rolled back to {checkpoint.checkpoint_id}.").wait_for()
    assert dialogs and "after_scan" in dialogs[0]
    assert page.locator(".rlm-variables").get_by_text("scratch").count() == 0
    assert not state.variables.filter(name="scratch").exists()
    assert state.variables.get(name="risk_count").value == 3
    assert page.console_errors == []
    page.wait_for_load_state("networkidle")
    screenshot(page, "rlm_state")
