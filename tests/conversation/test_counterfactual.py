"""Counterfactual compaction on the 2.x Claude Code fixture with its real automatic
compaction (tests/fixtures/transcripts/PROVENANCE.md), and on a live session of ours.

The figures the answers are checked against are read from the file here, independently
of the importer: the compactMetadata, the responses before the boundary (one turn per
model call) and the first call after it.
"""

import json
import re
from pathlib import Path

import pytest

from contextops.llm import ExtractiveSummarizer, SummaryOutcome
from frames.conversation import counterfactual as cf
from frames.conversation.compaction import compaction_execute, compaction_request
from frames.conversation.importing.executing import transcript_import
from frames.conversation.readers import read_transcript
from frames.conversation.selection import strategies
from frames.models import Event

from .conftest import assistant, text, tool_result, tool_use

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
SPOTTER = FIXTURES / "claude-code" / "spotter" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


def file_figures(path: Path) -> dict:
    """What the file itself says: preTokens, the responses (message ids) of the main
    conversation before the boundary, and the full input of the first one after it."""
    ids_before: list[str] = []
    boundary = None
    after = None
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("isSidechain"):
            continue
        if event.get("subtype") == "compact_boundary":
            boundary = event["compactMetadata"]
            continue
        message = event.get("message")
        if event.get("type") != "assistant" or message.get("model") == "<synthetic>":
            continue
        if boundary is None:
            if message["id"] not in ids_before:
                ids_before.append(message["id"])
        elif after is None:
            usage = message["usage"]
            after = (
                usage["input_tokens"]
                + usage["cache_creation_input_tokens"]
                + usage["cache_read_input_tokens"]
            )
    assert boundary is not None
    return {"pre_tokens": boundary["preTokens"], "calls_before": len(ids_before), "after": after}


@pytest.fixture
def imported(api):
    report = transcript_import(organization=api.organization, transcript=read_transcript(SPOTTER))
    return report.session


def covered(runs: list[list[int]]) -> list[int]:
    return [i for first, last in runs for i in range(first, last + 1)]


def test_it_reports_the_agents_own_compaction(api, imported):
    figures = file_figures(SPOTTER)
    response = api.get(f"/sessions/{imported.pk}/counterfactual", {"threshold": 0.9})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["unit"] == "call" and body["threshold"] == 0.9
    (point,) = body["compactions"]
    assert point["origin"] == "transcript"
    assert point["actual"]["pre_tokens"] == figures["pre_tokens"] == 167_731
    assert point["actual"]["trigger"] == "auto"
    assert point["actual"]["strategy"] == ""  # the transcript's own, not one of ours
    assert point["actual"]["tokens_after"] == figures["after"]
    # It fell after the file's 71st response: turns 0-70 were in the window.
    n = figures["calls_before"]
    assert point["turn"] == n
    assert point["turns_in_window"] == [[0, n - 1]]
    # Claude Code's compaction summarizes the whole window and keeps only its summary.
    assert point["actual"]["kept"] == [] and point["actual"]["removed"] == []
    assert point["actual"]["summarized"] == [[0, n - 1]]
    by_name = {s["strategy"]: s for s in point["strategies"]}
    assert list(by_name) == list(strategies())
    for outcome in by_name.values():
        assert outcome["tokens_after"] < figures["pre_tokens"], outcome["strategy"]
        taken = covered(outcome["summarized"]) + covered(outcome["removed"])
        assert sorted(covered(outcome["kept"]) + taken) == list(range(n))
    # Summarize-oldest keeps the newest ten calls and summarizes the rest; truncate-at
    # keeps the same ten and drops the rest with no summary.
    assert by_name["summarize_oldest"]["kept"] == [[n - 10, n - 1]]
    assert by_name["summarize_oldest"]["summarized"] == [[0, n - 11]]
    assert by_name["summarize_oldest"]["cut_at"] == n - 10
    assert by_name["truncate_at"]["removed"] == [[0, n - 11]]
    assert by_name["truncate_at"]["summary_tokens"] == 0
    assert by_name["truncate_at"]["tokens_after"] < by_name["summarize_oldest"]["tokens_after"]
    # Anchor-point keeps the last three always, and everything from its anchor on.
    anchor_point = by_name["anchor_point"]
    assert set(range(n - 3, n)) <= set(covered(anchor_point["kept"]))
    if anchor_point["anchor"] is not None:
        cut = anchor_point["anchor"]["turn"]
        assert anchor_point["summarized"] == [[0, cut - 1]]
        assert anchor_point["kept"] == [[cut, n - 1]]


def test_it_estimates_summaries_from_the_sessions_own_ratio(api, imported):
    body = api.get(f"/sessions/{imported.pk}/counterfactual").json()
    assert body["summary_ratio_source"] == "session"
    (point,) = body["compactions"]
    ratio = point["actual"]["summary_tokens"] / point["actual"]["pre_tokens"]
    assert body["summary_ratio"] == pytest.approx(ratio, abs=1e-4)
    for outcome in point["strategies"]:
        if outcome["summarized"]:
            assert 0 < outcome["summary_tokens"] < point["actual"]["pre_tokens"] * ratio


def test_it_says_where_our_trigger_fires_and_what_each_policy_costs(api, imported):
    window = imported.context_window_tokens
    low = api.get(f"/sessions/{imported.pk}/counterfactual", {"threshold": 0.5}).json()
    high = api.get(f"/sessions/{imported.pk}/counterfactual", {"threshold": 0.8}).json()
    for body in (low, high):
        fire = body["trigger"]
        assert fire["occupancy"] > body["threshold"] * window
        # The curve with the real compaction undone: the first call past the threshold.
        first = next(
            p for p in body["uncompacted_curve"] if p["occupancy"] > body["threshold_tokens"]
        )
        assert (fire["turn"], fire["occupancy"]) == (first["turn"], first["occupancy"])
        policies = {p["policy"]: p for p in body["policies"]}
        assert policies["actual"]["compactions"] == 1
        # It compacted after the call before the compaction's turn, as a policy's fires say.
        (real,) = body["compactions"]
        assert [f["turn"] for f in policies["actual"]["fires"]] == [real["turn"] - 1]
        assert policies["actual"]["tokens_sent"] == full_inputs(imported)
        for name in strategies():
            assert policies[name]["compactions"] >= 1
            assert len(policies[name]["fires"]) == policies[name]["compactions"]
    assert low["trigger"]["turn"] < high["trigger"]["turn"]
    for name in strategies():
        low_runs = {p["policy"]: p for p in low["policies"]}[name]
        high_runs = {p["policy"]: p for p in high["policies"]}[name]
        assert low_runs["compactions"] >= high_runs["compactions"]
        # Compacting earlier sends less over the session.
        assert low_runs["tokens_sent"] < high_runs["tokens_sent"]


def full_inputs(session) -> int:
    """Every main-conversation call's full input (input, cache writes, cache reads)."""
    root = session.frames.get(parent__isnull=True)
    return sum(
        u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
        for u in session.usage_records.filter(frame=root)
    )


def test_it_counts_one_of_our_runs_as_a_real_compaction(api, session):
    for i in range(6):
        messages = [
            {"role": "user", "content": f"Task {i}: change part {i}. " + "Details. " * 40},
            assistant(text("Working."), tool_use(f"e{i}", "Edit", file_path=f"p{i}.py")),
            tool_result(f"e{i}", "edited"),
            assistant(text(f"Done with part {i}. " + "Explanation. " * 30)),
        ]
        usage = {"input_tokens": 1_000 * (i + 1), "output_tokens": 200, "message_id": f"m{i}"}
        response = api.post(
            f"/sessions/{session.pk}/messages", {"messages": messages, "usage": usage}
        )
        assert response.status_code == 200, response.content
    run = compaction_request(session=session, strategy="summarize_oldest", keep_turns=2)
    compaction_execute(run_id=run.pk, summarizer=ExtractiveSummarizer())
    body = api.get(f"/sessions/{session.pk}/counterfactual", {"threshold": 0.01}).json()
    (point,) = body["compactions"]
    assert point["origin"] == "contextops" and point["id"] == str(run.pk)
    assert point["turn"] == 6 and point["turns_in_window"] == [[0, 5]]
    run.refresh_from_db()
    assert point["actual"]["summary_tokens"] == run.summary.tokens
    assert body["summary_ratio_source"] == "session"
    assert {p["policy"] for p in body["policies"]} == {"actual", *strategies()}


def test_it_says_what_our_runs_really_kept_summarized_and_removed(api, session, member_client):
    def turn_sent(i):
        messages = [
            {"role": "user", "content": f"Task {i}. " + "Details. " * 40},
            assistant(text(f"Done with part {i}. " + "Explanation. " * 30)),
        ]
        usage = {"input_tokens": 1_000 * (i + 1), "output_tokens": 200, "message_id": f"m{i}"}
        response = api.post(
            f"/sessions/{session.pk}/messages", {"messages": messages, "usage": usage}
        )
        assert response.status_code == 200, response.content

    for i in range(5):
        turn_sent(i)
    first = compaction_request(session=session, strategy="summarize_oldest", keep_turns=2)
    compaction_execute(run_id=first.pk, summarizer=ExtractiveSummarizer())
    for i in range(5, 7):
        turn_sent(i)
    second = compaction_request(session=session, strategy="truncate_at", keep_turns=3)
    compaction_execute(run_id=second.pk, summarizer=ExtractiveSummarizer())
    body = api.get(f"/sessions/{session.pk}/counterfactual").json()
    summarized, truncated = body["compactions"]
    # Each ran after the turn before its first later call: the turns it came before.
    assert (summarized["conversation_turn"], truncated["conversation_turn"]) == (5, 7)
    assert summarized["turns_in_window"] == [[0, 4]]
    assert summarized["actual"]["kept"] == [[3, 4]]
    assert summarized["actual"]["summarized"] == [[0, 2]]
    assert summarized["actual"]["removed"] == []
    assert truncated["turns_in_window"] == [[3, 6]]
    assert truncated["actual"]["kept"] == [[4, 6]]
    assert truncated["actual"]["summarized"] == []
    assert truncated["actual"]["removed"] == [[3, 3]]

    html = member_client.get(f"/sessions/{session.pk}/turns/counterfactual/").content.decode()
    rows = [row.split("</tr>")[0] for row in html.split('<tr class="cf-actual">')[1:]]
    assert len(rows) == 2 and "the summary only" not in html
    # The page numbers calls from 1, as each call's own page does.
    assert "<td>4–5</td><td>1–3</td><td>—</td>" in rows[0]
    assert "<td>5–7</td><td>—</td><td>4</td>" in rows[1]


def test_it_uses_the_documented_ratio_without_a_real_summary():
    turns = [cf.TurnPoint(i, 1_000) for i in range(20)]
    calls = [cf.Call(turn=i, input_tokens=5_000 + 1_000 * i, output_tokens=100) for i in range(20)]
    answer = cf.counterfactual(
        turns=turns,
        calls=calls,
        real=[],
        window_tokens=30_000,
        threshold=0.5,
        strategies=strategies(),
    )
    assert (answer.summary_ratio, answer.summary_ratio_source) == (
        cf.DEFAULT_SUMMARY_RATIO,
        "default",
    )
    assert answer.compactions == []
    assert answer.trigger is not None and answer.trigger.turn == 10  # 15,000 + 100 > 15,000
    summarize_oldest = next(p for p in answer.policies if p.policy == "summarize_oldest")
    assert summarize_oldest.fires[0].turn == 10
    assert summarize_oldest.tokens_sent < sum(c.input_tokens for c in calls)


@pytest.mark.parametrize("threshold", ["0", "1.5", "-1", "lots"])
def test_it_refuses_a_threshold_outside_the_window(api, session, threshold):
    response = api.get(f"/sessions/{session.pk}/counterfactual", {"threshold": threshold})
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"


def test_it_answers_404_for_another_organizations_session(api, other_api, session):
    assert other_api.get(f"/sessions/{session.pk}/counterfactual").status_code == 404
    assert api.get("/sessions/not-a-session/counterfactual").status_code == 404
    assert api.get(f"/sessions/{session.pk}/counterfactual").status_code == 200


def test_the_page_shows_the_curve_the_points_and_a_table_per_compaction(imported, member_client):
    response = member_client.get(f"/sessions/{imported.pk}/turns/counterfactual/?threshold=0.8")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="conv-occupancy"' in html and 'class="cf-uncompacted"' in html
    assert "Compaction before call 73" in html and "167,731" in html
    for name in strategies():
        assert f'<th scope="row">{name}</th>' in html
        assert f"{name} compacts after call" in html
    assert "the agent (actual)" in html
    assert (
        '<tr class="cf-actual"><th scope="row">the agent (actual)</th><td>the summary only</td><td>1–71</td>'
        in html
    )
    assert "Counterfactual" in member_client.get(f"/sessions/{imported.pk}/turns/").content.decode()


def chart_texts(html: str, group: str) -> list[str]:
    """The tick texts of the counterfactual chart's ``group`` (cf-axis-x or cf-axis-y)."""
    part = html.split(f'<g class="{group}">')[1].split("</g>")[0]
    return re.findall(r'<text class="conv-tick"[^>]*>([^<]*)</text>', part)


def test_the_chart_has_labelled_axes(imported, member_client):
    """Tokens up the left from 0 to a round top above the window (200,000) and the curve
    with the agent's compaction undone; the calls along the bottom as their pages number
    them, from 1, at round numbers. Where a subagent's calls took the numbers 100 to 104,
    the tick after 80 goes on the next main call, 105."""
    url = f"/sessions/{imported.pk}/turns/counterfactual/"
    html = member_client.get(url, {"threshold": "0.8"}).content.decode()
    assert chart_texts(html, "cf-axis-y") == ["0", "100,000", "200,000", "300,000"]
    assert chart_texts(html, "cf-axis-x") == ["1", "20", "40", "60", "80", "105", "120", "140"]
    assert ">Tokens in the window</text>" in html
    assert ">Model call (numbered as on the call pages)</text>" in html
    assert ">context window: 200,000 tokens</text>" in html
    assert ">our trigger, 80%: 160,000 tokens</text>" in html
    assert 'aria-labelledby="cf-chart-title" aria-describedby="cf-chart-desc"' in html
    assert "Across: model calls 1 to 1" in html.split('<desc id="cf-chart-desc">')[1]


def test_the_page_answers_htmx_with_the_report_only_and_explains_a_bad_threshold(
    imported, member_client
):
    url = f"/sessions/{imported.pk}/turns/counterfactual/"
    fragment = member_client.get(url, {"threshold": "0.5"}, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    html = fragment.content.decode()
    assert html.lstrip().startswith('<div id="cf-report">') and "<nav" not in html
    bad = member_client.get(url, {"threshold": "2"})
    assert bad.status_code == 422
    assert "The threshold must be a number above 0 and at most 1." in bad.content.decode()


def test_the_page_is_another_organizations_404(make_session, other_api, member_client):
    elsewhere = make_session(organization=other_api.organization)
    assert member_client.get(f"/sessions/{elsewhere.pk}/turns/counterfactual/").status_code == 404


def test_it_counts_the_calls_of_nested_frames_but_not_a_subagent_conversation(
    api, session, imported
):
    """An agent that pushes a frame for a subtask and records its calls there still fills
    the same context window: those calls are units and count in the tokens sent. An
    imported subagent's calls (their own branch, their own frame) do not."""
    root = session.frames.get()
    messages = [
        {"role": "user", "content": "Find the failing test. " + "Context. " * 40},
        assistant(text("Looking. " + "Notes. " * 30)),
    ]
    usage = {"input_tokens": 1_000, "output_tokens": 100, "message_id": "m0"}
    response = api.post(f"/sessions/{session.pk}/messages", {"messages": messages, "usage": usage})
    assert response.status_code == 200, response.content
    child = api.post(
        f"/sessions/{session.pk}/frames",
        {"parent_frame_id": str(root.pk), "goal": "Bisect", "budget": {"total": 50_000}},
    ).json()
    for i in range(3):
        body = {"input_tokens": 2_000 + i, "output_tokens": 50}
        response = api.post(f"/frames/{child['id']}/usage", body)
        assert response.status_code == 200, response.content
    body = api.get(f"/sessions/{session.pk}/counterfactual").json()
    assert body["unit"] == "call"
    assert [p["occupancy"] for p in body["curve"]] == [1_100, 2_050, 2_051, 2_052]
    actual = {p["policy"]: p for p in body["policies"]}["actual"]
    assert actual["tokens_sent"] == 1_000 + 2_000 + 2_001 + 2_002

    # The imported session's subagents recorded calls in their own frames: not units.
    subagent_calls = imported.usage_records.exclude(frame__parent__isnull=True).count()
    assert subagent_calls > 0
    body = api.get(f"/sessions/{imported.pk}/counterfactual").json()
    assert len(body["curve"]) == imported.usage_records.filter(frame__parent__isnull=True).count()
    actual = {p["policy"]: p for p in body["policies"]}["actual"]
    assert actual["tokens_sent"] == full_inputs(imported)


def sent_one_turn(api, session, i: int, system_tokens: int = 2_000) -> None:
    """One turn of one model call whose full input is the system prompt and tools plus
    a growing history."""
    messages = [
        {"role": "user", "content": f"Task {i}. " + "Details. " * 40},
        assistant(text(f"Done with part {i}. " + "Explanation. " * 30)),
    ]
    usage = {"input_tokens": system_tokens + 600 * (i + 1), "output_tokens": 100}
    response = api.post(
        f"/sessions/{session.pk}/messages",
        {"messages": messages, "usage": {**usage, "message_id": f"m{i}"}},
    )
    assert response.status_code == 200, response.content


def test_it_puts_our_runs_row_on_the_strategies_basis(api, session, member_client):
    """Our run measured the history it found and left, without the system prompt and
    tools; the strategies beside it are sized the same way, so a strategy that takes out
    what the run took out shows what the run left."""
    for i in range(12):
        sent_one_turn(api, session, i)
    run = compaction_request(session=session, strategy="truncate_at", keep_turns=10)
    compaction_execute(run_id=run.pk, summarizer=ExtractiveSummarizer())
    sent_one_turn(api, session, 12)
    run.refresh_from_db()
    assert run.final_tokens < run.original_tokens

    body = api.get(f"/sessions/{session.pk}/counterfactual").json()
    (point,) = body["compactions"]
    actual = point["actual"]
    assert actual["basis"] == "history"
    assert (actual["pre_tokens"], actual["tokens_after"]) == (
        run.original_tokens,
        run.final_tokens,
    )
    assert actual["next_input_tokens"] == 2_000 + 600 * 13
    assert actual["removed"] == [[0, 1]]
    assert actual["strategy"] == run.strategy == "truncate_at"
    truncate_at = next(s for s in point["strategies"] if s["strategy"] == "truncate_at")
    assert truncate_at["removed"] == actual["removed"]
    assert truncate_at["tokens_after"] == run.final_tokens

    html = member_client.get(f"/sessions/{session.pk}/turns/counterfactual/").content.decode()
    assert (
        f"Our run found a conversation history of <strong>{run.original_tokens:,}</strong> "
        f"tokens and left <strong>{run.final_tokens:,}</strong>"
    ) in html
    (row,) = [r.split("</tr>")[0] for r in html.split('<tr class="cf-actual">')[1:]]
    assert row.startswith('<th scope="row">our run: truncate_at (actual)</th>')
    assert row.endswith(f"<td>{run.final_tokens:,}</td>")
    strategy_row = html.split('<th scope="row">truncate_at</th>')[-1].split("</tr>")[0]
    assert strategy_row.endswith(f"<td>{run.final_tokens:,}</td>")


def test_its_uncompacted_curve_undoes_our_runs(api, session):
    for i in range(12):
        sent_one_turn(api, session, i)
    run = compaction_request(session=session, strategy="truncate_at", keep_turns=4)
    compaction_execute(run_id=run.pk, summarizer=ExtractiveSummarizer())
    for i in range(12, 14):
        sent_one_turn(api, session, i)
    run.refresh_from_db()
    taken_out = run.original_tokens - run.final_tokens
    assert taken_out > 0

    body = api.get(f"/sessions/{session.pk}/counterfactual").json()
    (point,) = body["compactions"]
    assert point["turn"] == 12
    added = [
        undone["occupancy"] - real["occupancy"]
        for real, undone in zip(body["curve"], body["uncompacted_curve"], strict=True)
    ]
    # Before the run the window was as it was; every call after it would have held what
    # the run took out as well.
    assert added == [0] * 12 + [taken_out] * 2


def test_it_numbers_calls_as_the_call_pages_do(api, imported, member_client):
    """The agent's compaction ran as a subagent call of its own, numbered on the call
    pages; the first main-conversation call after it has the number after that one."""
    compacted_at = Event.objects.get(session=imported, type=cf.COMPACTED_EVENT).created_at
    root = imported.frames.get(parent__isnull=True)
    first_after = (
        imported.usage_records.filter(frame=root, created_at__gt=compacted_at)
        .order_by("created_at")
        .first()
    )
    call_page = member_client.get(f"/sessions/{imported.pk}/calls/{first_after.pk}/")
    number = int(call_page.content.decode().split("<h1>Model call ")[1].split(" of ")[0])
    figures = file_figures(SPOTTER)
    assert number == figures["calls_before"] + 2 == 73  # the compaction's own call between

    body = api.get(f"/sessions/{imported.pk}/counterfactual").json()
    (point,) = body["compactions"]
    assert len(body["call_numbers"]) == len(body["curve"])
    assert body["call_numbers"][point["turn"]] == number
    assert body["call_numbers"][: point["turn"]] == list(range(1, number - 1))
    html = member_client.get(f"/sessions/{imported.pk}/turns/counterfactual/").content.decode()
    assert f"Compaction before call {number}" in html
    # The window before it: calls 1 to 71, all of them the main conversation's.
    assert '<th scope="row">the agent (actual)</th><td>the summary only</td><td>1–71</td>' in html


def compacted(session, strategy: str, keep_turns: int, summarizer=None):
    """One of our runs of ``session``, requested and run here, read back."""
    run = compaction_request(session=session, strategy=strategy, keep_turns=keep_turns)
    compaction_execute(run_id=run.pk, summarizer=summarizer or ExtractiveSummarizer())
    run.refresh_from_db()
    return run


def test_our_runs_ratio_is_its_summary_over_the_turns_it_summarized():
    """Our run found 14 turns of 1,000 tokens, summarized the oldest 10 into 1,000 tokens
    and kept 4: its summary is a tenth of what it replaced (10,000), not a fourteenth of
    all it found. A strategy that summarizes 4 turns then writes 400 tokens."""
    turns = [cf.TurnPoint(i, 1_000, turn=i) for i in range(14)]
    run = cf.RealCompaction(
        before_turn=14,
        pre_tokens=14_000,
        post_tokens=5_000,
        basis=cf.HISTORY,
        taken=frozenset(range(10)),
        origin="contextops",
        summary_tokens=1_000,
        replaced_tokens=10_000,
    )
    answer = cf.counterfactual(
        turns=turns,
        calls=[],
        real=[run],
        window_tokens=200_000,
        threshold=0.9,
        strategies=strategies(),
        unit="turn",
    )
    assert (answer.summary_ratio, answer.summary_ratio_source) == (0.1, "session")
    (point,) = answer.compactions
    assert point.actual.replaced_tokens == 10_000
    by_name = {s.strategy: s for s in point.strategies}
    # summarize_oldest keeps the newest 10: it summarizes turns 0-3, 4,000 tokens.
    assert by_name["summarize_oldest"].summarized == [[0, 3]]
    assert by_name["summarize_oldest"].summary_tokens == 400
    assert by_name["summarize_oldest"].tokens_after == 14_000 - 4_000 + 400


def test_it_takes_our_runs_ratio_over_what_each_summary_replaced(api, session, member_client):
    """Two runs of ours: the first summarizes turns 0-7, the second turns 8-13 and folds
    the first summary in. Each ratio is its summary over those tokens, as the turns
    list shows them; the turns each kept and truncated are not in it."""
    for i in range(12):
        sent_one_turn(api, session, i)
    first = compacted(session, "summarize_oldest", keep_turns=4)
    for i in range(12, 16):
        sent_one_turn(api, session, i)
    second = compacted(session, "summarize_oldest", keep_turns=2)
    sent_one_turn(api, session, 16)
    tokens = dict(session.turns.values_list("index", "tokens"))
    first_replaced = sum(tokens[i] for i in range(8))
    second_replaced = sum(tokens[i] for i in range(8, 14)) + first.summary.tokens
    assert first.original_tokens > first_replaced  # it found the kept turns too

    body = api.get(f"/sessions/{session.pk}/counterfactual").json()
    one, two = body["compactions"]
    assert one["actual"]["summarized"] == [[0, 7]] and two["actual"]["summarized"] == [[8, 13]]
    assert one["actual"]["replaced_tokens"] == first_replaced
    assert two["actual"]["replaced_tokens"] == second_replaced
    ratio = (first.summary.tokens / first_replaced + second.summary.tokens / second_replaced) / 2
    assert body["summary_ratio_source"] == "session"
    assert body["summary_ratio"] == round(ratio, 4)
    # summarize_oldest, keeping the newest 10 of the 12 turns, summarizes turns 0 and 1.
    estimate = next(s for s in one["strategies"] if s["strategy"] == "summarize_oldest")
    assert estimate["summarized"] == [[0, 1]]
    assert estimate["summary_tokens"] == round(ratio * (tokens[0] + tokens[1]))
    html = member_client.get(f"/sessions/{session.pk}/turns/counterfactual/").content.decode()
    assert (
        f"Its summary of {first.summary.tokens:,} tokens replaced {first_replaced:,}: "
        "the turns it summarized"
    ) in html


class CrashingSummarizer:
    name = "crashing"
    model = ""

    def summarize(self, turns):
        raise RuntimeError("the summary provider's client crashed")


def test_a_run_that_crashed_is_not_a_compaction(api, session):
    """A run that crashed took nothing out: it is no row, no point on the curve, no part
    of the ratio and no count. The run that completed after it is."""
    for i in range(12):
        sent_one_turn(api, session, i)
    crashed = compacted(session, "summarize_oldest", keep_turns=4, summarizer=CrashingSummarizer())
    assert crashed.status == "failed" and crashed.finished_at is not None
    assert crashed.original_tokens is None
    assert not session.turns.filter(summarized=True).exists()

    body = api.get(f"/sessions/{session.pk}/counterfactual").json()
    assert body["compactions"] == []
    actual = {p["policy"]: p for p in body["policies"]}["actual"]
    assert (actual["compactions"], actual["fires"]) == (0, [])
    assert body["uncompacted_curve"] == body["curve"]
    assert body["summary_ratio_source"] == "default"

    sent_one_turn(api, session, 12)
    done = compacted(session, "summarize_oldest", keep_turns=4)
    sent_one_turn(api, session, 13)
    body = api.get(f"/sessions/{session.pk}/counterfactual").json()
    (point,) = body["compactions"]
    assert point["id"] == str(done.pk) and point["turn"] == 13
    actual = {p["policy"]: p for p in body["policies"]}["actual"]
    assert actual["compactions"] == 1 and len(actual["fires"]) == 1
    added = [
        undone["occupancy"] - real["occupancy"]
        for real, undone in zip(body["curve"], body["uncompacted_curve"], strict=True)
    ]
    assert added == [0] * 13 + [done.original_tokens - done.final_tokens]
    assert body["summary_ratio"] == round(
        done.summary.tokens / point["actual"]["replaced_tokens"], 4
    )


class FailingSummarizer:
    name = "failing"
    model = ""

    def summarize(self, turns):
        return SummaryOutcome(
            text="Continue the conversation.", provider=self.name, failed=True, attempts=3
        )


def test_a_run_whose_summary_failed_took_turns_out_but_gives_no_ratio(api, session):
    """Summary generation failed every attempt, so the generic continuation message
    stands for the turns the run took out: it is a compaction, but that message is no
    summary to size the strategies' on."""
    for i in range(12):
        sent_one_turn(api, session, i)
    run = compacted(session, "summarize_oldest", keep_turns=4, summarizer=FailingSummarizer())
    assert run.status == "failed" and run.summary.failed and run.items_summarized == 8

    body = api.get(f"/sessions/{session.pk}/counterfactual").json()
    (point,) = body["compactions"]
    assert point["id"] == str(run.pk) and point["actual"]["summarized"] == [[0, 7]]
    assert point["actual"]["replaced_tokens"] is None
    assert body["summary_ratio_source"] == "default"
