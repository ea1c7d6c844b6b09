"""A handle too large for the room left shows as an excerpt: the passage the query asks about.

The excerpt is cut from the handle's own text (``frames.context.excerpts``), in the
ranking's turn, at most a quarter of the ranked room while others wait, and widened by
what the pack leaves at the end.
"""

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from contextops.relevance import query_terms
from frames.context import excerpts, packing
from frames.context.excerpts import GAP, HEAD, TAIL, excerpt, pieces
from frames.context.packing import PackInput, Segment, pack, scaled_tokens
from tests.hypothesis_profiles import examples

TRANSCRIPT = (
    Path(__file__).parents[1]
    / "fixtures/transcripts/claude-code/spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
)
PLANTED = "The Zanzibar office renews its lease with Okonkwo Properties in March."


def _file_read() -> str:
    """A real tool result: Claude Code reading a 635-line Phoenix LiveView module."""
    for line in TRANSCRIPT.read_text().splitlines():
        for block in json.loads(line).get("message", {}).get("content") or []:
            if isinstance(block, dict) and block.get("tool_use_id") == (
                "toolu_01AMAcpBknzQdhPYvFZo8Y2Y"
            ):
                return str(block["content"])
    raise AssertionError("the fixture's file read is missing")


def _document(paragraphs: int = 400, planted_at: int = 300) -> str:
    rows = [
        f"Paragraph {i}: the quarterly ledger lists freight, payroll and vendor margins."
        for i in range(paragraphs)
    ]
    rows[planted_at] = PLANTED
    return "\n".join(rows)


def _segment(i: int, content: str, tokens: int, **fields) -> Segment:
    fields.setdefault("state", "loaded")
    return Segment(
        id=f"h{i}", kind="document", priority="medium", content=content, tokens=tokens,
        order=i, **fields,
    )  # fmt: skip


def _data(segments: list[Segment], budget: int, query: str = "", **fields) -> PackInput:
    return PackInput(
        budget=budget, brief_context="User: Ada", breadcrumbs=[], segments=segments,
        query=query, **fields,
    )  # fmt: skip


def _parts(text: str) -> list[str]:
    """An excerpt's passages, its ellipses taken out."""
    return text.removeprefix(HEAD).removesuffix(TAIL).split(GAP)


def test_an_excerpt_is_the_passage_that_holds_the_query_terms():
    text = _document()
    cut = excerpt(text, 8000, 200, query_terms("When does the Zanzibar lease renew?"))
    assert PLANTED in cut
    assert cut.startswith(HEAD) and cut.endswith(TAIL)  # cut at both ends, and says so
    assert all(part in text for part in _parts(cut))
    assert scaled_tokens(8000, text, cut) <= 200
    assert scaled_tokens(8000, text, cut) >= 190  # the room is used, to within a word


def test_without_a_query_or_a_match_an_excerpt_is_the_opening():
    text = _document()
    for terms in ([], query_terms("tungsten")):
        cut = excerpt(text, 8000, 200, terms)
        assert cut.startswith("Paragraph 0:") and cut.endswith(TAIL)
        assert PLANTED not in cut


def test_an_excerpt_too_small_for_a_character_is_empty_and_a_large_one_is_the_text():
    text = _document(20, 5)
    assert excerpt(text, 400, 1, ["zanzibar"]) == ""
    assert excerpt(text, 400, 401, ["zanzibar"]) == text


def test_pieces_are_whole_lines_short_ones_gathered_and_cover_the_text():
    long_line = "A long line. " * 20 + "word " * 100
    text = "One.\nTwo.\nA second line, with more words than a piece.\n" + long_line
    spans = pieces(text, 40)
    shown = [text[a:b] for a, b in spans]
    assert "".join(shown) == text
    assert shown[:2] == ["One.\nTwo.\n", "A second line, with more words than a piece.\n"]
    # A line over four pieces is cut at sentence ends, then at spaces.
    assert shown[2] == "A long line. A long line. A long line. "
    assert all(len(piece) <= 40 for piece in shown[2:])


def test_an_excerpt_shows_each_passage_the_query_names_in_the_texts_order():
    rows = [f"Row {i}: the ledger lists freight and payroll." for i in range(300)]
    rows[40], rows[260] = "Zanzibar renews in March.", "Okonkwo audits Zanzibar in June."
    text = "\n".join(rows)
    cut = excerpt(text, 3000, 60, query_terms("Zanzibar"))
    assert cut.index("Zanzibar renews") < cut.index("Okonkwo audits")
    assert len(_parts(cut)) >= 2 and all(part in text for part in _parts(cut))


def test_a_pack_shows_the_asked_passage_of_a_document_too_large_for_it():
    document = _segment(0, _document(), 8000)
    chat = [_segment(i, f"Message {i}: status update on the sprint.", 12) for i in range(1, 30)]
    result = pack(_data([document, *chat], 1500, "When does the Zanzibar lease renew?"))
    shown = {i.id: i for i in result.segments}
    assert shown["h0"].form == "excerpt" and PLANTED in shown["h0"].text
    assert shown["h0"].rank == 1  # the best match of the ranking
    # Everything ranked below still fits whole; the excerpt widened into what was left.
    assert all(shown[f"h{i}"].form == "full" for i in range(1, 30))
    assert result.dropped == [] and result.used <= 1500 and result.used >= 1490
    assert result.level == "moderate"


def test_an_excerpt_takes_a_quarter_of_the_room_while_the_items_below_it_want_it():
    document = _segment(0, _document(), 8000)
    chat = [_segment(i, f"Message {i}: " + "status " * 90, 100) for i in range(1, 30)]
    result = pack(_data([document, *chat], 2000, "When does the Zanzibar lease renew?"))
    room = 2000 - result.brief_tokens
    shown = {i.id: i for i in result.segments}
    assert shown["h0"].form == "excerpt" and PLANTED in shown["h0"].text
    assert room // 4 - 2 <= shown["h0"].tokens <= room // 4 + 100  # and what was left
    whole = [i for i in result.segments if i.form == "full"]
    assert len(whole) == (room - room // 4) // 100


def test_an_excerpt_of_a_long_text_is_rendered_a_few_times_not_once_per_piece(monkeypatch):
    """A 1 MB handle with the query's term on every line, cut to a large room: trying each
    of its thousands of pieces must not render the excerpt again (it took seconds)."""
    rendered = []

    def counted(*args):
        rendered.append(1)
        return render(*args)

    render = excerpts._render
    monkeypatch.setattr(excerpts, "_render", counted)
    text = "\n".join(
        f"Line {i}: the zanzibar ledger lists freight payroll and vendor margins."
        for i in range(14_000)
    )
    for terms in (query_terms("zanzibar ledger"), []):
        rendered.clear()
        cut = excerpt(text, 245_000, 128_000, terms)
        assert scaled_tokens(245_000, text, cut) <= 128_000 and len(cut) > 500_000
        assert len(rendered) <= 5


@settings(max_examples=examples(60), deadline=None)
@given(
    lines=st.lists(st.text(st.sampled_from("ab .\n\r\t\u3000é日"), max_size=60), max_size=40),
    order=st.randoms(use_true_random=False),
)
def test_an_excerpts_length_is_kept_as_its_pieces_are_added(lines, order):
    text = "\n".join(lines)
    spans = pieces(text, 8)
    if not spans:
        return
    shown = excerpts._Shown(text, spans)
    indexes = list(range(len(spans)))
    order.shuffle(indexes)
    for index in indexes:
        assert shown.length(index) == len(excerpts._render(text, spans, shown.chosen | {index}))
        shown.add(index)
        assert (
            shown.edges()
            == {i for c in shown.chosen for i in (c - 1, c + 1) if 0 <= i < len(spans)}
            - shown.chosen
        )


def test_the_room_left_goes_to_the_words_after_a_run_not_to_a_gap_it_cannot_cut():
    """The best-scoring piece after a run lies between two runs (a long line that names
    the query): its opening cannot be shown without showing it whole, so the room left
    goes to the words after the last run instead of staying empty."""
    long_line = "The Zanzibar lease " + "runs on and on with words " * 12 + "end."
    rows = [f"Row {i} lists freight and payroll words here." for i in range(60)]
    text = "\n".join(["Zanzibar office.", long_line, "Zanzibar again.", *rows])
    tokens = len(text) // 4
    room = len(text) * 39 // tokens
    cut = excerpt(text, tokens, 40, query_terms("zanzibar"))
    assert cut.startswith("Zanzibar office. … Zanzibar again.\nRow 0 ")
    assert room - len("payroll ") <= len(cut) <= room
    assert all(part in text for part in _parts(cut))


def test_no_excerpt_under_the_least_when_the_cold_handles_names_take_the_room():
    """The room the cold handles' names keep leaves less than EXCERPT_MIN_TOKENS for the
    excerpt: the handle is dropped, not shown as a few words of its opening."""
    names = [packing.ResourceName(f"r{i}", f"src/module_{i}.py", 10) for i in range(49)]
    result = pack(_data([_segment(0, _document(), 8000)], 500, resources=names))
    assert result.segments == []
    assert [(d.id, d.reason) for d in result.dropped] == [("h0", "over_budget")]
    assert len(result.resources) == 49 and result.used <= 500
    roomier = pack(_data([_segment(0, _document(), 8000)], 500, resources=names[:40]))
    [shown] = roomier.segments
    assert shown.form == "excerpt" and shown.tokens >= packing.EXCERPT_MIN_TOKENS


def test_no_excerpt_of_a_short_item_a_paged_out_one_or_at_the_critical_level():
    short = _segment(0, "word " * 200, 2 * packing.EXCERPT_MIN_TOKENS - 1)
    result = pack(_data([short, _segment(1, "word " * 600, 600)], 500))
    assert [(d.id, d.reason) for d in result.dropped] == [("h0", "over_budget")]
    indexed = _segment(0, _document(), 8000, state="indexed", summary="A ledger.", summary_tokens=4)
    assert [i.form for i in pack(_data([indexed], 1000, "Zanzibar")).segments] == ["summary"]
    at_critical = pack(_data([_segment(0, _document(), 8000)], 1000, min_compaction="critical"))
    assert at_critical.segments == [] and at_critical.dropped[0].reason == "not_critical"


@settings(max_examples=examples(60), deadline=None)
@given(
    budget=st.integers(500, 6000),
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=12),
    words=st.integers(1, 12),
    query=st.sampled_from(["", "Zanzibar lease", "ledger margins", "tungsten"]),
)
def test_excerpts_keep_the_budget_and_quote_their_handle(budget, sizes, words, query):
    segments = [
        _segment(i, _document(max(1, tokens // (words * 4)), 0)[: tokens * 4], tokens)
        for i, tokens in enumerate(sizes)
    ]
    result = pack(_data(segments, budget, query))
    assert result.used <= budget
    by_id = {s.id: s for s in segments}
    for item in result.segments:
        source = by_id[item.id]
        if item.form == "excerpt":
            assert all(part in source.content for part in _parts(item.text))
            assert item.tokens <= source.tokens
            assert source.tokens >= 2 * packing.EXCERPT_MIN_TOKENS


def test_an_agent_asking_about_a_large_file_read_gets_the_lines_it_asked_about(api, session, frame):
    """Through the API, with the server's own token counts: a real 26 KB file read."""
    content = _file_read()
    response = api.post(f"/frames/{frame.id}/handles", {"kind": "tool_result", "content": content})
    assert response.status_code == 201, response.content
    handle = response.json()
    assert handle["estimated_tokens"] > 4000
    question = "What does the page show while waiting for the terminal to be ready?"
    body = api.post(
        f"/sessions/{session.id}/context-pack",
        {"frame_id": str(frame.id), "budget_tokens": 1000, "query": question},
    ).json()
    [shown] = body["segments"]
    assert shown["handle_id"] == handle["id"] and shown["form"] == "excerpt"
    assert "Waiting for terminal to be ready" in shown["content"]
    assert all(part in content for part in _parts(shown["content"]))
    assert body["token_summary"]["used"] <= 1000
    assert body["token_summary"]["compaction_level"] == "moderate"
    record = api.get(f"/context-packs/{body['id']}").json()
    assert [(i["id"], i["form"]) for i in record["included"] if i["section"] == "segments"] == [
        (handle["id"], "excerpt")
    ]


def test_no_excerpt_of_a_reference_standing_for_a_larger_file():
    # The handle's content is the file's path; its count is the file's. Cut by characters,
    # it would show a few letters and be charged hundreds of tokens for them.
    reference = _segment(0, "file:/repo/src/app.py", 5000)
    result = pack(_data([reference], 4000, "app"))
    assert result.segments == [] and result.dropped[0].reason == "over_budget"
