"""The session page's frame tree in a real browser: goals readable beside the budget bars,
the bars in one column, and an overrun hidden in a collapsed subtree said on its ancestors."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}
SIBLINGS = [f"Extract risks from contract {name}" for name in "ABC"]


@pytest.fixture
def contracts(agent):
    """Three sibling frames whose goals differ only at the end; under the third, two levels
    down, a frame that spent past its budget."""
    session = agent.session_create(identity=IDENTITY, title="Supplier contracts")
    root = agent.frame_push(
        session, goal="Review the supplier contracts and list their risks", budget=400_000
    )
    siblings = [agent.frame_push(session, goal=g, budget=60_000, parent=root) for g in SIBLINGS]
    clauses = agent.frame_push(
        session, goal="Read the indemnity clauses of contract C", budget=20_000, parent=siblings[2]
    )
    check = agent.frame_push(
        session, goal="Check the liability cap against policy", budget=4_000, parent=clauses
    )
    agent.usage_record(check, input_tokens=9_000, output_tokens=10)
    return session


def _window(browser, live_server, width):
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": width, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return context, page, errors


def _expand(summary):
    """Click a node's disclosure triangle (its goal is a link to the frame's page)."""
    summary.click(position={"x": 8, "y": 12})


def _goal(tree, text):
    return tree.locator("a.goal", has_text=text)


def _whole(goal) -> bool:
    """The goal shows all of its text: neither cut at the side nor clamped at the bottom."""
    return goal.evaluate(
        "e => e.scrollWidth <= e.clientWidth && e.scrollHeight <= e.clientHeight + 1"
    )


def _overlapping(page) -> list[str]:
    """Pairs of parts of a tree node whose boxes overlap."""
    return page.evaluate(
        """[...document.querySelectorAll("#frame-tree .node")].flatMap(node => {
            const parts = [...node.querySelectorAll(
                ".badge, .goal, .budget-bar, .node-line, .overruns-below")]
                .filter(e => e.getClientRects().length);
            const boxes = parts.map(e => [e, e.getBoundingClientRect()]);
            const found = [];
            for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
                const [a, r] = boxes[i], [b, s] = boxes[j];
                if (a.contains(b) || b.contains(a)) continue;
                if (r.left < s.right - 1 && s.left < r.right - 1 && r.top < s.bottom - 1 && s.top < r.bottom - 1)
                    found.push(a.className + " / " + b.className + " in " + node.textContent.trim().slice(0, 40));
            }
            return found;
        })"""
    )


def test_sibling_goals_read_whole_and_a_hidden_overrun_shows_on_its_ancestors(
    browser, live_server, celery_worker, person, contracts
):
    context, page, errors = _window(browser, live_server, 1400)
    login(page, person.username)
    page.goto(f"/sessions/{contracts.id}/")
    tree = page.locator("#frame-tree")
    texts = []
    for goal in SIBLINGS:
        shown = _goal(tree, goal)
        expect(shown).to_be_visible()
        assert _whole(shown), f"{goal!r} is cut: {shown.inner_text()!r}"
        assert shown.get_attribute("title") == goal
        texts.append(shown.inner_text())
    assert texts == SIBLINGS  # told apart by what shows, not only by the title

    # The overrun two collapsed levels under contract C is said on C, in words.
    third = tree.locator("summary", has_text=SIBLINGS[2])
    marker = third.locator(".overruns-below")
    expect(marker).to_be_visible()
    expect(marker).to_have_text("⚠ 1 over budget below")
    for other in SIBLINGS[:2]:
        expect(tree.locator("summary", has_text=other).locator(".overruns-below")).to_have_count(0)
    assert marker.evaluate("e => getComputedStyle(e).color") == "rgb(156, 28, 28)"
    screenshot(page, "frame-tree-wide")

    # Open C: its marker goes (the next level says it now), and so on down to the frame.
    _expand(third)
    expect(marker).to_be_hidden()
    clauses = tree.locator("summary", has_text="Read the indemnity clauses of contract C")
    expect(clauses.locator(".overruns-below")).to_have_text("⚠ 1 over budget below")
    _expand(clauses)
    check = tree.locator(".node", has_text="Check the liability cap against policy")
    expect(check.locator(".overrun")).to_have_text("+5,010 over")
    for goal in ("Read the indemnity clauses of contract C", "Check the liability cap"):
        assert _whole(_goal(tree, goal))

    # The budget bars stand in one column whatever the depth, clear of the goals.
    rights = {round(box["x"] + box["width"]) for box in _boxes(tree.locator(".budget-bar"))}
    assert len(rights) == 1, rights
    assert _overlapping(page) == []
    screenshot(page, "frame-tree-wide-open")
    context.close()
    assert errors == []


def _boxes(locator):
    return [locator.nth(i).bounding_box() for i in range(locator.count())]


def test_the_tree_fits_a_phone(browser, live_server, celery_worker, person, contracts):
    context, page, errors = _window(browser, live_server, 390)
    login(page, person.username)
    page.goto(f"/sessions/{contracts.id}/")
    tree = page.locator("#frame-tree")
    expect(tree.locator(".overruns-below:visible")).to_have_count(1)
    _expand(tree.locator("summary", has_text=SIBLINGS[2]))
    _expand(tree.locator("summary", has_text="Read the indemnity clauses"))
    expect(tree.locator(".overrun")).to_have_text("+5,010 over")
    for goal in (*SIBLINGS, "Check the liability cap against policy"):
        assert _whole(_goal(tree, goal)), goal
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert _overlapping(page) == []
    screenshot(page, "frame-tree-phone")
    context.close()
    assert errors == []
