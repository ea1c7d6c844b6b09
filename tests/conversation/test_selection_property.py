"""Selection invariants over any number of turns and anchors (hypothesis)."""

from hypothesis import given
from hypothesis import strategies as st

from frames.conversation.selection import (
    PRIORITY_SCORES,
    TurnFacts,
    select_anchor_point,
    select_priority_based,
    select_summarize_oldest,
    select_truncate_at,
    turn_priority,
)

totals = st.integers(min_value=0, max_value=300)


@given(total=totals, data=st.data())
def test_anchor_point_splits_into_a_summarized_prefix_and_a_kept_suffix(total, data):
    anchors = (
        data.draw(st.lists(st.integers(min_value=0, max_value=max(0, total - 1)), max_size=20))
        if total
        else []
    )
    chosen = select_anchor_point(total, anchors)
    assert chosen.summarize + chosen.keep == list(range(total))
    assert chosen.remove == []
    assert chosen.keep[-min(3, total) :] == list(
        range(total - min(3, total), total)
    )  # the last three always
    older = [a for a in anchors if a < total - 3]
    if older:
        assert chosen.preserved_anchor == max(older) and chosen.keep[0] == max(older)
    else:
        assert chosen.preserved_anchor is None and len(chosen.keep) == min(3, total)
    assert 0.0 <= chosen.compression_estimate <= 1.0


@given(
    tokens=st.lists(st.integers(min_value=0, max_value=5_000), max_size=200),
    target=st.integers(min_value=1, max_value=50_000),
)
def test_summarize_oldest_keeps_a_suffix_within_the_target(tokens, target):
    chosen = select_summarize_oldest(tokens, target_tokens=target)
    assert chosen.summarize + chosen.keep == list(range(len(tokens)))
    if tokens:
        assert chosen.keep  # at least the newest turn
        kept = sum(tokens[i] for i in chosen.keep)
        assert len(chosen.keep) == 1 or kept <= target


@given(total=totals, keep=st.integers(min_value=0, max_value=400))
def test_truncate_at_removes_a_prefix(total, keep):
    chosen = select_truncate_at(total, keep)
    assert chosen.remove + chosen.keep == list(range(total))
    assert len(chosen.keep) == min(total, keep) and chosen.summarize == []


turn_facts = st.builds(
    TurnFacts,
    tokens=st.integers(min_value=0, max_value=5_000),
    anchor=st.booleans(),
    error=st.booleans(),
)


@given(
    turns=st.lists(turn_facts, max_size=200),
    target=st.integers(min_value=1, max_value=200_000),
    keep=st.integers(min_value=0, max_value=10),
)
def test_priority_based_summarizes_lower_priorities_first_and_stops_when_it_fits(
    turns, target, keep
):
    chosen = select_priority_based(turns, target_tokens=target, keep_recent=keep)
    assert sorted(chosen.keep + chosen.summarize) == list(range(len(turns)))
    assert chosen.remove == []
    recent_from = len(turns) - min(keep, len(turns))
    assert all(i < recent_from for i in chosen.summarize)  # critical turns always stay

    def rank(i):
        return (PRIORITY_SCORES[turn_priority(turns[i], recent=i >= recent_from)], i)

    kept_candidates = [i for i in chosen.keep if i < recent_from]
    if chosen.summarize and kept_candidates:
        # Everything summarized ranks below everything kept: lowest level, oldest, first.
        assert max(map(rank, chosen.summarize)) < min(map(rank, kept_candidates))
    kept = sum(turns[i].tokens for i in chosen.keep)
    if kept_candidates:
        assert kept <= target  # it stopped only because the window fits
    if chosen.summarize:
        # ...and not one turn later than needed.
        last = max(chosen.summarize, key=rank)
        assert kept + turns[last].tokens > target
