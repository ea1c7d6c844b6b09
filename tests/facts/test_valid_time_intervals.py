"""The interval arithmetic of valid time, as properties over any order of writes."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from facts import supersession as rules
from facts.validtime import (
    Interval,
    holding_at,
    joins_timeline,
    succeed,
    timeline_problems,
    withdraw,
)

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

# A write: the day its statement starts to hold, relative to the first one (may be earlier).
starts = st.lists(st.integers(min_value=-30, max_value=400), min_size=1, max_size=40)


def _timeline(days: list[int]) -> tuple[list[Interval], list[tuple[datetime, datetime]]]:
    """The chain the writes make, deciding each with the rules the service asks; the
    writes that were refused (outdated) are returned beside it."""
    chain: list[Interval] = []
    outdated = []
    for i, day in enumerate(days):
        start = EPOCH + timedelta(days=day)
        new = rules.Version(key=f"k{i}", value=i, authority_rank=0, valid_from=start)
        head = (
            rules.Version(key="head", value=-1, authority_rank=0, valid_from=chain[-1].start)
            if chain
            else None
        )
        decision = rules.decide_implicit(new=new, current=head)
        if decision.outcome in (rules.CREATE, rules.SUPERSEDE):
            chain = succeed(chain, start)
        else:
            assert decision.outcome == rules.OUTDATED
            outdated.append((start, chain[-1].start))
    return chain, outdated


@given(starts)
def test_the_intervals_of_one_chain_never_overlap_and_leave_no_gap(days):
    chain, _ = _timeline(days)
    assert timeline_problems(chain) == []
    # Whole from its first start onwards: only the last interval is open.
    assert chain[-1].end is None
    assert all(interval.end is not None for interval in chain[:-1])


@given(starts, st.integers(min_value=-40, max_value=500))
def test_a_read_at_any_time_finds_at_most_one_version_and_exactly_one_after_the_start(days, at):
    chain, _ = _timeline(days)
    moment = EPOCH + timedelta(days=at, hours=7)
    found = holding_at(chain, moment)
    assert len(found) <= 1
    if moment >= chain[0].start:
        assert len(found) == 1
    else:
        assert found == []


@given(starts)
def test_a_write_that_starts_before_the_current_version_never_joins_the_timeline(days):
    chain, outdated = _timeline(days)
    for start, head_start in outdated:
        assert start < head_start
    # Every write either joined the chain or was refused; none was lost or counted twice.
    assert len(chain) + len(outdated) == len(days)


@given(starts, st.integers(min_value=0, max_value=400))
def test_withdrawing_the_head_closes_the_timeline_without_a_gap(days, later):
    chain, _ = _timeline(days)
    closed = withdraw(chain, chain[-1].start + timedelta(days=later))
    assert timeline_problems(closed) == []
    assert closed[-1].end is not None and closed[-1].end >= closed[-1].start


def test_a_retroactive_correction_splits_the_current_interval_and_keeps_what_came_before():
    march = datetime(2026, 3, 1, tzinfo=UTC)
    chain = succeed(succeed([], datetime(2026, 1, 1, tzinfo=UTC)), datetime(2026, 2, 1, tzinfo=UTC))
    corrected = succeed(chain, march)
    assert corrected[0] == chain[0]  # history before the open interval is untouched
    assert corrected[1] == Interval(datetime(2026, 2, 1, tzinfo=UTC), march)
    assert corrected[2] == Interval(march)
    assert holding_at(corrected, datetime(2026, 2, 20, tzinfo=UTC)) == [1]
    assert holding_at(corrected, datetime(2026, 3, 2, tzinfo=UTC)) == [2]


def test_the_arithmetic_refuses_a_version_starting_before_the_one_it_supersedes():
    chain = succeed([], datetime(2026, 2, 1, tzinfo=UTC))
    assert not joins_timeline(head_start=chain[-1].start, start=datetime(2026, 1, 1, tzinfo=UTC))
    try:
        succeed(chain, datetime(2026, 1, 1, tzinfo=UTC))
    except ValueError:
        pass
    else:
        raise AssertionError("a version starting before its predecessor was accepted")


def test_timeline_problems_name_a_gap_and_an_overlap():
    a, b, c = (datetime(2026, m, 1, tzinfo=UTC) for m in (1, 2, 3))
    assert timeline_problems([Interval(a, b), Interval(c)]) == ["gap between versions 1 and 2"]
    assert timeline_problems([Interval(a, c), Interval(b)]) == ["overlap between versions 1 and 2"]
    assert timeline_problems([Interval(a), Interval(b)]) == [
        "version 1 is open but version 2 follows it"
    ]


def test_any_order_of_stored_writes_keeps_every_chain_whole_and_reads_one_version(db):
    """The same properties through the real write path and the database's reads."""
    from django.db import transaction
    from hypothesis import settings

    from contextops.models import Organization
    from facts.models import Fact
    from facts.selectors.lookup import fact_timeline_problems, held_at
    from facts.services import fact_write

    organization = Organization.objects.create(name="Props")
    base = datetime(2025, 6, 1, tzinfo=UTC)

    @settings(max_examples=25, deadline=None)
    @given(st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=10))
    def run(days):
        with transaction.atomic():
            for i, day in enumerate(days):
                fact_write(
                    organization=organization,
                    key=f"price_{i}",
                    subject="price",
                    value=i,
                    source="user",
                    authority="employee",
                    valid_from=base + timedelta(days=day),
                )
            assert list(fact_timeline_problems()) == []
            first = base + timedelta(days=days[0])  # a later write starting earlier is outdated
            for probe in range(-3, 70, 2):
                at = base + timedelta(days=probe, hours=3)
                held = Fact.objects.filter(held_at(at), organization=organization, subject="price")
                assert held.count() == (1 if at >= first else 0)
            transaction.set_rollback(True)

    run()
