"""The pack explains itself: the session's preview and a pack's own page show, for every
item in or out, its rank, its score parts and why."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = {"user_name": "Ada", "user_id": "u-1", "authority": "employee"}


def test_the_preview_and_the_pack_page_show_each_items_score_parts(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Vendor review")
    frame = agent.frame_push(session, goal="Review the vendors", budget=50_000)
    agent.handle_add(
        frame, kind="system_prompt", content="You review vendors.", priority="critical"
    )
    planted = agent.handle_add(
        frame, kind="message", content="Okonkwo Freight raised its pallet rate to 41 euros."
    )
    for index in range(80):
        agent.handle_add(
            frame,
            kind="message",
            content=f"Status note {index}: the weekly sync moved, nothing else changed here.",
        )
    pack = agent.context_pack(
        session, frame=frame, budget_tokens=600, query="What is the Okonkwo pallet rate?"
    )
    found = next(s for s in pack["segments"] if s["handle_id"] == planted["id"])
    assert found["score"]["lexical"] == 1.0 and found["reason"] == "ranked"

    page.goto(f"/sessions/{session.id}/")
    preview = page.locator("#context-preview")
    preview.get_by_label("Query").fill("Okonkwo pallet rate")
    # The slider moved to its smallest budget, as a drag ends: one change event.
    preview.locator("#preview-budget").evaluate(
        "e => { e.value = e.min; e.dispatchEvent(new Event('change', {bubbles: true})); }"
    )
    expect(preview.locator("output")).to_have_text("500")
    expect(preview.locator("h3").first).to_have_text("Ranking for “Okonkwo pallet rate”")
    ranking = page.locator("#context-preview table.pack-ranking")
    expect(ranking).to_be_visible()
    row = ranking.locator("tbody tr").filter(has_text="Okonkwo Freight")
    expect(row).to_contain_text("in · full")
    expect(row.locator("td").nth(6)).to_have_text("1.000")  # lexical: the best match
    expect(ranking.locator("thead")).to_contain_text("Semantic")
    expect(ranking.locator("tbody tr").filter(has_text="fitted in no form").first).to_be_visible()

    page.locator("#context-packs summary").first.click()
    page.get_by_role("link", name="Every item, in or out, with its score and why").click()
    expect(page.locator("h1")).to_have_text("Context pack")
    table = page.locator("table.pack-ranking")
    planted_row = table.locator("tbody tr").filter(has_text="Okonkwo Freight")
    expect(planted_row).to_contain_text("ranked; whole")
    out = table.locator("tbody tr.pack-out").first
    expect(out).to_contain_text("out · over_budget")
    expect(page.locator("dl")).to_contain_text("What is the Okonkwo pallet rate?")
    screenshot(page, "context-pack")


PARTS = ("priority", "lexical", "semantic", "recency", "attention", "neighbour", "older")
LONG = (
    "The carrier review for the northern depots covers pallet rates, fuel surcharges, "
    "late deliveries in the third quarter, the damaged-goods claims of March and the "
    "renewal terms of every contract that ends this year, vendor by vendor: {}."
)


def _near_duplicates(agent, session):
    """Two facts saying nearly the same (the older one ranks behind the newer) and two long
    handles saying nearly the same: each older one gets an ``older`` part below zero."""
    agent.fact_write(
        "refund_limit",
        "Refunds for carriers are capped at 15% of the order",
        source="user",
        subject="refund limit",
    )
    agent.fact_write(
        "refund_limit_here",
        "Refunds are capped at 10% of the order",
        source="user",
        subject="refund limit",
        scope="session",
        scope_id=str(session.id),
    )
    frame = agent.frame_push(session, goal="Review the carriers", budget=50_000)
    agent.handle_add(frame, kind="message", content="First draft. " + LONG.format("Okonkwo"))
    newer = agent.handle_add(
        frame, kind="message", content="Final draft. " + LONG.format("Okonkwo")
    )
    return frame, newer


def wide_frame(agent, session):
    """``_near_duplicates`` and twenty more long handles: the longest rows the ranking has."""
    frame, _ = _near_duplicates(agent, session)
    for index in range(20):
        agent.handle_add(frame, kind="message", content=LONG.format(f"note {index}"))
    return frame


def _parts_add_up(table) -> int:
    """Every row of an older near-duplicate shows its ``older`` part, and the parts shown add
    up to the total shown (each rounded to 3 places); the number of rows whose ``older``
    penalty is below zero."""
    header = [t.strip() for t in table.locator("thead th").all_inner_texts()]
    columns = [header.index(p.capitalize()) for p in PARTS]
    score = header.index("Score")
    rows = table.locator("tbody tr").filter(has_text="an older near-duplicate of")
    penalised = 0
    for n in range(rows.count()):
        cells = rows.nth(n).locator("td").all_inner_texts()
        parts = [float(cells[c]) for c in columns]
        penalised += parts[-1] < 0
        assert abs(sum(parts) - float(cells[score])) <= 0.0005 * len(parts), cells
    return penalised


def test_every_score_part_shows_and_they_add_up_to_the_total(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Refunds")
    frame, newer = _near_duplicates(agent, session)
    pack = agent.context_pack(
        session, frame=frame, budget_tokens=2000, query="What is the refund cap for carriers?"
    )
    page.goto(f"/sessions/{session.id}/context-packs/{pack['id']}/")
    table = page.locator("table.pack-ranking")
    expect(table.locator("thead")).to_contain_text("Older")
    expect(table.locator("caption")).to_contain_text("+ older")
    assert _parts_add_up(table) >= 1
    # The "why" names the newer item briefly (its id and a few words), never its whole text.
    older_handle = table.locator("tbody tr").filter(has_text="First draft.")
    expect(older_handle).to_have_count(1)
    why = older_handle.locator("td").last.inner_text()
    assert str(newer["id"])[:8] in why and LONG.format("Okonkwo") not in why, why
    assert len(why) < 160, why

    page.goto(f"/sessions/{session.id}/")
    preview = page.locator("#context-preview")
    preview.get_by_label("Query").fill("What is the refund cap for carriers?")
    preview.get_by_label("Query").press("Enter")
    expect(preview.locator("h3").first).to_contain_text("refund cap")
    assert _parts_add_up(preview.locator("table.pack-ranking")) >= 1


def test_the_preview_keeps_what_is_typed_while_it_assembles(logged_in, agent):
    """The answer to a slider move arrives while the person types the query: it replaces
    the results, not the form, so every letter typed stays, and the query's results follow."""
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Coupons")
    frame = agent.frame_push(session, goal="Coupons", budget=50_000)
    agent.handle_add(frame, kind="message", content="The zanzibarite coupon takes 12% off.")
    page.goto(f"/sessions/{session.id}/")
    preview = page.locator("#context-preview")
    expect(preview.locator("table.pack-ranking")).to_be_visible()
    held = []

    def preview_request(url: str) -> bool:
        return "/context-preview/" in url

    page.route(preview_request, lambda route: held.append(route))
    preview.locator("#preview-budget").evaluate(
        "e => { e.value = e.min; e.dispatchEvent(new Event('change', {bubbles: true})); }"
    )
    expect(preview.locator("form")).to_have_class(re.compile(r"\bhtmx-request\b"))  # in flight
    query = preview.get_by_label("Query")
    query.click()
    query.press_sequentially("zanzibarite coupon")
    assert len(held) == 1  # the slider's answer has not arrived while typing
    held[0].continue_()
    page.unroute(preview_request)
    expect(preview.locator("output")).to_have_text("500")
    expect(query).to_have_value("zanzibarite coupon")
    query.press("Enter")
    expect(preview.locator("h3").first).to_have_text("Ranking for “zanzibarite coupon”")
    expect(query).to_have_value("zanzibarite coupon")
    row = preview.locator("table.pack-ranking tbody tr").filter(has_text="zanzibarite coupon")
    expect(row.locator("td").nth(6)).to_have_text("1.000")  # lexical: the best match


def test_the_ranking_reads_whole_at_1280_and_fits_390(logged_in, agent):
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Wide")
    wide_frame(agent, session)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/sessions/{session.id}/")
    preview = page.locator("#context-preview")
    preview.get_by_label("Query").fill("carrier review pallet rates")
    preview.get_by_label("Query").press("Enter")
    table = preview.locator("table.pack-ranking")
    expect(preview.locator("h3").first).to_contain_text("carrier review")
    # The whole table, Score and Older included, is in sight: no sideways scroll.
    scroll = table.locator("xpath=..")
    assert scroll.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    box = table.bounding_box()
    assert box is not None and box["width"] >= 900 and box["x"] + box["width"] <= 1280
    older = table.locator("thead th").filter(has_text="Older").bounding_box()
    assert older is not None and older["x"] + older["width"] <= 1280
    heights = table.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => r.getBoundingClientRect().height)"
    )
    assert max(heights) <= 120, heights
    screenshot(page, "context-preview-1280")

    page.set_viewport_size({"width": 390, "height": 844})
    expect(table).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 400, width


def test_older_packs_are_reached_from_the_session_page_and_compared(logged_in, agent, monkeypatch):
    """The session page shows the newest packs, each named by its query in the comparison,
    and leads to every pack of the session, page by page, where any two compare."""
    from frames.context import views

    monkeypatch.setattr(views, "PACKS_PER_PAGE", 3)
    page = logged_in
    session = agent.session_create(identity=IDENTITY, title="Many packs")
    frame = agent.frame_push(session, goal="Vendors", budget=50_000)
    agent.handle_add(frame, kind="message", content="Okonkwo Freight raised its pallet rate.")
    queries = [f"pallet question number {n}" for n in range(8)]  # the oldest first
    for query in queries:
        agent.context_pack(session, frame=frame, budget_tokens=1000, query=query)

    page.goto(f"/sessions/{session.id}/")
    packs = page.locator("#context-packs")
    options = packs.locator("select[name=a] option")
    expect(options).to_have_count(views.PACKS_SHOWN)
    labels = options.all_text_contents()
    assert len(labels) == views.PACKS_SHOWN and len(set(labels)) == len(labels), labels
    assert "“pallet question number 7”" in labels[0], labels
    expect(packs).to_contain_text(f"The newest {views.PACKS_SHOWN} of 8")
    packs.get_by_role("link", name="Every pack of this session, page by page").click()

    expect(page.locator("h1")).to_have_text("Context packs agents asked for")
    expect(page.locator("main")).to_contain_text("8 packs, newest first · page 1 of 3")
    page.get_by_role("link", name="Older packs").click()
    page.get_by_role("link", name="Older packs").click()
    expect(page.locator("main")).to_contain_text("page 3 of 3")
    rows = page.locator("table.pack-table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("pallet question number 1")
    expect(rows.last).to_contain_text("pallet question number 0")
    # The two oldest, which the session page no longer offers, compare here.
    oldest, newer = page.locator("select[name=a] option").all_text_contents()[::-1]
    assert "number 0" in oldest and "number 1" in newer
    page.locator("select[name=a]").select_option(label=oldest)
    page.locator("select[name=b]").select_option(label=newer)
    page.get_by_role("button", name="Why did it change?").click()
    expect(page.locator("#pack-diff table")).to_contain_text("Used / budget")
    rows.last.get_by_role("link").click()
    expect(page.locator("dl")).to_contain_text("pallet question number 0")

    page.goto(f"/sessions/{session.id}/context-packs/all/?page=not-a-page")
    expect(page.locator("main")).to_contain_text("page 1 of 3")
