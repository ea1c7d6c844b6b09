"""Compaction strategies: the built-in names and the ones an operator registers.

A strategy decides, over the items in a window (a frame's handles or a session's turns,
oldest first), which are kept, summarized or removed from the window. It is a plain
function and never touches the database; the compaction that calls it does the writes
(and never deletes anything: a summarized or removed item stays readable and can be
brought back).

A custom strategy is registered by name in ``settings.CONTEXTOPS_COMPACTION_STRATEGIES``
(``{"name": "dotted.path.to.function"}``) and has this signature::

    def my_strategy(items: Sequence[Item], ask: Ask) -> Selection

``items`` are oldest first (``item.position`` is the index in that list); the answer
names positions. Whatever it answers, an item whose priority is ``critical`` is kept,
a position it does not name is kept, and a position named twice counts once, in the
first of summarize, remove, keep. Both frame compaction (``POST /frames/{id}/compact``)
and conversation compaction (``POST /sessions/{id}/compactions``) use it; see
docs/compaction.md for an example.
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from contextops.errors import Invalid

from .priorities import PRIORITY_SCORES

logger = logging.getLogger(__name__)

ANCHOR_POINT = "anchor_point"
PRIORITY_BASED = "priority_based"
SUMMARIZE_OLDEST = "summarize_oldest"
TRUNCATE_AT = "truncate_at"

FRAME = "frame"
CONVERSATION = "conversation"
BUILTIN: dict[str, tuple[str, ...]] = {
    FRAME: (PRIORITY_BASED, SUMMARIZE_OLDEST, TRUNCATE_AT),
    CONVERSATION: (ANCHOR_POINT, PRIORITY_BASED, SUMMARIZE_OLDEST, TRUNCATE_AT),
}
# The longest name a compaction run can store.
MAX_NAME_LENGTH = 60

COMPACTION_LEVELS = ("none", "light", "moderate", "aggressive", "critical")


@dataclass(frozen=True)
class Item:
    """One item of the window as a strategy sees it.

    ``tokens``: what it costs in the window now; ``summary_tokens``: what it would cost
    summarized (at most ``tokens``); ``kind``: the handle's kind, or ``"turn"``;
    ``anchor`` and ``error``: a turn's anchor and failed tool result (False for handles).
    """

    position: int
    id: str
    tokens: int
    priority: str
    kind: str
    summary_tokens: int = 0
    anchor: bool = False
    error: bool = False


@dataclass(frozen=True)
class Ask:
    """What the caller asked for: ``target_tokens`` (the window should fit in it, None
    when not given), ``message_count`` (how many recent items to keep, None when not
    given) and ``operation`` (``"frame"`` or ``"conversation"``)."""

    target_tokens: int | None
    message_count: int | None
    operation: str
    # Tokens in the window that are not items (content summarized before): a strategy
    # adds them to the items' tokens to compare the window with ``target_tokens``.
    fixed_tokens: int = 0


@dataclass(frozen=True)
class Selection:
    keep: list[int]
    summarize: list[int]
    remove: list[int] = field(default_factory=list)
    preserved_anchor: int | None = None

    @property
    def compression_estimate(self) -> float:
        """Share of the items that leave the window (summarized or removed); 0 for none."""
        total = len(self.keep) + len(self.summarize) + len(self.remove)
        return (len(self.summarize) + len(self.remove)) / total if total else 0.0


Strategy = Callable[[Sequence[Item], Ask], Selection]


SUMMARIZE_OLDEST_KEEP = 10


def frame_priority_based(items: Sequence[Item], ask: Ask) -> Selection:
    """``priority_based`` (docs/concepts.md#compaction-levels): remove the lowest-priority items first (oldest first within a
    priority) until the window fits ``target_tokens``; critical items stay."""
    window = ask.fixed_tokens + sum(i.tokens for i in items)
    target = ask.target_tokens if ask.target_tokens is not None else window
    removed: list[int] = []
    candidates = sorted(
        (i for i in items if i.priority != "critical"),
        key=lambda i: (PRIORITY_SCORES.get(i.priority, 0), i.position),
    )
    for item in candidates:
        if window <= target:
            break
        removed.append(item.position)
        window -= item.tokens
    return Selection(
        keep=[i.position for i in items if i.position not in removed], summarize=[], remove=removed
    )


def frame_summarize_oldest(items: Sequence[Item], ask: Ask) -> Selection:
    """Keep the newest ``message_count`` items (10 when not given); summarize older ones,
    oldest first, until the window fits ``target_tokens`` (all of them without one)."""
    keep_recent = SUMMARIZE_OLDEST_KEEP if ask.message_count is None else ask.message_count
    older = list(items)[: max(0, len(items) - keep_recent)]
    window = ask.fixed_tokens + sum(i.tokens for i in items)
    summarized: list[int] = []
    for item in older:
        if ask.target_tokens is not None and window <= ask.target_tokens:
            break
        if item.priority == "critical" or item.summary_tokens >= item.tokens:
            continue
        summarized.append(item.position)
        window -= item.tokens - item.summary_tokens
    return Selection(
        keep=[i.position for i in items if i.position not in summarized], summarize=summarized
    )


def frame_truncate_at(items: Sequence[Item], ask: Ask) -> Selection:
    """Keep the newest ``message_count`` items; the older ones leave the window unsummarized."""
    cut = max(0, len(items) - max(0, ask.message_count or 0))
    removed = [i.position for i in list(items)[:cut] if i.priority != "critical"]
    return Selection(
        keep=[i.position for i in items if i.position not in removed], summarize=[], remove=removed
    )


FRAME_BUILTINS: dict[str, Strategy] = {
    PRIORITY_BASED: frame_priority_based,
    SUMMARIZE_OLDEST: frame_summarize_oldest,
    TRUNCATE_AT: frame_truncate_at,
}


def custom_strategies() -> dict[str, Strategy]:
    """The strategies registered in settings, by name; one whose path does not import is
    left out (and logged), so a typo in settings never breaks a compaction of another."""
    registered = getattr(settings, "CONTEXTOPS_COMPACTION_STRATEGIES", {}) or {}
    found: dict[str, Strategy] = {}
    for name, path in registered.items():
        if not name or len(name) > MAX_NAME_LENGTH:
            logger.error("compaction strategy name %r is empty or too long; skipped", name)
            continue
        try:
            function = import_string(path)
        except ImportError:
            logger.error("compaction strategy %r: cannot import %r; skipped", name, path)
            continue
        if callable(function):
            found[name] = function
    return found


def strategy_names(operation: str) -> list[str]:
    """Every strategy ``operation`` (``"frame"`` or ``"conversation"``) accepts: the
    built-in ones first, then the registered ones (a registered name that repeats a
    built-in one is ignored)."""
    builtin = BUILTIN[operation]
    return [*builtin, *(n for n in custom_strategies() if n not in builtin)]


def strategy_enum(operation: str) -> Callable[[dict[str, Any]], None]:
    """A pydantic ``json_schema_extra`` that lists ``operation``'s strategies as the field's
    ``enum`` in the OpenAPI schema, read when the schema is built (registered ones too);
    the service, not the schema, refuses an unknown name (422 with ``available``)."""

    def extra(schema: dict[str, Any]) -> None:
        schema["enum"] = strategy_names(operation)

    return extra


def strategy_require(name: str, operation: str) -> None:
    """Invalid (field ``strategy``, with ``available``) unless ``operation`` knows ``name``."""
    available = strategy_names(operation)
    if name not in available:
        raise Invalid(
            f"Unknown strategy {name!r}; available: {', '.join(available)}.",
            field="strategy",
            available=available,
        )


def strategy_custom(name: str) -> Strategy | None:
    """The registered strategy called ``name``, or None (a built-in or unknown name)."""
    return custom_strategies().get(name)


def selection_checked(selection: Selection, items: Sequence[Item]) -> Selection:
    """``selection`` made safe for ``items``: every position exactly once, critical ones
    and those not named kept, unknown positions ignored."""
    positions = {item.position: item for item in items}
    placed: dict[int, str] = {}
    for where, named in (
        ("summarize", selection.summarize),
        ("remove", selection.remove),
        ("keep", selection.keep),
    ):
        for position in named:
            if position in positions and position not in placed:
                placed[position] = where
    for position, item in positions.items():
        if item.priority == "critical" or position not in placed:
            placed[position] = "keep"
    anchor = selection.preserved_anchor
    return Selection(
        keep=sorted(p for p, w in placed.items() if w == "keep"),
        summarize=sorted(p for p, w in placed.items() if w == "summarize"),
        remove=sorted(p for p, w in placed.items() if w == "remove"),
        preserved_anchor=anchor if anchor is not None and placed.get(anchor) == "keep" else None,
    )


def compaction_level(original_tokens: int, final_tokens: int) -> str:
    """The compaction level (docs/concepts.md#compaction-levels) named by how much was taken
    out of the window.

    none: nothing; light: under 25 %; moderate: under 60 %; aggressive: under 90 %;
    critical: 90 % or more.
    """
    if original_tokens <= 0 or final_tokens >= original_tokens:
        return "none"
    reduction = 1 - final_tokens / original_tokens
    if reduction < 0.25:
        return "light"
    if reduction < 0.6:
        return "moderate"
    if reduction < 0.9:
        return "aggressive"
    return "critical"
