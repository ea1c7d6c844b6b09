"""A real Chromium reads a LangGraph thread that a real graph wrote through the saver."""

import operator
from typing import Annotated, TypedDict

import pytest
from contextops_client.langgraph import ContextopsSaver
from django.test import Client
from langgraph.graph import END, START, StateGraph

from contextops.tenancy import api_key_create
from frames.graphs.models import GraphThread

# Importing the browser tests' conftest also sets DJANGO_ALLOW_ASYNC_UNSAFE, as they need.
from tests.browser.conftest import PASSWORD, chromium_launch

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


class State(TypedDict):
    steps: Annotated[list[str], operator.add]
    total: int


def _run_graph(url: str) -> GraphThread:
    _, raw = api_key_create(org_name="Acme", agent_name="graph-agent", authority="employee")
    saver = ContextopsSaver(url, raw, retries=1, backoff=0.01)
    builder = StateGraph(State)
    builder.add_node("plan", lambda s: {"steps": ["plan"], "total": s["total"] + 1})
    builder.add_node("act", lambda s: {"steps": ["act"], "total": s["total"] * 10})
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", END)
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"steps": [], "total": 4}, {"configurable": {"thread_id": "browser-thread"}})
    saver.close()
    return GraphThread.objects.get(thread_id="browser-thread")


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = chromium_launch(playwright)
        yield browser
        browser.close()


@pytest.mark.django_db(transaction=True)
def test_it_shows_history_values_a_diff_and_pending_writes(chromium, live_server, make_user):
    make_user(username="lang", password=PASSWORD)
    thread = _run_graph(live_server.url)
    context = chromium.new_context(base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("lang")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    # A person finds the thread from its session's page.
    page.goto(f"/sessions/{thread.session_id}/")
    assert "holds a LangGraph thread" in page.locator("#frame-tree").inner_text()
    page.locator(".graph-threads").get_by_role("link", name="browser-thread").click()
    page.wait_for_url(f"**/langgraph/{thread.pk}/")

    rows = page.locator(".graph-history tbody tr")
    assert rows.count() == 4  # input, plan, act, end: steps -1 to 2, oldest first
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(4)] == ["-1", "0", "1", "2"]
    assert "plan" in rows.nth(2).inner_text()  # step 1 is what plan wrote
    assert "act" in rows.nth(3).inner_text()
    # The latest checkpoint: the final values, and what act changed.
    values = page.locator(".graph-values")
    assert "50" in values.inner_text()
    diff = page.locator(".graph-diff")
    assert "total" in diff.inner_text() and "changed" in diff.inner_text()
    # An earlier checkpoint: its values and the writes that were pending on it.
    rows.nth(2).get_by_role("link").click()
    page.wait_for_url(lambda url: "at=" in url)
    assert '"plan"' in page.locator(".graph-values").inner_text()
    assert "5" in page.locator(".graph-values").inner_text()
    writes = page.locator(".graph-writes")
    assert "act" in writes.inner_text() and "total" in writes.inner_text()
    assert errors == []
    context.close()


@pytest.mark.django_db(transaction=True)
def test_another_organizations_member_gets_a_404(live_server, make_user):
    thread = _run_graph(live_server.url)
    client = Client()
    client.force_login(make_user(username="eve", org="Globex"))
    assert client.get(f"/langgraph/{thread.pk}/").status_code == 404
    client.force_login(make_user(username="ada"))
    assert client.get(f"/langgraph/{thread.pk}/").status_code == 200
