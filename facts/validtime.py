"""Valid time as plain functions, testable without a database.

Every version of a chain that held for a while has an interval ``[valid_from,
valid_until)``: it starts when the writer says the statement became true (its
``valid_from``, else its ``observed_at``, else the write time) and ends where the next
version starts (``valid_until`` is None while it is current). A later version may start
in the past, inside the current version's interval: that interval is split, the current
version ending where the new one starts, and nothing before that point changes. A write
that would start before the current version started never joins the chain's timeline
(the temporal rule: it is recorded as outdated), so the intervals of a chain stay
ordered, never overlap and leave no gap.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime | None = None  # None: still holds

    def holds_at(self, at: datetime) -> bool:
        return self.start <= at and (self.end is None or at < self.end)


def joins_timeline(*, head_start: datetime | None, start: datetime) -> bool:
    """True when a version starting at ``start`` may follow a head starting at
    ``head_start`` (None: the chain is empty): it starts no earlier than the head."""
    return head_start is None or start >= head_start


def succeed(chain: Sequence[Interval], start: datetime) -> list[Interval]:
    """``chain`` after a version starting at ``start`` superseded its head: the head now
    ends at ``start`` and the new version holds from it. ValueError when ``start`` is
    before the head started (the caller decides that such a write is outdated)."""
    if not chain:
        return [Interval(start)]
    head = chain[-1]
    if not joins_timeline(head_start=head.start, start=start):
        raise ValueError("a version cannot start before the version it supersedes")
    return [*chain[:-1], Interval(head.start, start), Interval(start)]


def withdraw(chain: Sequence[Interval], at: datetime) -> list[Interval]:
    """``chain`` after its head was withdrawn at ``at`` (never before it started)."""
    head = chain[-1]
    return [*chain[:-1], Interval(head.start, max(at, head.start))]


def holding_at(chain: Sequence[Interval], at: datetime) -> list[int]:
    """The positions of the versions of ``chain`` that hold at ``at``."""
    return [i for i, interval in enumerate(chain) if interval.holds_at(at)]


def timeline_problems(chain: Sequence[Interval]) -> list[str]:
    """What is wrong with the intervals of one chain, in version order: an interval that
    ends before it starts, an open interval that is not the last, and a gap or an overlap
    between one version's end and the next one's start. Empty when the timeline is whole."""
    problems = []
    for i, interval in enumerate(chain):
        if interval.end is not None and interval.end < interval.start:
            problems.append(f"version {i + 1} ends before it starts")
        if i + 1 < len(chain):
            following = chain[i + 1]
            if interval.end is None:
                problems.append(f"version {i + 1} is open but version {i + 2} follows it")
            elif interval.end != following.start:
                kind = "gap" if interval.end < following.start else "overlap"
                problems.append(f"{kind} between versions {i + 1} and {i + 2}")
    return problems
