"""What a new user needs to read the session's tables: each handle named by its short id
and first words."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


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
