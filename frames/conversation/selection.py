"""Which turns a compaction keeps, summarizes or removes: plain functions, no database.

``select_anchor_point`` is seed 002 §1.C (``selectTurnsForCompaction``): the last three
turns are always kept; among the older turns the most recent anchor and everything after
it are kept; the rest is summarized. The other strategies are seed 000 §2's
summarize-oldest (keep the recent N) and truncate-at (keep the recent N, drop the rest
from the window without a summary). Positions are 0-based over the turns given, oldest
first.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

ALWAYS_KEEP_RECENT = 3
SUMMARIZE_OLDEST_KEEP = 10

ANCHOR_POINT = "anchor_point"
SUMMARIZE_OLDEST = "summarize_oldest"
TRUNCATE_AT = "truncate_at"
STRATEGIES = (ANCHOR_POINT, SUMMARIZE_OLDEST, TRUNCATE_AT)


@dataclass(frozen=True)
class Selection:
    keep: list[int]
    summarize: list[int]
    remove: list[int] = field(default_factory=list)
    preserved_anchor: int | None = None

    @property
    def compression_estimate(self) -> float:
        """Share of the turns that leave the window (summarized or removed); 0 for no turns."""
        total = len(self.keep) + len(self.summarize) + len(self.remove)
        return (len(self.summarize) + len(self.remove)) / total if total else 0.0


def select_anchor_point(
    total_turns: int, anchor_positions: Sequence[int], keep_recent: int = ALWAYS_KEEP_RECENT
) -> Selection:
    """Seed 002's selection over ``total_turns`` turns with anchors at ``anchor_positions``."""
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


COMPACTION_LEVELS = ("none", "light", "moderate", "aggressive", "critical")


def compaction_level(original_tokens: int, final_tokens: int) -> str:
    """Seed 000 §2's level named by how much was taken out of the window.

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


QUALITY_RATIO = 0.6


def compression_ratio(original_tokens: int, final_tokens: int) -> float:
    """Share of the tokens taken out of the window: 1 - final / original (0 for an empty window)."""
    if original_tokens <= 0:
        return 0.0
    return max(0.0, 1 - final_tokens / original_tokens)


def quality_warning(ratio: float) -> str:
    """The seed's quality gate: a warning below 60 % compression, else ""."""
    if ratio >= QUALITY_RATIO:
        return ""
    return (
        f"Compression ratio {ratio:.0%} is below {QUALITY_RATIO:.0%}: the window is still large; "
        "consider starting a fresh conversation."
    )
