"""Open pages update themselves while an agent works: the gauge, the frame tree, a frame's
budget and handles. The agent calls the live server over HTTP with its API key; the
page-out is finished by the real worker. Nothing here reloads the page."""

import re

import pytest
from playwright.sync_api import expect

from frames.models import ContextHandle, Event, Frame
from frames.services.usage import usage_record
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.django_db(transaction=True)

# Polls run every second here (tests/browser/conftest.py); a change may also wait for
# the worker.
UPDATE_TIMEOUT = 12_000
IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


def mark_page(page) -> None:
    """Leave a flag on the window: a reload or a navigation would lose it."""
    page.evaluate("window.contextopsTestMark = 'still here'")


def assert_not_reloaded(page) -> None:
    assert page.evaluate("window.contextopsTestMark") == "still here"


def test_the_gauge_changes_while_an_agent_records_usage(logged_in, agent):
    page = logged_in
    session = agent.session_create(
        identity=IDENTITY, context_window_tokens=10_000, title="Watch the window fill"
    )
    root = agent.frame_push(session, goal="Answer the support ticket", budget=100_000)
    pack = agent.context_pack(session, budget_tokens=2_000, query="refund policy")
    page.goto(f"/sessions/{session.id}/")
    # The pack the agent asked for is listed; its details open from the keyboard.
    packs = page.locator("#context-packs")
    packs.locator(f"#pack-{pack['id']} summary").press("Enter")
    expect(packs).to_contain_text("refund policy")
    expect(packs.locator(f"#pack-{pack['id']}")).to_have_attribute("open", "")
    expect(page.locator("#context-preview")).to_contain_text("compaction level")
    # The page's own preview is not among the packs agents read back.
    assert [p["id"] for p in agent.context_packs(session)] == [pack["id"]]
    gauge = page.locator("#pressure-gauge")
    expect(gauge.locator(".badge")).to_have_text("LOW")
    expect(gauge.locator(".gauge-value")).to_have_text("0.0%")
    mark_page(page)

    agent.usage_record(root, input_tokens=6_000, output_tokens=1_000)  # 70 %: high
    expect(gauge.locator(".badge")).to_have_text("HIGH", timeout=UPDATE_TIMEOUT)
    expect(gauge.locator(".gauge-value")).to_have_text("70.0%")
    expect(gauge.locator(".gauge-fill")).to_have_class(re.compile(r"\bhigh\b"))
    # Figures are labelled and grouped by thousands (issue 19): used / total, available.
    expect(page.locator(f"#frame-{root.id}-figures")).to_contain_text(
        "used 7,000 / 100,000 · available 93,000", timeout=UPDATE_TIMEOUT
    )

    agent.usage_record(root, input_tokens=8_500, output_tokens=500)  # 90 %: critical
    expect(gauge.locator(".badge")).to_have_text("CRITICAL", timeout=UPDATE_TIMEOUT)
    expect(gauge.locator(".gauge-value")).to_have_text("90.0%")
    expect(page.locator("#session-lifecycle [aria-current=step]")).to_have_text(
        "Active under pressure", timeout=UPDATE_TIMEOUT
    )
    expect(page.locator("#session-usage")).to_contain_text("Model calls2")
    assert_not_reloaded(page)
    screenshot(page, "session-critical")
    assert page.console_errors == []


def test_frames_an_agent_pushes_appear_on_the_open_session_page(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="A growing tree")
    root = agent.frame_push(session, goal="Plan the migration", budget=50_000)
    first = agent.frame_push(session, goal="List the tables", budget=5_000, parent=root)
    page.goto(f"/sessions/{session.id}/")
    tree = page.locator("#frame-tree")
    # The tree opens at its first level (issue 19): the root's children are there at once.
    expect(tree.locator(f"#frame-{root.id} > details")).to_have_attribute("open", "")
    expect(tree.get_by_role("link", name="List the tables")).to_be_visible()
    mark_page(page)

    second_root = agent.frame_push(session, goal="Write the rollback plan", budget=8_000)
    expect(tree.get_by_role("link", name="Write the rollback plan")).to_be_visible(
        timeout=UPDATE_TIMEOUT
    )

    copy = agent.frame_push(session, goal="Copy the data", budget=5_000, parent=root)
    expect(tree.get_by_role("link", name="Copy the data")).to_be_visible(timeout=UPDATE_TIMEOUT)
    expect(tree.locator(f"#frame-{root.id} > details")).to_have_attribute("open", "")
    expect(page.locator(f"#frame-{root.id}-figures")).to_contain_text("2 children")

    # Work inside a branch nobody expanded changes nothing visible, and is no error.
    hidden = agent.frame_push(session, goal="Copy table A", budget=500, parent=copy)
    expect(tree.locator("summary", has_text="Copy the data")).to_be_visible(timeout=UPDATE_TIMEOUT)
    agent.usage_record(hidden, input_tokens=100, output_tokens=10)
    expect(page.locator("#session-events")).to_contain_text(
        "usage.recorded", timeout=UPDATE_TIMEOUT
    )
    expect(tree.get_by_role("link", name="Copy table A")).to_have_count(0)

    # A leaf that gets a child becomes expandable, and its child loads on expand, even
    # when the branch is opened the instant it turns expandable, before any timer runs.
    page.evaluate(
        """(id) => document.body.addEventListener('htmx:oobAfterSwap', () => {
            const branch = document.querySelector(`#frame-${id} > details`);
            if (branch && !branch.open) queueMicrotask(() => { branch.open = true; });
        })""",
        str(second_root.id),
    )
    agent.frame_push(session, goal="Ask the DBA", budget=1_000, parent=second_root)
    expect(tree.locator(f"#frame-{second_root.id} > details")).to_have_attribute(
        "open", "", timeout=UPDATE_TIMEOUT
    )
    expect(tree.get_by_role("link", name="Ask the DBA")).to_be_visible()

    agent.frame_pop(first, status="completed")
    expect(page.locator(f"#frame-{first.id}-status")).to_have_text(
        "completed", timeout=UPDATE_TIMEOUT
    )
    expect(tree.locator(f"#frame-{root.id} > details")).to_have_attribute("open", "")
    assert tree.locator(f"#frame-{first.id}").count() == 1
    assert_not_reloaded(page)
    screenshot(page, "session-live-tree")
    assert page.console_errors == []


def test_a_page_out_from_the_frame_page_is_finished_by_the_worker(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Paging")
    frame = agent.frame_push(session, goal="Read the incident report", budget=40_000)
    text = "The outage began at 09:12 when the cache cluster lost quorum. " * 40
    handle = agent.handle_add(frame, kind="document", content=text, priority="low")
    page.goto(f"/frames/{frame.id}/")
    row = page.locator(".frame-handles tbody tr").first
    expect(row).to_contain_text("loaded")
    mark_page(page)

    agent.usage_record(frame, input_tokens=1_200, output_tokens=300)
    budget = page.locator("#budget")
    expect(budget).to_contain_text("1,500", timeout=UPDATE_TIMEOUT)
    expect(page.locator("#frame-calls")).not_to_contain_text("None recorded.")

    row.get_by_role("button", name="Page out").click()
    expect(page.locator(".frame-handles")).to_contain_text("Page-out queued")
    # The worker writes the summary and moves the handle; the table's poll shows it.
    expect(row).to_contain_text("indexed", timeout=UPDATE_TIMEOUT)
    expect(row.get_by_role("button", name="Page in")).to_be_visible()
    stored = ContextHandle.objects.get(pk=handle["id"])
    assert stored.state == "indexed" and stored.summary.startswith("The outage began")
    assert_not_reloaded(page)
    assert page.console_errors == []


def test_the_frame_pages_events_update_on_the_page_of_them_shown(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="A busy frame")
    frame = agent.frame_push(session, goal="Summarise the build logs", budget=1_000_000)
    stored = Frame.objects.select_related("session").get(pk=frame.id)
    for _ in range(55):  # more events than one page holds
        usage_record(session=stored.session, frame=stored, input_tokens=10, output_tokens=1)
    count = Event.objects.filter(frame_id=stored.pk).count()
    page.goto(f"/frames/{frame.id}/")
    events = page.locator("#frame-events")
    expect(events).to_contain_text(f"Latest 50 of {count}, newest first")
    mark_page(page)

    # On the first page, an event the agent adds comes in at the top.
    agent.frame_reserve(frame, purpose="summary", amount=500)
    expect(events.locator("li").first).to_contain_text("frame.reserved", timeout=UPDATE_TIMEOUT)
    expect(events).to_contain_text(f"Latest 50 of {count + 1}, newest first")
    assert_not_reloaded(page)

    # An older page keeps its rows while events arrive; only where they stand moves on.
    oldest_shown = events.locator("li").last.inner_text()
    events.get_by_role("link", name="Older").click()
    expect(events).to_contain_text(f"51–{count + 1} of {count + 1}")
    assert "?before=" in page.url
    rows = events.locator("li").all_inner_texts()
    assert oldest_shown not in rows
    mark_page(page)
    agent.frame_results_add(frame, result_refs=[{"kind": "note", "text": "done"}])
    expect(events).to_contain_text(f"52–{count + 2} of {count + 2}", timeout=UPDATE_TIMEOUT)
    assert events.locator("li").all_inner_texts() == rows
    expect(events).not_to_contain_text("frame.result_added")
    expect(events.get_by_role("link", name="Newer")).to_have_attribute(
        "href", re.compile(r"^\?before=\d+#events$")
    )
    assert_not_reloaded(page)
    page.reload()  # a reload too lists the same events
    expect(events).to_contain_text(f"52–{count + 2} of {count + 2}")
    assert events.locator("li").all_inner_texts() == rows
    assert page.console_errors == []


def test_a_click_while_the_handles_poll_is_in_flight_wins_quietly(logged_in, agent):
    """The handles table polls itself; a Page out clicked while a poll is on the wire must
    not be undone by that poll's older answer, and must not abort it noisily (htmx logs
    an aborted request as a console error)."""
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Click during a poll")
    frame = agent.frame_push(session, goal="Read the logs", budget=40_000)
    agent.handle_add(frame, kind="document", content="Disk full on node 3. " * 30, priority="low")
    page.goto(f"/frames/{frame.id}/")
    row = page.locator(".frame-handles tbody tr").first
    expect(row).to_contain_text("loaded")
    mark_page(page)

    # Hold the table's next poll on the wire; everything else goes through.
    held = []

    def hold_polls(route):
        if route.request.method == "GET" and not held:
            held.append(route)
        else:
            route.continue_()

    handles_url = re.compile(rf"/frames/{frame.id}/handles/")
    page.route(handles_url, hold_polls)
    deadline = 4 * 1_000
    while not held and deadline > 0:
        page.wait_for_timeout(200)
        deadline -= 200
    assert held, "the handles table did not poll"

    row.get_by_role("button", name="Page out").click()
    # The poll that left before the click answers now, with the table as it was then: that
    # answer is dropped, and the click's own answer shows.
    page.wait_for_timeout(500)
    held[0].continue_()
    expect(page.locator(".frame-handles")).to_contain_text("Page-out queued")
    page.unroute(handles_url)
    expect(row).to_contain_text("indexed", timeout=UPDATE_TIMEOUT)
    assert_not_reloaded(page)
    assert page.console_errors == []


def test_an_open_page_says_when_its_updates_fail_and_recovers(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Through a database restart")
    root = agent.frame_push(session, goal="Keep working", budget=10_000)
    page.goto(f"/sessions/{session.id}/")
    notice = page.locator("#request-error")
    expect(notice).to_be_hidden()
    mark_page(page)

    # The database restarts: the page's polls get the server's 503 answer meanwhile.
    page.route(
        "**/changes/**",
        lambda route: route.fulfill(
            status=503, headers={"Retry-After": "2"}, body="The database is unavailable"
        ),
    )
    agent.usage_record(root, input_tokens=100, output_tokens=10)
    expect(notice).to_be_visible(timeout=UPDATE_TIMEOUT)
    expect(notice).to_have_text(re.compile("database is unavailable"))
    expect(notice).to_have_attribute("role", "alert")
    # The gauge's own poll still succeeds, a few times; that does not clear the notice.
    page.wait_for_timeout(4_000)
    expect(notice).to_be_visible()

    page.unroute("**/changes/**")
    expect(notice).to_be_hidden(timeout=UPDATE_TIMEOUT)
    expect(page.locator("#session-events")).to_contain_text("usage.recorded")
    assert_not_reloaded(page)
    assert all("503" in error for error in page.console_errors), page.console_errors
    page.console_errors_expected = lambda error: "503" in error  # provoked above


def test_refresh_and_reload_update_their_panel_in_place(logged_in, agent):
    """The refresh and reload links beside a panel's title fetch that panel again; they
    do not leave the page for the bare fragment the panel polls."""
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Refresh in place")
    frame = agent.frame_push(session, goal="Read the logs", budget=40_000)
    agent.handle_add(frame, kind="document", content="Disk full on node 3.", priority="low")
    page.goto(f"/sessions/{session.id}/")
    mark_page(page)
    agent.context_pack(session, budget_tokens=2_000, query="disk space")
    for panel, link in (
        ("#pressure-gauge", "refresh"),
        ("#context-packs", "refresh"),
        (f"#frame-handles-{frame.id}", "reload"),
    ):
        with page.expect_response(lambda r: r.request.method == "GET" and r.status == 200):
            page.locator(panel).get_by_role("link", name=link).click()
        expect(page.locator(panel)).to_be_visible()
        assert page.url.endswith(f"/sessions/{session.id}/"), (link, page.url)
        assert_not_reloaded(page)
    # The pack asked for after the page opened shows once its list is refreshed.
    expect(page.locator("#context-packs")).to_contain_text("disk space")
    expect(page.locator("nav").first).to_be_visible()  # still the whole page
    assert page.console_errors == []
