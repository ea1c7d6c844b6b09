"""Eviction order: attention first, then the session's policy."""

from datetime import UTC, datetime, timedelta

import pytest

from frames.context.eviction import Candidate, eviction_candidates, eviction_order

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def cand(
    id,
    *,
    weight=1.0,
    tokens=100,
    age=0,
    kind="document",
    category="",
    priority="medium",
    state="loaded",
):
    return Candidate(
        id, kind, category, priority, state, weight, tokens, T0 + timedelta(minutes=age)
    )


def order(cands, policy):
    return [c.id for c in eviction_order(cands, policy)]


def test_it_evicts_the_least_recently_used_first_under_lru():
    assert order([cand("new", age=9), cand("old", age=1), cand("mid", age=5)], "lru") == [
        "old",
        "mid",
        "new",
    ]


def test_it_evicts_the_largest_first_under_size_first():
    assert order(
        [cand("s", tokens=10), cand("l", tokens=900), cand("m", tokens=300)], "size_first"
    ) == ["l", "m", "s"]


def test_it_protects_relational_context_under_keep_relational():
    cands = [
        cand("soul", category="soul"),
        cand("tool", kind="tool_result", age=5),
        cand("code", category="code", age=6),
        cand("doc", age=1),
    ]
    assert order(cands, "keep_relational") == ["tool", "code", "doc", "soul"]


def test_it_protects_technical_context_under_keep_technical():
    cands = [
        cand("log", category="daily_log", age=5),
        cand("tool", kind="tool_call"),
        cand("user", category="user", age=6),
        cand("doc", age=1),
    ]
    assert order(cands, "keep_technical") == ["log", "user", "doc", "tool"]


@pytest.mark.parametrize("policy", ["lru", "size_first", "keep_relational", "keep_technical"])
def test_it_always_sorts_by_attention_first(policy):
    cands = [
        cand("hot", weight=3, tokens=9000, age=0, kind="tool_result", category="daily_log"),
        cand("cool", weight=0.5, tokens=1, age=99, category="soul"),
    ]
    assert order(cands, policy)[0] == "cool"


def test_it_never_offers_critical_or_inactive_handles():
    cands = [
        cand("crit", priority="critical"),
        cand("idx", state="indexed"),
        cand("cold", state="cold"),
        cand("hot", state="hot"),
    ]
    assert order(cands, "lru") == ["hot"]


def test_it_reads_candidates_from_the_frame_under_the_session_policy(session, frame, make_handle):
    session.eviction_policy = "size_first"
    small = make_handle(frame, tokens=10)
    big = make_handle(frame, tokens=500)
    make_handle(frame, tokens=900, state="indexed")
    assert [c.id for c in eviction_candidates(session=session, frame=frame)] == [
        str(big.id),
        str(small.id),
    ]
