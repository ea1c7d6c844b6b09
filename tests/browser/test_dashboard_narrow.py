"""At 390 px wide (a phone) the pages stay usable: Log out is reachable, nothing overflows
the window, every section of the navigation is in sight, no figure, heading or tab breaks
inside a word, the occupancy chart draws every point with its axes."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


def test_a_phone_sized_window_keeps_log_out_reachable(
    browser, live_server, celery_worker, person, agent
):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": 844})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    session = agent.session_create(identity=IDENTITY, title="Narrow", context_window_tokens=10_000)
    frame = agent.frame_push(session, goal="Chat", budget=100_000)
    for n in range(3):
        agent.messages_append(
            session,
            [{"role": "user", "content": f"Question {n}"}, {"role": "assistant", "content": "Ok"}],
            usage={"input_tokens": 1000 * (n + 1), "output_tokens": 10},
            frame=frame.id,
        )
    login(page, person.username)
    pages = ("/", f"/sessions/{session.id}/", "/usage/", f"/sessions/{session.id}/turns/")
    for path in (f"/frames/{frame.id}/", *pages):  # the turns page last: its chart below
        page.goto(path)
        logout = page.get_by_role("button", name="Log out")
        expect(logout).to_be_visible()
        box = logout.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390
        width = page.evaluate("document.documentElement.scrollWidth")
        wide = page.evaluate(
            '[...document.querySelectorAll("main *")].filter(e => e.getBoundingClientRect().right > 392).slice(0,5).map(e => e.tagName + "." + e.className + "#" + e.id)'
        )
        assert width <= 400, f"{path} is {width} px wide: {wide}"
        # A figure stays on one line (a narrow table scrolls in its card instead).
        broken = page.evaluate(
            """[...document.querySelectorAll("td.num, th, .tabs a, .topbar nav a")].filter(cell => {
                const texts = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
                const lines = new Set();
                for (let node = texts.nextNode(); node; node = texts.nextNode()) {
                    const range = document.createRange(); range.selectNodeContents(node);
                    for (const r of range.getClientRects()) lines.add(Math.round(r.top));
                }
                const words = cell.textContent.trim().split(/\\s+/).length;
                return cell.textContent.trim() && lines.size > words;
            }).slice(0, 5).map(cell => cell.textContent.trim())"""
        )
        assert broken == [], f"{path} breaks inside a word: {broken}"
        # Every section of the main navigation is in sight, none cut off at the edge.
        cut = page.evaluate(
            '[...document.querySelectorAll(".topbar nav a")]'
            ".filter(a => a.getBoundingClientRect().right > 390).map(a => a.textContent)"
        )
        assert cut == [], f"{path} hides {cut} past the edge"
    expect(page.locator("svg.conv-chart circle.conv-point")).to_have_count(3)
    expect(page.locator("svg.conv-chart .conv-axis")).to_have_count(2)
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/accounts/login/**")
    context.close()
    assert errors == []
