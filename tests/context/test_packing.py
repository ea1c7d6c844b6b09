"""The pure packer: levels in order, priorities, forced and excluded items, the budget."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frames.context import packing
from frames.context.packing import Breadcrumb, FactItem, PackInput, Segment, WorkingItem, pack
from tests.hypothesis_profiles import examples


def seg(i, tokens=100, priority="medium", **kw):
    kw.setdefault("content", "word " * tokens)
    return Segment(
        id=f"h{i}",
        kind="document",
        priority=priority,
        state=kw.pop("state", "loaded"),
        tokens=tokens,
        order=i,
        **kw,
    )


CRUMBS = [
    Breadcrumb("root", "Root goal", "waiting", 0),
    Breadcrumb("mid", "Middle", "waiting", 1),
    Breadcrumb("leaf", "Leaf", "active", 2),
]


def data(segments, budget=2000, **kw):
    return PackInput(
        budget=budget,
        brief_context="User: Ada; authority: employee",
        breadcrumbs=CRUMBS,
        segments=segments,
        **kw,
    )


def ids(items):
    return [i.id for i in items]


def test_it_refuses_a_budget_under_500():
    with pytest.raises(packing.BudgetTooSmall):
        pack(data([], budget=499))
    assert pack(data([], budget=500)).used <= 500


def test_it_keeps_everything_at_level_none_when_it_fits():
    result = pack(data([seg(0), seg(1, priority="low")]))
    assert result.level == "none"
    assert ids(result.segments) == ["h0", "h1"]
    assert all(i.form == "full" for i in result.segments)
    assert result.dropped == []


def test_it_trims_whitespace_at_the_light_level():
    spaced = Segment(
        id="h0",
        kind="document",
        priority="medium",
        state="loaded",
        content="a" + " " * 3000 + "b",
        tokens=1995,
        order=0,
    )
    result = pack(data([spaced]))
    assert result.level == "light"
    assert result.segments[0].text == "a b"
    assert result.segments[0].form == "light"
    assert result.used <= 2000


def test_it_uses_stored_summaries_of_older_segments_at_moderate():
    old = [seg(i, tokens=150, summary=f"summary {i}", summary_tokens=5) for i in range(14)]
    result = pack(data(old, budget=2000, min_compaction="moderate"))
    assert result.level == "moderate"
    forms = {i.id: i.form for i in result.segments}
    assert forms["h0"] == "summary" and forms["h3"] == "summary"
    assert forms["h13"] != "summary" and forms["h4"] != "summary"


def test_it_gives_an_item_that_does_not_fit_whole_its_summary_and_keeps_the_newest_whole():
    old = [seg(i, tokens=150, summary=f"summary {i}", summary_tokens=5) for i in range(14)]
    result = pack(data(old, budget=2000))
    forms = {i.id: i.form for i in result.segments}
    assert len(forms) == 14 and result.dropped == []
    assert all(forms[f"h{i}"] == "full" for i in range(2, 14))  # newest first, whole
    assert forms["h0"] == "summary"
    assert result.level == "moderate"  # the deepest form used
    assert result.used <= 2000


def test_it_drops_low_and_background_at_aggressive_unless_forced():
    segments = [
        seg(0, 700, "high"),
        seg(1, 70, "low"),
        seg(2, 70, "background"),
        seg(3, 300, "low", forced=True),
    ]
    result = pack(data(segments, budget=1500, min_compaction="aggressive"))
    assert result.level == "aggressive"
    assert ids(result.segments) == ["h3", "h0"]  # forced first, then by priority
    dropped = {(d.id, d.reason, d.level) for d in result.dropped}
    assert ("h1", "low_priority", "aggressive") in dropped
    assert ("h2", "low_priority", "aggressive") in dropped


def test_it_fills_by_priority_and_skips_what_does_not_fit_for_the_next():
    segments = [
        seg(0, 700, "high"),
        seg(1, 700, "low"),
        seg(2, 700, "background"),
        seg(3, 300, "low", forced=True),
        seg(4, 200, "background"),
    ]
    result = pack(data(segments, budget=1500))
    assert ids(result.segments) == ["h3", "h0", "h1", "h4"]  # forced, then by priority
    # h1 fits in no form: an excerpt of it takes a quarter of the room the ranking had,
    # as h4 (ranked below) still fits; h4 takes what is left, so the budget is used up.
    forms = {i.id: (i.form, i.tokens) for i in result.segments}
    room = 1500 - result.brief_tokens - sum(i.tokens for i in result.breadcrumbs) - 300
    assert forms["h0"] == ("full", 700) and forms["h1"] == ("excerpt", room // 4)
    assert forms["h4"][0] == "excerpt" and result.used == 1500
    assert result.level == "moderate"
    reasons = {d.id: d.reason for d in result.dropped}
    assert reasons == {"h2": "over_budget"}
    # The forced one is in before the ranking, unranked; the ranking starts at 1.
    assert [i.rank for i in result.segments] == [None, 1, 2, 3]
    assert sorted((d.rank, d.id) for d in result.dropped) == [(4, "h2")]


def test_it_keeps_only_critical_and_forced_at_critical():
    segments = [
        seg(0, 300, "critical"),
        seg(1, 900, "high"),
        seg(2, 900, "medium"),
        seg(3, 100, "medium", forced=True),
    ]
    facts = [
        FactItem("f1", "policy", "max 15%", 10, is_constraint=True),
        FactItem("f2", "note", "x", 10),
    ]
    result = pack(
        data(
            segments,
            budget=1000,
            facts=facts,
            working_set=[WorkingItem("w", "w: 1", 5)],
            min_compaction="critical",
        )
    )
    assert result.level == "critical"
    assert set(ids(result.segments)) == {"h0", "h3"}
    assert ids(result.facts) == ["f1"]
    assert result.working_set == []
    assert ids(result.breadcrumbs) == ["root", "leaf"]
    reasons = {d.id: d.reason for d in result.dropped}
    assert reasons["h1"] == reasons["h2"] == "not_critical"
    assert reasons["mid"] == "not_essential"


def test_it_refuses_a_budget_smaller_than_its_critical_content():
    with pytest.raises(packing.CriticalExceedsBudget) as refused:
        pack(data([seg(0, 5000, "critical"), seg(1, 3000, "critical")], budget=800))
    assert refused.value.code == "critical_exceeds_budget"
    assert refused.value.extra == {"critical_tokens": 8000, "budget_tokens": 800}


def test_critical_content_equal_to_the_budget_is_packed_and_one_token_more_is_refused():
    assert ids(pack(data([seg(0, 600, "critical")], budget=600)).segments) == ["h0"]
    with pytest.raises(packing.CriticalExceedsBudget) as refused:
        pack(data([seg(0, 601, "critical")], budget=600))
    assert refused.value.extra == {"critical_tokens": 601, "budget_tokens": 600}


def _bare(*segments, budget=600):
    return pack(PackInput(budget=budget, brief_context="", breadcrumbs=[], segments=list(segments)))


def test_an_item_that_fills_what_is_left_exactly_goes_in_whole_and_one_token_more_does_not():
    room = 600 - _bare().used
    exact = _bare(seg(0, room))
    assert [(i.id, i.form) for i in exact.segments] == [("h0", "full")]
    assert exact.used == 600
    over = _bare(seg(0, room + 1))
    assert [i.form for i in over.segments if i.id == "h0"] != ["full"]
    assert over.used <= 600


def test_it_keeps_every_critical_item_whole_and_cuts_the_rest():
    result = pack(
        data(
            [seg(0, 250, "critical"), seg(1, 250, "critical"), seg(2, 400, "high", forced=True)],
            budget=600,
        )
    )
    critical = sorted((i.id, i.tokens, i.form) for i in result.segments if i.id in ("h0", "h1"))
    assert critical == [("h0", 250, "full"), ("h1", 250, "full")]
    assert not {"h0", "h1"} & {d.id for d in result.dropped}
    assert result.used <= 600


def test_it_starts_at_min_compaction():
    result = pack(data([seg(0, 10, "low")], min_compaction="aggressive"))
    assert result.level == "aggressive"
    assert result.segments == []


def test_it_reports_skipped_handles_as_dropped():
    result = pack(data([seg(0)], skipped=[("hx", "excluded"), ("hy", "offline")]))
    assert {(d.id, d.reason) for d in result.dropped} == {("hx", "excluded"), ("hy", "offline")}


def test_it_puts_constraint_facts_before_other_facts_and_caps_facts_at_the_share():
    facts = [FactItem(f"f{i}", f"k{i}", "v", 100) for i in range(30)] + [
        FactItem("c", "policy", "max", 50, is_constraint=True)
    ]
    result = pack(data([], budget=2000, facts=facts, working_set=[WorkingItem("w", "w: v", 400)]))
    assert result.facts[0].id == "c"
    assert result.working_set and result.working_set[0].id == "w"
    assert any(d.reason == "over_budget" and d.section == "facts" for d in result.dropped)
    assert result.used <= 2000


def ranked_facts():
    """Three facts, ranked a, b, c without a query (newest first), of 300, 180 and 40 tokens."""
    return [FactItem("a", "a", "v", 300), FactItem("b", "b", "v", 180), FactItem("c", "c", "v", 40)]


def test_the_facts_share_keeps_room_for_a_lower_ranked_item_of_another_section():
    # 500 tokens after the brief and breadcrumbs: the facts may take 350 while the
    # segment, ranked below them (low priority), still wants room.
    result = pack(data([seg(0, 100, "low")], budget=531, facts=ranked_facts()))
    assert ids(result.facts) == ["a", "c"]
    assert ids(result.segments) == ["h0"]
    assert [(d.id, d.rank) for d in result.dropped] == [("b", 2)]


def test_the_facts_share_holds_nothing_back_when_no_other_item_wants_the_room():
    # Facts alone: holding "b" back would only let "c", ranked below it, take its room.
    result = pack(data([], budget=531, facts=ranked_facts()))
    assert ids(result.facts) == ["a", "b"]
    assert [(d.id, d.reason, d.rank) for d in result.dropped] == [("c", "over_budget", 3)]


def test_facts_held_back_by_the_share_come_back_before_the_facts_ranked_below_them():
    # Organizational policy ranks high: a, b, then the working-set item, then c. "b" is
    # held back while "w" wants room; once "w" is in, "b" is offered before "c".
    facts = ranked_facts()
    facts[0].governs = facts[1].governs = True
    working = [WorkingItem("w", "w: v", 20)]
    result = pack(data([], budget=531, facts=facts, working_set=working))
    assert ids(result.working_set) == ["w"]
    assert ids(result.facts) == ["a", "b"]
    assert [(d.id, d.rank) for d in result.dropped] == [("c", 4)]
    assert [i.rank for i in result.facts] == [1, 2] and result.working_set[0].rank == 3


LEVEL = st.sampled_from(packing.LEVELS)
PRIORITY = st.sampled_from(list(packing.PRIORITY_SCORE))
STATE = st.sampled_from(["loaded", "hot", "indexed", "cold"])


@st.composite
def segments(draw):
    n = draw(st.integers(0, 40))
    out = []
    for i in range(n):
        tokens = draw(st.integers(0, 6000))
        summary_tokens = draw(st.integers(0, 400))
        text = draw(st.text(max_size=300))
        out.append(
            Segment(
                id=f"h{i}",
                kind="document",
                priority=draw(PRIORITY),
                state=draw(STATE),
                content=text,
                tokens=tokens,
                summary=draw(st.sampled_from(["", "a short summary."])),
                summary_tokens=summary_tokens,
                order=i,
                forced=draw(st.booleans()),
            )
        )
    return out


# The level that leaves an item out for each such reason (an over_budget drop is at the
# level packing ran at, critical only for a required item cut to nothing).
LEFT_OUT_AT = {
    "low_priority": "aggressive",
    "not_critical": "critical",
    "not_essential": "critical",
}


@settings(max_examples=examples(300), deadline=None)
@given(
    budget=st.integers(500, 50_000),
    segs=segments(),
    facts=st.lists(st.tuples(st.integers(0, 3000), st.booleans()), max_size=40),
    working=st.lists(st.integers(0, 2000), max_size=10),
    brief=st.text(max_size=3000),
    goals=st.lists(st.text(max_size=400), max_size=8),
    level=LEVEL,
)
def test_it_never_exceeds_the_budget_and_its_breakdown_adds_up(
    budget, segs, facts, working, brief, goals, level
):
    if sum(s.tokens for s in segs if s.priority == "critical") > budget:
        with pytest.raises(packing.CriticalExceedsBudget):
            pack(PackInput(budget=budget, brief_context=brief, breadcrumbs=[], segments=segs))
        return
    result = pack(
        PackInput(
            budget=budget,
            brief_context=brief,
            breadcrumbs=[Breadcrumb(f"fr{i}", g, "active", i) for i, g in enumerate(goals)],
            segments=segs,
            facts=[
                FactItem(f"f{i}", f"k{i}", "value", t, is_constraint=c)
                for i, (t, c) in enumerate(facts)
            ],
            working_set=[WorkingItem(f"w{i}", "w", t) for i, t in enumerate(working)],
            min_compaction=level,
        )
    )
    assert 0 <= result.used <= budget
    assert sum(result.breakdown.values()) == result.used
    assert result.remaining == budget - result.used
    # The level is the deepest form used or the deepest level that left an item out,
    # never the floor alone.
    shown = [packing.FORM_LEVEL.get(i.form, "none") for i in result.included]
    shown += [LEFT_OUT_AT.get(d.reason, "none") for d in result.dropped]
    shown += [d.level for d in result.dropped if (d.reason, d.level) == ("over_budget", "critical")]
    if result.brief_context != brief:
        trimmed = result.brief_context == packing.light_trim(brief)
        shown.append("light" if trimmed else "critical")
    assert result.level == max(shown, key=packing.level_index, default="none")
    whole = {i.id for i in result.segments if i.form == "full"}
    for s in segs:
        if s.priority == "critical":
            assert s.id in whole  # critical is always in, and whole


@settings(max_examples=examples(300), deadline=None)
@given(
    budget=st.integers(500, 20_000),
    segs=segments(),
    facts=st.lists(st.integers(0, 3000), max_size=40),
    working=st.lists(st.integers(0, 2000), max_size=10),
    query=st.sampled_from(["", "word summary", "a"]),
)
def test_no_room_is_left_that_a_dropped_item_would_have_fitted_in(
    budget, segs, facts, working, query
):
    """Greedy with skips: whatever the budget left empty, every item dropped for the
    budget needed more than that in its smallest form (so a pack never leaves 10 % empty
    while something that fitted was dropped)."""
    segs = [s for s in segs if s.priority != "critical" and not s.forced]
    result = pack(
        PackInput(
            budget=budget,
            brief_context="brief",
            breadcrumbs=[],
            segments=segs,
            facts=[FactItem(f"f{i}", f"k{i}", "value", t) for i, t in enumerate(facts)],
            working_set=[WorkingItem(f"w{i}", "w", t) for i, t in enumerate(working)],
            query=query,
        )
    )
    by_id = {s.id: s for s in segs}
    tokens = {f"f{i}": t for i, t in enumerate(facts)} | {f"w{i}": t for i, t in enumerate(working)}
    for drop in result.dropped:
        if drop.reason != "over_budget":
            continue
        if drop.section == "segments":
            seg = by_id[drop.id]
            if seg.state == "indexed":  # paged out: shown by its summary only
                assert seg.summary_tokens > result.remaining
                continue
            smallest = min(
                seg.summary_tokens
                if seg.summary and seg.summary_tokens < seg.tokens
                else seg.tokens,
                packing._segment_tokens(seg, "shown"),
            )
        else:
            smallest = tokens[drop.id]
        assert smallest > result.remaining, (drop, result.remaining)
    assert sorted(i.rank for i in result.included if i.rank) == [
        i.rank for i in sorted(result.included, key=lambda i: i.rank or 0) if i.rank
    ]
