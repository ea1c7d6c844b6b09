"""Which turns a compaction keeps, summarizes or removes: plain functions, no database.

``select_anchor_point`` is the anchor-point selection (docs/concepts.md#turn-selection):
the last three turns are always kept; among the older turns the most recent anchor and
everything after it are kept; the rest is summarized. The other strategies are
priority-based (turns ranked with the priority levels, docs/concepts.md#priorities, the
lowest summarized first until the window fits), summarize-oldest (keep the recent N) and truncate-at (keep
the recent N, drop the rest from the window without a summary). Positions are 0-based
over the turns given, oldest first.
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from frames.priorities import PRIORITY_SCORES
from frames.strategies import (
    ANCHOR_POINT,
    BUILTIN,
    COMPACTION_LEVELS,
    CONVERSATION,
    PRIORITY_BASED,
    SUMMARIZE_OLDEST,
    TRUNCATE_AT,
    Ask,
    Item,
    Selection,
    compaction_level,
    selection_checked,
    strategy_custom,
    strategy_names,
)

__all__ = [
    "ANCHOR_POINT",
    "COMPACTION_LEVELS",
    "PRIORITY_BASED",
    "PRIORITY_SCORES",
    "STRATEGIES",
    "SUMMARIZE_OLDEST",
    "TRUNCATE_AT",
    "Selection",
    "compaction_level",
]

# What a compaction request may ask for (the API schema, the dashboard form and the
# service check the same bounds).
MAX_TARGET_TOKENS = 100_000_000
MAX_KEEP_TURNS = 1_000_000

ALWAYS_KEEP_RECENT = 3
SUMMARIZE_OLDEST_KEEP = 10
QUALITY_RATIO = 0.6

# The built-in strategies; ``frames.strategies`` adds the ones registered in settings.
STRATEGIES = BUILTIN[CONVERSATION]


def strategies() -> tuple[str, ...]:
    """The strategies a conversation compaction may name, built-in first, then the ones
    registered in settings, in the order pages list them. Read them through here, never
    from ``STRATEGIES`` directly, so registered ones are offered everywhere at once."""
    return tuple(strategy_names(CONVERSATION))


def select_anchor_point(
    total_turns: int, anchor_positions: Sequence[int], keep_recent: int = ALWAYS_KEEP_RECENT
) -> Selection:
    """The anchor-point selection (docs/concepts.md#turn-selection) over ``total_turns`` turns
    with anchors at ``anchor_positions``."""
    always = min(keep_recent, total_turns)
    older_count = total_turns - always
    recent = list(range(older_count, total_turns))
    older_anchors = [p for p in anchor_positions if 0 <= p < older_count]
    if older_anchors:
        anchor = max(older_anchors)
        return Selection(
            keep=list(range(anchor, older_count)) + recent,
            summarize=list(range(anchor)),
            preserved_anchor=anchor,
        )
    return Selection(keep=recent, summarize=list(range(older_count)))


@dataclass(frozen=True)
class TurnFacts:
    """What the priority-based strategy needs to know of one turn."""

    tokens: int
    anchor: bool = False
    error: bool = False


def turn_priority(turn: TurnFacts, *, recent: bool) -> str:
    """The priority (docs/concepts.md#priorities) of a turn in the window.

    critical: one of the always-kept recent turns (never summarized); high: an anchor,
    the milestone of a fix or a finished task (docs/concepts.md#anchors); medium: a turn with a failed tool
    result, the problem the agent may still be working on; low: any other turn.
    """
    if recent:
        return "critical"
    if turn.anchor:
        return "high"
    if turn.error:
        return "medium"
    return "low"


def select_priority_based(
    turns: Sequence[TurnFacts],
    target_tokens: int | None = None,
    keep_recent: int = ALWAYS_KEEP_RECENT,
) -> Selection:
    """Summarize the lowest-priority turns first, oldest first within a level, until the
    kept turns fit in ``target_tokens``; critical turns (the newest ``keep_recent``) stay
    even when they alone exceed it.

    Without ``target_tokens`` the target is the quality bar (docs/compaction.md): the kept turns at
    most 40 % of the window's turns. ``preserved_anchor`` is the newest anchor kept
    outside the recent turns, or None.
    """
    total = len(turns)
    recent_from = total - min(keep_recent, total)
    priorities = [turn_priority(t, recent=i >= recent_from) for i, t in enumerate(turns)]
    kept_tokens = sum(t.tokens for t in turns)
    if target_tokens is None:
        target_tokens = int(kept_tokens * (1 - QUALITY_RATIO))
    candidates = sorted(range(recent_from), key=lambda i: (PRIORITY_SCORES[priorities[i]], i))
    summarized: set[int] = set()
    for i in candidates:
        if kept_tokens <= target_tokens:
            break
        summarized.add(i)
        kept_tokens -= turns[i].tokens
    keep = [i for i in range(total) if i not in summarized]
    anchors_kept = [i for i in keep if i < recent_from and turns[i].anchor]
    return Selection(
        keep=keep,
        summarize=sorted(summarized),
        preserved_anchor=max(anchors_kept) if anchors_kept else None,
    )


def select_summarize_oldest(
    turn_tokens: Sequence[int], keep_recent: int | None = None, target_tokens: int | None = None
) -> Selection:
    """Keep the newest ``keep_recent`` turns (default 10), or with ``target_tokens`` the newest
    turns whose tokens fit in it (at least one); summarize the older ones."""
    total = len(turn_tokens)
    if target_tokens is not None and keep_recent is None:
        kept, used = 0, 0
        for tokens in reversed(turn_tokens):
            if kept and used + tokens > target_tokens:
                break
            used += tokens
            kept += 1
    else:
        kept = min(total, SUMMARIZE_OLDEST_KEEP if keep_recent is None else keep_recent)
    cut = total - kept
    return Selection(keep=list(range(cut, total)), summarize=list(range(cut)))


def select_truncate_at(total_turns: int, keep_recent: int) -> Selection:
    """Keep the newest ``keep_recent`` turns; the older ones leave the window unsummarized."""
    cut = max(0, total_turns - max(0, keep_recent))
    return Selection(keep=list(range(cut, total_turns)), summarize=[], remove=list(range(cut)))


def compression_ratio(original_tokens: int, final_tokens: int) -> float:
    """Share of the tokens taken out of the window: 1 - final / original (0 for an empty window)."""
    if original_tokens <= 0:
        return 0.0
    return max(0.0, 1 - final_tokens / original_tokens)


def large_window_tokens(*, context_window_tokens: int, threshold: float) -> int:
    """Past this many tokens a compacted window is still large: what a compaction that met
    the quality bar would leave of a window at the trigger, ``(1 - QUALITY_RATIO) x
    threshold x context window`` (72,000 tokens of a 200,000-token window at 0.9)."""
    return int((1 - QUALITY_RATIO) * threshold * context_window_tokens)


def quality_warning(
    ratio: float, *, final_tokens: int | None = None, large_tokens: int | None = None
) -> str:
    """The quality gate: "" at or above ``QUALITY_RATIO`` compression, else the
    ratio. Only when the window left (``final_tokens``) is still large, above
    ``large_tokens`` (``large_window_tokens``), does it add the advice to start a
    fresh conversation: a small window that compressed little is no reason to. Without
    both figures the advice is left out."""
    if ratio >= QUALITY_RATIO:
        return ""
    warning = f"Compression ratio {ratio:.0%} is below {QUALITY_RATIO:.0%}"
    if final_tokens is None or large_tokens is None:
        return f"{warning}."
    if final_tokens <= large_tokens:
        return f"{warning}; the {final_tokens:,}-token window left is small."
    return (
        f"{warning}: the window is still large ({final_tokens:,} tokens); "
        "consider starting a fresh conversation."
    )


# Checking a summary (docs/concepts.md#summaries): the files the summarized turns worked on
# that the summary still names. Below this share (of at least SALIENT_MIN files) the run warns.
SUMMARY_COVERAGE = 0.5
SALIENT_MIN = 3
FILE_EXTENSIONS = (
    "py|pyi|js|mjs|cjs|ts|tsx|jsx|go|rs|java|kt|rb|php|cs|c|h|cc|cpp|hpp|swift|ex|exs|erl|"
    "scala|sql|sh|bash|zsh|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|lock|xml|html|css|"
    "scss|vue|svelte|proto|tf|dockerfile"
)
FILE_NAME = re.compile(
    rf"(?<![\w.-])(?:[\w.-]+/)*([\w-][\w.-]*\.(?:{FILE_EXTENSIONS}))(?![\w-])", re.IGNORECASE
)


def salient_files(texts: Iterable[str]) -> list[str]:
    """The file names (without folders) the texts mention, first mention first."""
    seen: dict[str, None] = {}
    for text in texts:
        for match in FILE_NAME.finditer(text):
            seen.setdefault(match.group(1), None)
    return list(seen)


def summary_quality_warning(summary: str, files: Sequence[str]) -> str:
    """A warning when the summary names fewer than ``SUMMARY_COVERAGE`` of ``files`` (the
    files the summarized turns worked on), else ""; fewer than ``SALIENT_MIN`` files are
    too few to judge. A summary that forgets what the agent was editing has lost the
    context the next turns need (docs/concepts.md#summaries)."""
    if len(files) < SALIENT_MIN:
        return ""
    text = summary.lower()
    missing = [f for f in files if f.lower() not in text]
    named = len(files) - len(missing)
    if named / len(files) >= SUMMARY_COVERAGE:
        return ""
    shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
    return (
        f"The summary names {named} of the {len(files)} files the summarized turns worked on "
        f"(missing: {shown}); it may have lost context the next turns need."
    )


def select(
    strategy: str,
    turns: Sequence["TurnFacts"],
    *,
    target_tokens: int | None = None,
    keep_turns: int | None = None,
) -> Selection:
    """The selection ``strategy`` makes over ``turns`` (oldest first), as a compaction run
    with these ``target_tokens`` and ``keep_turns`` would; truncate-at without
    ``keep_turns`` keeps summarize-oldest's default. ValueError for an unknown strategy."""
    if strategy == ANCHOR_POINT:
        anchors = [i for i, t in enumerate(turns) if t.anchor]
        return select_anchor_point(
            len(turns), anchors, keep_recent=keep_turns or ALWAYS_KEEP_RECENT
        )
    if strategy == PRIORITY_BASED:
        return select_priority_based(
            turns,
            target_tokens=target_tokens,
            keep_recent=ALWAYS_KEEP_RECENT if keep_turns is None else keep_turns,
        )
    if strategy == SUMMARIZE_OLDEST:
        return select_summarize_oldest(
            [t.tokens for t in turns], keep_recent=keep_turns, target_tokens=target_tokens
        )
    if strategy == TRUNCATE_AT:
        return select_truncate_at(
            len(turns), SUMMARIZE_OLDEST_KEEP if keep_turns is None else keep_turns
        )
    return select_registered(strategy, turns, target_tokens=target_tokens, keep_turns=keep_turns)


def select_registered(
    strategy: str,
    turns: Sequence["TurnFacts"],
    *,
    target_tokens: int | None = None,
    keep_turns: int | None = None,
    ids: Sequence[str] | None = None,
) -> Selection:
    """The selection a strategy registered in settings makes over ``turns``, each offered
    as an ``Item`` with its priority (docs/concepts.md#priorities; ``ids``: the items' ids, else positions),
    made safe by ``selection_checked``. ValueError for a name nobody registered."""
    custom = strategy_custom(strategy)
    if custom is None:
        raise ValueError(f"unknown strategy {strategy!r}")
    recent_from = len(turns) - min(ALWAYS_KEEP_RECENT, len(turns))
    items = [
        Item(
            position=i,
            id=ids[i] if ids is not None else str(i),
            tokens=t.tokens,
            priority=turn_priority(t, recent=i >= recent_from),
            kind="turn",
            anchor=t.anchor,
            error=t.error,
        )
        for i, t in enumerate(turns)
    ]
    ask = Ask(target_tokens=target_tokens, message_count=keep_turns, operation=CONVERSATION)
    return selection_checked(custom(items, ask), items)
