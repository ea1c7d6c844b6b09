"""A real Chromium, driven by Playwright, against the live server and a real worker.

The browser is Debian's /usr/bin/chromium where it is installed (CI installs it), else
Playwright's own, launched by ``chromium_launch`` with the flags every browser test shares. Every
``page`` comes with a Celery worker (``celery_worker`` of tests/conftest.py) consuming
the jobs the live server sends. Agents talk to the live server over HTTP with their own
API key (``agent``). Screenshots of each main page are written to
``$CONTEXTOPS_ARTIFACTS/screenshots`` (CI keeps that folder) and, with
``CONTEXTOPS_SCREENSHOTS_DIR`` set, there as well; each name is written by one test only.
"""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop on the test thread; the ORM calls the tests
# make between browser steps are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CONTEXTOPS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
PASSWORD = "browser-pass-1"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.xdist_group("browser"))


def chromium_launch(playwright):
    """Chromium, headless, with the shared flags: ``$CONTEXTOPS_CHROMIUM`` or Debian's
    /usr/bin/chromium when there, else the one ``playwright install chromium`` fetched.
    With neither, the test fails and says how to get one: a browser test never skips."""
    if Path(CHROMIUM).exists():
        return playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
    try:
        return playwright.chromium.launch(headless=True, args=CHROMIUM_FLAGS)
    except Exception as exc:  # Playwright's own browser is not installed either
        pytest.fail(
            f"No Chromium for the browser tests: none at {CHROMIUM} (set CONTEXTOPS_CHROMIUM) "
            "and no Playwright browser. Install one: `apt-get install -y chromium` or "
            f"`.venv/bin/playwright install chromium`. ({type(exc).__name__})"
        )


@pytest.fixture(scope="package")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = chromium_launch(playwright)
        yield browser
        browser.close()


# What each page polls every 3 or 10 s; here every second, so a change an agent makes
# shows within a second instead of up to ten. What a poll brings is the same.
POLLS = {
    "frames.views": ["LIST_POLL_SECONDS", "TREE_POLL_SECONDS", "FRAME_POLL_SECONDS"],
    "frames.context.views": ["PACKS_POLL_SECONDS", "HANDLES_POLL_SECONDS"],
    "frames.suspensions.views": ["INBOX_POLL_SECONDS"],
}


@pytest.fixture
def quick_polls(monkeypatch) -> None:
    for module, names in POLLS.items():
        for name in names:
            monkeypatch.setattr(f"{module}.{name}", 1)


@pytest.fixture
def page(browser, live_server, celery_worker, quick_polls) -> Iterator:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1366, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.console_errors = errors
    yield page
    context.close()
    # Any console error (a CSP violation is one) fails the test, even one that never looked;
    # a test that provokes some on purpose says which with ``page.console_errors_expected``.
    expected = getattr(page, "console_errors_expected", None) or (lambda _: False)
    unexpected = [error for error in errors if not expected(error)]
    assert unexpected == [], f"console errors: {unexpected}"


@pytest.fixture
def agent(live_server) -> Iterator:
    """An agent of Acme calling the live server over HTTP with its own API key."""
    from contextops_client import Client

    from contextops.tenancy import api_key_create

    _, raw = api_key_create(org_name="Acme", agent_name="browser-agent", authority="employee")
    client = Client(live_server.url, raw, retries=1, backoff=0.01)
    yield client
    client.close()


def login(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


@pytest.fixture
def person(make_user):
    """An approver of Acme who is logged in through the real login form by ``logged_in``."""
    return make_user(username="ada", approver=True, admin=True, password=PASSWORD)


@pytest.fixture
def logged_in(page, person):
    login(page, person.username)
    return page


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as ``name``.png in the artifacts folder (and the docs folder when asked)."""
    out = Path(os.environ.get("CONTEXTOPS_ARTIFACTS", "artifacts")) / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    docs = os.environ.get("CONTEXTOPS_SCREENSHOTS_DIR")
    if docs:
        Path(docs).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(docs) / path.name)
    return path
