"""What a new user needs to read the session's tables: each handle named by its short id
and first words, the pack's "Why" column in sight at 1400 px, and a budget typed exactly."""

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.test_pack_ranking import IDENTITY, wide_frame

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_handle_row_shows_its_short_id_and_first_words(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Two notes")
    frame = agent.frame_push(session, goal="Read the notes", budget=40_000)
    first = agent.handle_add(
        frame, kind="message", content="Okonkwo Freight raised its pallet rate to 41 euros."
    )
    second = agent.handle_add(
        frame,
        kind="message",
        content="<b>Lyon</b> depot\n\n  closes <script>document.title='pwned'</script> "
        + "at nine every evening, " * 40,
    )
    empty = agent.handle_add(frame, kind="document", content="")
    rows = {
        first["id"]: "Okonkwo Freight raised its pallet rate to 41 euros.",
        # As text, the whitespace collapsed, a dozen words at most, 80 characters at most.
        second["id"]: "<b>Lyon</b> depot closes <script>document.title='pwned'</script> at nine",
        empty["id"]: "(empty)",
    }
    for url in (f"/sessions/{session.id}/", f"/frames/{frame.id}/"):
        page.goto(url)
        table = page.locator(".frame-handles table")
        expect(table.locator("thead th").first).to_have_text("Handle")
        expect(table.locator("tbody tr")).to_have_count(3)
        for handle_id, opening in rows.items():
            row = table.locator("tbody tr").filter(has_text=handle_id[:8])
            expect(row).to_have_count(1)
            cell = row.locator("td.handle-name")
            expect(cell.locator("code")).to_have_text(handle_id[:8])
            expect(cell.locator("code")).to_have_attribute("title", handle_id)
            # Same kind and priority, told apart by their words.
            shown = cell.locator(".handle-opening").inner_text()
            if handle_id == second["id"]:
                assert shown.startswith(opening) and shown.endswith("…"), shown
                assert len(shown) <= 80 and len(shown.split()) <= 12, shown
            else:
                assert shown == opening, shown
        # The new column keeps the table inside its card, Actions included.
        card = page.locator(".frame-handles").bounding_box()
        box = table.bounding_box()
        assert card is not None and box is not None
        assert box["x"] + box["width"] <= card["x"] + card["width"], (box, card)
        assert page.title() != "pwned"
        assert (
            page.evaluate("document.querySelectorAll('.frame-handles b, main script').length") == 0
        )
    screenshot(page, "frame-handles")


def _why_in_sight(page, table) -> None:
    """The table's last column, "Why", ends inside the window and inside the table's own
    box (nothing of it hidden in a sideways scroll), in the header and every row."""
    viewport = page.viewport_size
    assert viewport is not None
    expect(table.locator("thead th").last).to_have_text("Why")
    box = table.locator("xpath=..").bounding_box()  # the box the table scrolls in
    assert box is not None
    edges = table.locator("tr > :last-child").evaluate_all(
        "cells => cells.map(c => c.getBoundingClientRect().right)"
    )
    assert len(edges) > 10, edges
    right = max(edges)
    assert right <= viewport["width"], (right, viewport)
    assert right <= box["x"] + box["width"] + 1, (right, box)
    assert table.locator("xpath=..").evaluate("e => e.scrollWidth <= e.clientWidth + 1")


def test_the_why_column_is_in_sight_at_1400_px(logged_in, agent):
    page = logged_in
    page.set_viewport_size({"width": 1400, "height": 900})
    session = agent.session_create(identity=IDENTITY, title="Carriers")
    frame = wide_frame(agent, session)
    pack = agent.context_pack(
        session, frame=frame, budget_tokens=500, query="carrier review pallet rates refund cap"
    )
    assert pack["dropped"] and any(s["older_than"] for s in pack["segments"] + pack["dropped"])

    page.goto(f"/sessions/{session.id}/context-packs/{pack['id']}/")
    table = page.locator("table.pack-ranking")
    expect(
        table.locator("tbody tr").filter(has_text="an older near-duplicate of")
    ).not_to_have_count(0)
    _why_in_sight(page, table)
    screenshot(page, "context-pack-1400")

    page.goto(f"/sessions/{session.id}/")
    preview = page.locator("#context-preview")
    preview.get_by_label("Query").fill("carrier review pallet rates refund cap")
    preview.get_by_label("Query").press("Enter")
    expect(preview.locator("h3").first).to_contain_text("carrier review")
    _why_in_sight(page, preview.locator("table.pack-ranking"))
    screenshot(page, "context-preview-1400")


def test_a_budget_typed_exactly_asks_for_that_budget_and_moves_the_slider(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Exact budget")
    frame = agent.frame_push(session, goal="Answer", budget=50_000)
    agent.handle_add(frame, kind="message", content="The Lyon depot closes at nine.")
    page.goto(f"/sessions/{session.id}/")
    preview = page.locator("#context-preview")
    expect(preview.locator("table.pack-ranking")).to_be_visible()
    slider = preview.locator("#preview-budget")
    exact = preview.get_by_label("Budget in tokens")
    expect(exact).to_have_value("4000")
    expect(exact).to_have_attribute("type", "number")

    exact.fill("1234")
    expect(slider).to_have_value("1200")  # the slider follows, to its nearest step
    with page.expect_request(lambda r: "/context-preview/" in r.url) as asked:
        exact.press("Enter")
    assert parse_qs(urlparse(asked.value.url).query)["budget"] == ["1234"]
    expect(preview.locator("output")).to_have_text("1,234")
    expect(preview.locator("#preview-results")).to_contain_text("of 1,234 tokens")
    expect(exact).to_have_value("1234")

    # And the other way: the slider moved (one change event, as a drag ends) sets the
    # number, and the pack asked for is the slider's.
    with page.expect_request(lambda r: "/context-preview/" in r.url) as moved:
        slider.evaluate(
            "e => { e.value = 2500; e.dispatchEvent(new Event('change', {bubbles: true})); }"
        )
    assert parse_qs(urlparse(moved.value.url).query)["budget"] == ["2500"]
    expect(exact).to_have_value("2500")
    expect(preview.locator("output")).to_have_text("2,500")

    # A number out of the slider's range is brought into it, not sent as typed.
    with page.expect_request(lambda r: "/context-preview/" in r.url) as low:
        exact.fill("120")
        exact.press("Tab")  # leaving the field: a change
    assert parse_qs(urlparse(low.value.url).query)["budget"] == ["500"]
    expect(exact).to_have_value("500")
    expect(slider).to_have_value("500")
    expect(preview.locator("output")).to_have_text("500")
    screenshot(page, "context-preview-exact-budget")


def test_the_pack_page_says_a_handle_was_shown_as_an_excerpt_and_from_where(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="A long contract")
    frame = agent.frame_push(session, goal="Answer about the lease", budget=40_000)
    rows = [f"Clause {i}: the tenant keeps the premises clean and in repair." for i in range(300)]
    rows[212] = "Clause 212: the Zanzibar lease renews each March at the indexed rent."
    contract = agent.handle_add(frame, kind="document", content="\n".join(rows))
    pack = agent.context_pack(
        session, frame=frame, budget_tokens=800, query="When does the Zanzibar lease renew?"
    )
    [shown] = [s for s in pack["segments"] if s["handle_id"] == contract["id"]]
    assert shown["form"] == "excerpt" and "Clause 212: the Zanzibar lease" in shown["content"]
    page.goto(f"/sessions/{session.id}/context-packs/{pack['id']}/")
    # The row is named by the handle's opening; its Why says which part of it was shown.
    row = page.locator("table.pack-ranking tbody tr").filter(has_text="Clause 0: the tenant")
    expect(row.locator("td").nth(2)).to_have_text("in · excerpt")
    why = row.locator("td").last.inner_text()
    assert "an excerpt cut to fit" in why and "Zanzibar lease renews" in why, why
    screenshot(page, "pack-excerpt")
