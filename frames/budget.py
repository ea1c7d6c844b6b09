"""Token budget arithmetic (docs/concepts.md#budgets), as plain functions over plain numbers.

A frame's budget has a total, what it used, what it reserved for named purposes and
what it delegated to its children (``subcall_allocation``). Available is what is left,
never below zero. Pushing a child moves the child's total into the parent's
subcall allocation; popping it settles: the allocation drops by the child's total and
the parent's used rises by what the child used, so the child's unused tokens return,
what it reserved among them (a closed frame keeps no reservation).
"""

from dataclasses import dataclass
from typing import Any, Protocol

from contextops.errors import InsufficientTokens, Invalid

# How deep a frame's children may nest: a root frame's limit when its push names none,
# and the highest limit a push may name (a child may only lower its parent's).
DEFAULT_MAX_SUBFRAME_DEPTH = 8
MAX_SUBFRAME_DEPTH = 64


@dataclass(frozen=True)
class Budget:
    total: int
    used: int = 0
    reserved: int = 0
    subcall_allocation: int = 0

    def segments(self) -> list[dict[str, Any]]:
        """The stacked bar's parts: used, reserved, delegated to children, available.

        ``width`` is the part's length in the bar, capped so the parts fill 100 % (an
        overspent frame shows used at 100 %); ``share`` is its true share of the total,
        past 100 % when the frame overspent.
        """
        total = max(self.total, 1)
        parts = [
            ("used", "Used", self.used),
            ("reserved", "Reserved", self.reserved),
            ("delegated", "Delegated to children", self.subcall_allocation),
            ("available", "Available", self.available),
        ]
        segments, left = [], 100.0
        for css, label, tokens in parts:
            width = min(left, round(100 * tokens / total, 2))
            left = round(left - width, 2)  # no float residue like 58.67999999999999 on a page
            share = round(100 * tokens / total, 1)
            segments.append(
                {"css": css, "label": label, "tokens": tokens, "width": width, "share": share}
            )
        return segments

    @property
    def overrun(self) -> int:
        """How far the frame spent and committed past its total:
        ``used + reserved + subcall_allocation - total``, 0 when it stayed within it."""
        return max(0, self.used + self.reserved + self.subcall_allocation - self.total)

    @property
    def available(self) -> int:
        """total - used - reserved - subcall_allocation; 0 when the frame overspent."""
        return max(0, self.total - self.used - self.reserved - self.subcall_allocation)

    def require(self, amount: int) -> None:
        """Raise InsufficientTokens when ``amount`` does not fit in what is available."""
        if amount > self.available:
            raise InsufficientTokens(requested=amount, available=self.available)

    def reserve(self, amount: int) -> "Budget":
        """The budget with ``amount`` more reserved. Invalid (``amount``) for fewer than one
        token: setting nothing aside is no reservation; InsufficientTokens past available."""
        if amount < 1:
            raise Invalid("A reservation sets aside at least one token.", field="amount")
        self.require(amount)
        return Budget(self.total, self.used, self.reserved + amount, self.subcall_allocation)

    def allocate_for_subcall(self, amount: int) -> "Budget":
        self.require(amount)
        return Budget(self.total, self.used, self.reserved, self.subcall_allocation + amount)

    def settle_subcall(self, *, child_total: int, child_used: int) -> "Budget":
        """The parent's budget once a child of ``child_total`` that used ``child_used`` pops."""
        return Budget(
            self.total,
            self.used + child_used,
            self.reserved,
            max(0, self.subcall_allocation - child_total),
        )

    def record_usage(self, amount: int) -> "Budget":
        return Budget(self.total, self.used + amount, self.reserved, self.subcall_allocation)


def full_input_tokens(
    *, input_tokens: int, cache_creation_input_tokens: int = 0, cache_read_input_tokens: int = 0
) -> int:
    """Everything a model call read into its window: uncached, cache-written and cache-read
    input. Anthropic's ``input_tokens`` excludes both cache fields, so the full input is the
    sum of the three; cached reads are cheaper but still occupy the window (design note)."""
    return input_tokens + cache_creation_input_tokens + cache_read_input_tokens


def usage_tokens(
    *,
    input_tokens: int,
    output_tokens: int,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> int:
    """A model call's window occupancy, and what it spends of a frame's budget: its full
    input (``full_input_tokens``) plus its output. The one home of that formula."""
    return (
        full_input_tokens(
            input_tokens=input_tokens,
            cache_creation_input_tokens=cache_creation_input_tokens,
            cache_read_input_tokens=cache_read_input_tokens,
        )
        + output_tokens
    )


class TokenCounts(Protocol):
    """A model call's four counts, as a usage row or a parsed usage body carries them
    (read-only members, so that a frozen dataclass carries them too)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cache_creation_input_tokens(self) -> int: ...
    @property
    def cache_read_input_tokens(self) -> int: ...


# The four counts, in the order a usage body gives them, each with the session field
# that totals it.
USAGE_TOTALS = {
    "input_tokens": "input_tokens_total",
    "output_tokens": "output_tokens_total",
    "cache_creation_input_tokens": "cache_creation_tokens_total",
    "cache_read_input_tokens": "cache_read_tokens_total",
}


def token_counts(call: TokenCounts) -> dict[str, int]:
    """``call``'s four counts by name, in a usage body's order."""
    return {name: getattr(call, name) for name in USAGE_TOTALS}


def call_occupancy(call: TokenCounts) -> int:
    """``usage_tokens`` of ``call``'s own counts: everything it put in the window."""
    return usage_tokens(**token_counts(call))


def cost_weighted_tokens(
    *,
    input_tokens: int,
    output_tokens: int,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> float:
    """ "Effective" tokens for cost: cache writes at 1.25x, cache reads at a tenth."""
    return (
        input_tokens
        + output_tokens
        + 1.25 * cache_creation_input_tokens
        + 0.1 * cache_read_input_tokens
    )
