"""Fitting a context pack into a token budget: pure rules, dataclasses in and out.

The assembly of docs/concepts.md#context-packs, with its priorities and compaction levels
(docs/concepts.md#priorities, docs/concepts.md#compaction-levels). Every token figure
comes from storage (``tokens`` given on each item) or, for text made on this path (brief,
breadcrumbs, trimmed text), from ``estimate_tokens``; nothing here tokenizes.

1. **Required, whole**: ``brief_context`` (identity + environment), ``breadcrumbs`` (the
   frame's ancestry, root first), critical and forced (``include_handles``) segments and
   constraint facts. They go in first, at the shallowest level from ``min_compaction``
   on at which they fit; at the critical level only the root and current breadcrumbs
   stay, and if even that is too large, forced items, constraints, breadcrumbs and the
   brief are cut (never a critical segment: a budget smaller than critical content alone
   is refused).
2. **Ranked, greedy**: everything else (the frame's other loaded handles, the facts, the
   working set) in one ranking (``frames.context.ranking``: priority, attention, recency
   and, with a query, lexical, semantic and neighbour relevance). Each in turn takes its
   fullest form that still fits: ``full``, else ``light`` (whitespace collapsed, long
   text abbreviated head … tail), else its stored ``summary``, else (a handle of at
   least twice EXCERPT_MIN_TOKENS) an ``excerpt``: the passage that best matches the
   query, at most EXCERPT_SHARE of the ranked room, widened at the end by what the pack
   leaves; one that fits in no form is dropped (``over_budget``) and the next is
   tried. Facts take at most ``FACTS_SHARE``
   of the room left after the required items while others (a lower-ranked item of
   another section that still fits) wait for it; once none does, the facts held back
   are offered what is left, before the facts ranked below them, so no room is kept for
   nothing and the facts still go in their rank order.
3. ``resources`` (cold handles: discovered, not loaded, docs/concepts.md#resources) take
   what is left last, by name only.

Levels (docs/concepts.md#compaction-levels) name the forms: ``none`` (full), ``light`` (trimmed),
``moderate`` (a stored summary), ``aggressive``, ``critical`` (cut). ``min_compaction``
(or the pressure format's floor) sets the fullest form allowed: at ``light`` nothing is
full; at ``moderate`` segments older than the ``RECENT_SEGMENTS`` newest use their
summary; at ``aggressive`` every segment with a summary uses it and low and background
segments are left out (unless forced); at ``critical`` only required items stay. The
pack's ``level`` is the deepest form its items were given (``FORM_LEVEL``: a trimmed item
``light``, a summary or an excerpt ``moderate``, a cut one ``critical``) or the deepest level that left
an item out (``aggressive`` for low and background items, ``critical``): a floor that
compacted nothing is not reported.
"""

import functools
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import numpy as np

from contextops.errors import Conflict
from contextops.relevance import query_terms

from .excerpts import excerpt
from .ranking import PRIORITY_SCORE, Candidate, PassageIndex, Score, rank, score_row

MIN_BUDGET = 500
LEVELS = ("none", "light", "moderate", "aggressive", "critical")
SECTIONS = ("brief_context", "breadcrumbs", "facts", "working_set", "segments", "resources")
RECENT_SEGMENTS = 10
FACTS_SHARE = 0.7
# Light abbreviation: a string past LIGHT_MAX_CHARS keeps its head and tail and loses
# a quarter from the middle (minor trimming, not summarization).
LIGHT_MAX_CHARS = 2000
LIGHT_HEAD_SHARE = 0.60
LIGHT_TAIL_SHARE = 0.15
ELLIPSIS = " … "
# A handle that fits in no other form is shown as an excerpt (``frames.context.excerpts``)
# of at least EXCERPT_MIN_TOKENS, if it is at least twice that. In the ranking's turn an
# excerpt takes at most EXCERPT_SHARE of the room the ranking started with, so that the
# items ranked below it still find room; what the pack leaves at the end widens the
# excerpts, best-ranked first.
EXCERPT_MIN_TOKENS = 64
EXCERPT_SHARE = 0.25
_WHITESPACE = re.compile(r"[ \t]{2,}|\t")
_BLANK_LINES = re.compile(r"\n\s*\n+")


# The pack's format follows the session's pressure (docs/concepts.md#pressure). A denser format
# starts packing at a higher compaction level and lists resources more tersely.
FORMATS = ("verbose", "dense", "ultra_dense")
FORMAT_BY_PRESSURE = {
    "low": "verbose",
    "medium": "dense",
    "high": "ultra_dense",
    "critical": "ultra_dense",
}
FORMAT_MIN_LEVEL = {"verbose": "none", "dense": "light", "ultra_dense": "moderate"}


def pack_format(pressure_level: str) -> str:
    """``verbose`` at low pressure, ``dense`` at medium, ``ultra_dense`` at high and
    critical (an unknown level reads as low)."""
    return FORMAT_BY_PRESSURE.get(pressure_level, "verbose")


def format_min_level(pack_format_name: str, min_compaction: str) -> str:
    """The level packing starts at: the caller's ``min_compaction`` or the format's
    own floor, whichever is higher."""
    floor = FORMAT_MIN_LEVEL.get(pack_format_name, "none")
    return max(min_compaction, floor, key=LEVELS.index)


def estimate_tokens(text: str) -> int:
    """A token estimate for text made on the request path: a third of its UTF-8 bytes.

    Used only for the brief and breadcrumbs this module writes itself, so assembly
    never runs the tokenizer; stored items carry their own counts.
    """
    if not text:
        return 0
    return math.ceil(len(text.encode("utf-8")) / 3)


def light_trim(text: str) -> str:
    """Collapse runs of spaces and blank lines; past LIGHT_MAX_CHARS keep head … tail (3/4 of it).

    A frame's handles are packed again and again as the agent works: the trimmed text of
    each short one is kept (TRIM_CACHE_CHARS, TRIM_CACHE_SIZE), so a pack trims only what
    is new since the last."""
    if len(text) <= TRIM_CACHE_CHARS:
        return _light_trim_kept(text)
    return _light_trim(text)


def _light_trim(text: str) -> str:
    trimmed = _BLANK_LINES.sub("\n", _WHITESPACE.sub(" ", text)).strip()
    if len(trimmed) > LIGHT_MAX_CHARS:
        head = int(len(trimmed) * LIGHT_HEAD_SHARE)
        tail = int(len(trimmed) * LIGHT_TAIL_SHARE)
        trimmed = trimmed[:head].rstrip() + ELLIPSIS + trimmed[-tail:].lstrip()
    return trimmed


# At most TRIM_CACHE_SIZE texts of up to TRIM_CACHE_CHARS characters each (and their
# trimmed forms): a few megabytes a process at worst.
TRIM_CACHE_CHARS, TRIM_CACHE_SIZE = 4_000, 4_096
_light_trim_kept = functools.lru_cache(maxsize=TRIM_CACHE_SIZE)(_light_trim)


def scaled_tokens(tokens: int, original: str, shorter: str) -> int:
    """The stored count scaled by how much of the text is left (never more than ``tokens``)."""
    if not original or len(shorter) >= len(original):
        return tokens
    return min(tokens, math.ceil(tokens * len(shorter) / len(original)) + 1)


def cut_to_tokens(text: str, tokens: int, limit: int) -> str:
    """``text`` cut to about ``limit`` of its ``tokens`` (proportional to characters)."""
    if tokens <= limit:
        return text
    if limit <= 1:
        return ""
    keep = max(0, math.floor(len(text) * (limit - 1) / tokens) - len(ELLIPSIS))
    return text[:keep].rstrip() + ELLIPSIS.rstrip()


@dataclass(slots=True)  # a large pack makes thousands: no frozen checks
class Segment:
    """A context handle as the packer sees it; ``order`` grows with age (0 = oldest)."""

    id: str
    kind: str
    priority: str
    state: str
    content: str
    tokens: int
    summary: str = ""
    summary_tokens: int = 0
    order: int = 0
    forced: bool = False  # in include_handles
    attention: float = 1.0
    vector: np.ndarray | None = None  # its embedding, when it has one

    @property
    def required_at_critical(self) -> bool:
        return self.forced or self.priority == "critical"


@dataclass(slots=True)  # a large pack makes thousands: no frozen checks
class FactItem:
    """A fact as the packer sees it: ``value`` is the text packed, ``extra`` its own fields.

    ``stored``: what the item stands for when its text is made on first use (``text()``)
    and its fields on first use (``fields()``), any object with ``text()`` and
    ``fields()``; the facts a pack drops unread (at the critical level, every one that
    is not a constraint) are then never rendered, and only the facts a pack holds have
    their fields made."""

    id: str
    key: str
    value: str
    tokens: int
    is_constraint: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    stored: Any = None
    subject: str = ""
    governs: bool = False  # organizational policy: ranks as high priority
    newness: int | None = None  # grows with recency (default: the order given, first newest)
    vector: np.ndarray | None = None

    def text(self) -> str:
        """``value``, made from ``stored`` the first time."""
        if not self.value and self.stored is not None:
            self.value = self.stored.text()
        return self.value

    def fields(self) -> dict[str, Any]:
        """``extra``, made from ``stored`` the first time."""
        stored = self.stored
        if stored is not None:
            self.text()
            self.extra, self.stored = stored.fields(), None
        return self.extra


@dataclass(frozen=True)
class WorkingItem:
    key: str
    value: str
    tokens: int
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class Breadcrumb:
    frame_id: str
    goal: str
    status: str
    depth: int

    @property
    def text(self) -> str:
        return f"[{self.depth}] {self.goal} ({self.status})"


@dataclass(frozen=True)
class ResourceName:
    """A cold (discovered, not loaded) handle, listed by name only; ``tokens`` is what
    the name costs in the pack, not what the resource would cost loaded."""

    id: str
    name: str
    tokens: int


@dataclass(frozen=True)
class PackInput:
    budget: int
    brief_context: str
    breadcrumbs: list[Breadcrumb]
    segments: list[Segment]
    facts: list[FactItem] = field(default_factory=list)
    working_set: list[WorkingItem] = field(default_factory=list)
    min_compaction: str = "none"
    # Segments left out before packing (excluded, offline, cold): (id, reason).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    resources: list[ResourceName] = field(default_factory=list)
    query: str = ""
    query_vector: np.ndarray | None = None
    # Where packing keeps what it works out of ``segments`` alone, to use again while
    # they are these same segments (the caller's to give, and to drop with them).
    memo: dict[Any, Any] | None = None


Source = TypeVar("Source", Breadcrumb, Segment, FactItem, WorkingItem, ResourceName)


@dataclass(slots=True)  # a large pack makes thousands: no frozen checks
class PackedItem(Generic[Source]):
    section: str
    id: str
    tokens: int
    # full | light | summary | excerpt (the passage that matches) | truncated (cut to fit)
    # | name (a resource)
    form: str
    text: str
    source: Source  # the input dataclass
    rank: int | None = None  # its place in the pack's one ranking (1 = first)
    score: list[float] | None = None  # [total, *parts] (frames.models.context.SCORE_PARTS)
    reason: str = ""  # why it is in: critical, forced, constraint, essential, ranked, cold
    older_than: str | None = None  # the newer near-duplicate it is older than


@dataclass(slots=True)  # a large pack makes thousands: no frozen checks
class Dropped:
    section: str
    id: str
    reason: str
    level: str
    tokens: int = 0
    rank: int | None = None
    score: list[float] | None = None  # as PackedItem.score
    older_than: str | None = None


@dataclass
class PackResult:
    budget: int
    level: str
    brief_context: str
    breadcrumbs: list[PackedItem[Breadcrumb]]
    segments: list[PackedItem[Segment]]
    facts: list[PackedItem[FactItem]]
    working_set: list[PackedItem[WorkingItem]]
    dropped: list[Dropped]
    brief_tokens: int
    resources: list[PackedItem[ResourceName]] = field(default_factory=list)

    @property
    def breakdown(self) -> dict[str, int]:
        return {
            "brief_context": self.brief_tokens,
            "breadcrumbs": sum(i.tokens for i in self.breadcrumbs),
            "facts": sum(i.tokens for i in self.facts),
            "working_set": sum(i.tokens for i in self.working_set),
            "segments": sum(i.tokens for i in self.segments),
            "resources": sum(i.tokens for i in self.resources),
        }

    @property
    def included(self) -> list[PackedItem[Any]]:
        """Every item the pack holds, section by section (brief excepted)."""
        return [
            *self.breadcrumbs,
            *self.segments,
            *self.facts,
            *self.working_set,
            *self.resources,
        ]

    @property
    def used(self) -> int:
        return sum(self.breakdown.values())

    @property
    def remaining(self) -> int:
        return self.budget - self.used


class BudgetTooSmall(ValueError):
    pass


class CriticalExceedsBudget(Conflict):
    """Critical content alone is larger than the budget: critical is always included
    whole (docs/concepts.md#priorities): no pack can be made; the caller needs a larger budget."""

    def __init__(self, *, critical_tokens: int, budget_tokens: int) -> None:
        super().__init__(
            "critical_exceeds_budget",
            f"Critical content alone takes {critical_tokens:,} tokens, more than the budget "
            f"of {budget_tokens:,}; critical items are never cut or dropped, so ask for a "
            "larger budget (or lower an item's priority).",
            critical_tokens=critical_tokens,
            budget_tokens=budget_tokens,
        )


LEVEL_INDEX = {level: i for i, level in enumerate(LEVELS)}
MODERATE, AGGRESSIVE, CRITICAL = (
    LEVEL_INDEX["moderate"],
    LEVEL_INDEX["aggressive"],
    LEVEL_INDEX["critical"],
)


def level_index(level: str) -> int:
    return LEVEL_INDEX.get(level, 0)


# id(text) -> the text's light form (text, tokens, form), for one packing's long texts.
FormCache = dict[int, tuple[str, int, str]]


def _render_text(
    text: str, tokens: int, level: str, cache: FormCache | None = None
) -> tuple[str, int, str]:
    """``text`` (of ``tokens``) as ``level`` shows it: (text, tokens, form)."""
    if level == "none":
        return text, tokens, "full"
    if len(text) <= TRIM_CACHE_CHARS:
        return _light_form_kept(text, tokens)
    if cache is None:
        return _light_form(text, tokens)
    cached = cache.get(id(text))
    if cached is None:
        cached = cache[id(text)] = _light_form(text, tokens)
    return cached


def _light_form(text: str, tokens: int) -> tuple[str, int, str]:
    trimmed = _light_trim(text)
    if trimmed == text:
        return text, tokens, "full"
    return trimmed, scaled_tokens(tokens, text, trimmed), "light"


# A frame's texts are offered pack after pack: the light form of each short one (its
# text and count) is kept, as ``light_trim`` keeps the trimmed text.
_light_form_kept = functools.lru_cache(maxsize=TRIM_CACHE_SIZE)(_light_form)


def _segment_form(segment: Segment, index: int, newest_order: int) -> str | None:
    """How the level at ``index`` shows ``segment``: None (dropped), ``summary``,
    ``whole`` (its content as stored) or ``shown`` (its content at a trimming level).
    The item rendered for one form is the same at every level that picks it."""
    return _segment_forms(segment, newest_order)[index]


def _segment_forms(segment: Segment, newest_order: int) -> tuple[str | None, ...]:
    """``_segment_form`` at every level, in LEVELS' order."""
    return _forms(
        segment.priority,
        segment.forced,
        segment.state,
        bool(segment.summary),
        segment.summary_tokens < segment.tokens,
        segment.order <= newest_order - RECENT_SEGMENTS,
    )


# A frame's segments fall into a few dozen kinds (priority, state, summary, age): the
# forms of each kind are worked out once, not once per segment and level.
@functools.lru_cache(maxsize=1024)
def _forms(
    priority: str, forced: bool, state: str, summarized: bool, summary_smaller: bool, old: bool
) -> tuple[str | None, ...]:
    critical = priority == "critical"
    has_summary = summarized and summary_smaller
    forms: list[str | None] = []
    for index in range(len(LEVELS)):
        if index >= AGGRESSIVE and not forced and priority in ("low", "background"):
            forms.append(None)
            continue
        if index >= CRITICAL and not (forced or critical):
            forms.append(None)
            continue
        use_summary = (
            has_summary
            and not critical
            and (state == "indexed" or (index >= MODERATE and old) or index >= AGGRESSIVE)
        )
        if use_summary or (state == "indexed" and summarized and not critical):
            forms.append("summary")
        else:
            # Critical content is always whole: no level trims it.
            forms.append("whole" if critical or index == 0 else "shown")
    return tuple(forms)


def _segment_item(
    segment: Segment, form: str, cache: FormCache | None = None
) -> PackedItem[Segment]:
    if form == "summary":
        return PackedItem(
            "segments", segment.id, segment.summary_tokens, "summary", segment.summary, segment
        )
    text, tokens, shown = _render_text(
        segment.content, segment.tokens, "none" if form == "whole" else "light", cache
    )
    return PackedItem("segments", segment.id, tokens, shown, text, segment)


def _segment_tokens(segment: Segment, form: str, cache: FormCache | None = None) -> int:
    """What ``_segment_item(segment, form).tokens`` is, without building the item."""
    if form == "summary":
        return segment.summary_tokens
    if form == "whole":
        return segment.tokens
    return _render_text(segment.content, segment.tokens, "light", cache)[1]


def render_segment(
    segment: Segment, level: str, newest_order: int, cache: FormCache | None = None
) -> PackedItem[Segment] | None:
    """``segment`` as ``level`` shows it, or None when the level drops it.

    ``cache`` (optional) keeps light-trimmed texts between levels of one packing.
    """
    form = _segment_form(segment, LEVEL_INDEX.get(level, 0), newest_order)
    return None if form is None else _segment_item(segment, form, cache)


def _breadcrumbs_at(
    crumbs: list[Breadcrumb], level: str
) -> tuple[list[PackedItem[Breadcrumb]], list[Breadcrumb]]:
    """(kept, dropped): at critical only the root and the current frame are essential."""
    kept_crumbs = crumbs
    if level == "critical" and len(crumbs) > 2:
        kept_crumbs = [crumbs[0], crumbs[-1]]
    items = []
    for crumb in kept_crumbs:
        text = crumb.text if level == "none" else light_trim(crumb.text)
        form = "full" if text == crumb.text else "light"
        items.append(
            PackedItem("breadcrumbs", crumb.frame_id, estimate_tokens(text), form, text, crumb)
        )
    dropped = [c for c in crumbs if c not in kept_crumbs]
    return items, dropped


FORM_LEVEL = {
    "full": "none",
    "light": "light",
    "summary": "moderate",
    "excerpt": "moderate",
    "truncated": "critical",
}


def _candidate_forms(segment: Segment, floor: int, newest_order: int) -> tuple[str, ...] | str:
    """The forms a ranked (neither critical nor forced) segment may take at the ``floor``
    level, fullest first, or the reason it is left out there."""
    has_summary = bool(segment.summary) and segment.summary_tokens < segment.tokens
    if floor >= CRITICAL:
        return "not_critical"
    if floor >= AGGRESSIVE and segment.priority in ("low", "background"):
        return "low_priority"
    if segment.state == "indexed":
        return ("summary",) if segment.summary else "indexed_without_summary"
    old = segment.order <= newest_order - RECENT_SEGMENTS
    if floor >= AGGRESSIVE or (floor >= MODERATE and old):
        forms: tuple[str, ...] = ("summary",) if has_summary else ("light",)
    else:
        shorter = ("light", "summary") if has_summary else ("light",)
        forms = ("full", *shorter) if floor == 0 else shorter
    # Only text worth cutting: not a short one, nor one whose content is far shorter than
    # its count says (a reference standing for a file: a character a token at the least).
    worth_cutting = segment.tokens >= 2 * EXCERPT_MIN_TOKENS
    if "light" in forms and worth_cutting and len(segment.content) >= segment.tokens:
        forms += ("excerpt",)
    return forms


def _required_segment(
    segment: Segment, index: int, newest_order: int, cache: FormCache
) -> PackedItem[Segment]:
    """A critical or forced segment as the level at ``index`` shows it (never dropped:
    a forced segment's level form, or its fullest trimmed form where a level drops it)."""
    form = _segment_forms(segment, newest_order)[index] or "shown"
    return _segment_item(segment, form, cache)


T = TypeVar("T")


def _kept(data: PackInput, key: Any, make: Callable[[], T]) -> T:
    """``make()``, a value of ``data.segments`` alone: kept in ``data.memo`` under
    ``key`` when the caller gave a memo, and taken from it the next time."""
    if data.memo is None:
        return make()
    if key not in data.memo:
        data.memo[key] = make()
    value: T = data.memo[key]
    return value


def _fill(
    budget: int, data: PackInput, floor: int, cache: FormCache
) -> tuple[str, int, list[PackedItem[Any]], list[Dropped], int]:
    """The brief and the required items at the shallowest level from ``floor`` on at
    which they fit (cut at the critical level when none does): (brief text, brief tokens,
    items, drops, level index)."""
    newest = _kept(data, "newest", lambda: max((s.order for s in data.segments), default=0))
    required_segments = _kept(
        data, "required", lambda: [s for s in data.segments if s.required_at_critical]
    )
    constraints = [f for f in data.facts if f.is_constraint]
    last = len(LEVELS) - 1
    for index in range(floor, len(LEVELS)):
        level = LEVELS[index]
        brief_text = data.brief_context if level == "none" else light_trim(data.brief_context)
        brief_tokens = estimate_tokens(brief_text)
        crumbs, crumbs_dropped = _breadcrumbs_at(data.breadcrumbs, level)
        segments = [_required_segment(s, index, newest, cache) for s in required_segments]
        facts = [_render_fact(f, level, cache) for f in constraints]
        items: list[PackedItem[Any]] = [*crumbs, *segments, *facts]
        if brief_tokens + sum(i.tokens for i in items) <= budget or index == last:
            break
    drops = [Dropped("breadcrumbs", c.frame_id, "not_essential", level) for c in crumbs_dropped]
    if brief_tokens + sum(i.tokens for i in items) > budget:
        brief_text, brief_tokens, crumbs, segments, facts, cut_drops = _cut_to_fit(
            budget, level, brief_text, brief_tokens, crumbs, segments, facts
        )
        items = [*crumbs, *segments, *facts]
        drops += cut_drops
    return brief_text, brief_tokens, items, drops, index


Forms = tuple[str, ...] | str  # the forms a candidate may take, fullest first, or why none
Sizes = tuple[int, ...] | None  # the token counts of those forms (None: it has none)
Prepared = tuple[list[Candidate], list[Any], list[Forms], list[Sizes]]


def _candidates(data: PackInput, floor: int, cache: FormCache) -> Prepared:
    """What the ranking reads of every non-required item, the items, their forms and
    the token counts of those forms. The segments' part is kept in ``data.memo`` (per
    ``floor``) when the caller gave one: a frame's handles unchanged since its last pack
    are not prepared again."""
    prepared = _kept(data, floor, lambda: _segment_candidates(data.segments, floor, cache))
    candidates, sources, forms, sizes = (list(part) for part in prepared)
    fact_forms: tuple[str, ...] = ("full", "light") if floor == 0 else ("light",)
    facts = [f for f in data.facts if not f.is_constraint]
    for position, fact in enumerate(facts):
        candidates.append(
            Candidate(
                "facts",
                fact.id,
                "high" if fact.governs else "medium",
                fact.text() if data.query else "",
                fact.newness if fact.newness is not None else len(facts) - position,
                vector=fact.vector,
                group=f"subject:{fact.subject}" if fact.subject else "",
            )
        )
        sources.append(fact)
    for position, entry in enumerate(data.working_set):
        candidates.append(
            Candidate(
                "working_set",
                entry.key,
                "medium",
                entry.value if data.query else "",
                len(data.working_set) - position,
                vector=entry.vector,
            )
        )
        sources.append(entry)
    for source in sources[len(forms) :]:
        if floor >= CRITICAL:
            forms.append("not_critical")
            sizes.append(None)
        else:
            section = "facts" if isinstance(source, FactItem) else "working_set"
            forms.append(fact_forms)
            sizes.append(tuple(_form_tokens(section, source, f, cache) for f in fact_forms))
    return candidates, sources, forms, sizes


def _segment_candidates(segments: list[Segment], floor: int, cache: FormCache) -> Prepared:
    """``_candidates``' part for the frame's ranked (neither critical nor forced) segments."""
    newest = max((s.order for s in segments), default=0)
    candidates: list[Candidate] = []
    sources: list[Any] = []
    forms: list[Forms] = []
    sizes: list[Sizes] = []
    for segment in segments:
        if segment.required_at_critical:
            continue
        candidates.append(
            Candidate(
                "segments",
                segment.id,
                segment.priority,
                segment.content or segment.summary,
                segment.order,
                segment.attention,
                segment.vector,
                segment.order,
                "frame",
            )
        )
        sources.append(segment)
        allowed = _candidate_forms(segment, floor, newest)
        forms.append(allowed)
        sizes.append(
            None
            if isinstance(allowed, str)
            else tuple(_form_tokens("segments", segment, f, cache) for f in allowed)
        )
    return candidates, sources, forms, sizes


def _render(section: str, source: Any, form: str, cache: FormCache) -> PackedItem[Any]:
    """``source`` of ``section`` in ``form`` (full, light or summary)."""
    if section == "segments":
        if form == "summary":
            return _segment_item(source, "summary", cache)
        return _segment_item(source, "whole" if form == "full" else "shown", cache)
    level = "none" if form == "full" else "light"
    if section == "facts":
        return _render_fact(source, level, cache)
    return _render_working(source, level, cache)


def _excerpt_item(segment: Segment, limit: int, terms: list[str]) -> PackedItem[Segment] | None:
    """``segment`` as an excerpt of at most ``limit`` tokens, or None when nothing fits."""
    text = excerpt(segment.content, segment.tokens, limit, terms)
    if not text:
        return None
    tokens = scaled_tokens(segment.tokens, segment.content, text)
    return PackedItem("segments", segment.id, tokens, "excerpt", text, segment)


def _widen_excerpts(chosen: list[PackedItem[Any]], remaining: int, terms: list[str]) -> None:
    """The room the pack left, given to its excerpts in rank order (each chosen again,
    by the same rule, for its larger room)."""
    for item in chosen:
        if remaining <= 0:
            break
        if item.form != "excerpt":
            continue
        wider = _excerpt_item(item.source, item.tokens + remaining, terms)
        if wider is not None and wider.tokens > item.tokens:
            remaining -= wider.tokens - item.tokens
            item.text, item.tokens = wider.text, wider.tokens


def _form_tokens(section: str, source: Any, form: str, cache: FormCache) -> int:
    """What ``_render(section, source, form).tokens`` is, building as little as it can."""
    if section == "segments":
        if form == "summary":
            return int(source.summary_tokens)
        if form == "excerpt":  # the least it takes: ``pack`` cuts it to the room
            return EXCERPT_MIN_TOKENS
        if form == "full":
            return int(source.tokens)
        text = source.content
    elif form == "full":
        return int(source.tokens)
    else:
        text = source.text() if section == "facts" else source.value
    return _render_text(text, int(source.tokens), "light", cache)[1]


def pack(data: PackInput) -> PackResult:
    """The pack for ``data``: required items whole, then the ranking filled greedily.

    Every critical segment is included whole. Raises BudgetTooSmall when the budget is
    under MIN_BUDGET, and CriticalExceedsBudget when critical content alone is larger
    than the budget.
    """
    if data.budget < MIN_BUDGET:
        raise BudgetTooSmall(f"A context pack needs a budget of at least {MIN_BUDGET} tokens.")
    critical_tokens = _kept(
        data,
        "critical_tokens",
        lambda: sum(s.tokens for s in data.segments if s.priority == "critical"),
    )
    if critical_tokens > data.budget:
        raise CriticalExceedsBudget(critical_tokens=critical_tokens, budget_tokens=data.budget)
    floor = level_index(data.min_compaction)
    # id(text) -> its light form, for texts too long for the kept forms; they live as
    # long as data.
    cache: FormCache = {}
    brief_text, brief_tokens, required, drops, required_level = _fill(
        data.budget, data, floor, cache
    )
    dropped = [Dropped("segments", sid, reason, LEVELS[floor]) for sid, reason in data.skipped]
    dropped += drops
    for item in required:  # in before the ranking: no rank
        item.reason = _required_reason(item)
        priority = item.source.priority if item.section == "segments" else "critical"
        item.score = list(_required_score(priority))
    remaining = data.budget - brief_tokens - sum(i.tokens for i in required)
    candidates, sources, forms, sizes = _candidates(data, max(floor, required_level), cache)
    indexed = None
    if data.query and data.memo is not None:
        # The frame's ranked segments come first among the candidates, in this order.
        indexed = _kept(
            data,
            "terms",
            lambda: PassageIndex([c.text for c in candidates if c.section == "segments"]),
        )
    ranking = rank(candidates, data.query, data.query_vector, indexed)
    order = ranking.order()
    rows = ranking.rows()
    chosen: list[PackedItem[Any]] = []
    facts_room = math.floor(max(0, remaining) * FACTS_SHARE)
    deepest = _required_depth(required, drops, brief_text, data.brief_context)
    older_than = ranking.older_than

    excerpt_cap = max(EXCERPT_MIN_TOKENS, math.floor(max(0, remaining) * EXCERPT_SHARE))
    # Excerpts leave the cold handles' names their room (they take what is left last).
    named = sum(r.tokens for r in data.resources)
    terms = query_terms(data.query) if data.query else []

    def offer(position: int, index: int) -> bool:
        """Put candidate ``index`` in, in its fullest form that fits; False if none does."""
        nonlocal remaining, facts_room, deepest
        counts = sizes[index]
        if counts is None or min(counts) > remaining:
            return False
        section = candidates[index].section
        form = next(f for f, t in zip(forms[index], counts, strict=True) if t <= remaining)
        if form == "excerpt":  # what the pack leaves at the end widens it
            limit = min(remaining - named, excerpt_cap)
            item = (
                _excerpt_item(sources[index], limit, terms) if limit >= EXCERPT_MIN_TOKENS else None
            )
            if item is None:
                return False
        else:
            item = _render(section, sources[index], form, cache)
        item.rank = position
        item.score = rows[index]
        item.reason = "ranked"
        item.older_than = older_than.get(index)
        chosen.append(item)
        remaining -= item.tokens
        if section == "facts":
            facts_room -= item.tokens
        deepest = max(deepest, LEVEL_INDEX[FORM_LEVEL.get(item.form, "none")])
        return True

    # Candidates in rank order; a fact held back by the facts' share is offered again
    # once no candidate of another section still to come fits the room left (the share
    # keeps room for those only), before the facts ranked below it; the ones no form of
    # which fits are dropped, in rank order. Once the room left is smaller than every
    # form of every candidate still to come, the rest are dropped without being offered
    # (the room only shrinks).
    least = [min(counts) if counts is not None else math.inf for counts in sizes]
    still = list(itertools.accumulate((least[i] for i in reversed(order)), min))[::-1]
    others = (math.inf if candidates[i].section == "facts" else least[i] for i in reversed(order))
    others_still = list(itertools.accumulate(others, min))[::-1]
    refused: list[tuple[int, int]] = []
    held: list[tuple[int, int]] = []
    held_refused: list[tuple[int, int]] = []
    for position, index in enumerate(order, start=1):
        if held and others_still[position - 1] > remaining:  # no one else wants the room
            held_refused += [(p, i) for p, i in held if not offer(p, i)]
            held = []
        if still[position - 1] > remaining:  # nothing to come fits
            refused += zip(range(position, len(order) + 1), order[position - 1 :], strict=True)
            break
        counts = sizes[index]
        if counts is None:
            refused.append((position, index))
        elif (
            remaining > 0
            and candidates[index].section == "facts"
            and counts[-1] > max(0, facts_room)
            and others_still[position - 1] <= remaining
        ):
            held.append((position, index))
        elif not offer(position, index):
            refused.append((position, index))
    held_refused += [(p, i) for p, i in held if not offer(p, i)]
    if held_refused:
        refused = sorted(refused + held_refused)
    level_name = LEVELS[max(floor, required_level)]
    reasons = [
        allowed if isinstance(allowed := forms[index], str) else "over_budget"
        for _, index in refused
    ]
    if "low_priority" in reasons:
        deepest = max(deepest, AGGRESSIVE)
    if "not_critical" in reasons:
        deepest = max(deepest, CRITICAL)
    older = older_than.get
    dropped += [
        Dropped(
            candidates[index].section,
            candidates[index].id,
            reason,
            level_name,
            int(sources[index].tokens),
            position,
            rows[index],
            older(index),
        )
        for (position, index), reason in zip(refused, reasons, strict=True)
    ]
    resources: list[PackedItem[ResourceName]] = []
    at_critical = max(floor, required_level) >= CRITICAL
    for resource in data.resources:
        if not at_critical and resource.tokens <= remaining:
            item = PackedItem(
                "resources", resource.id, resource.tokens, "name", resource.name, resource
            )
            item.reason = "cold"
            resources.append(item)
            remaining -= resource.tokens
        else:
            reason = "not_critical" if at_critical else "over_budget"
            if at_critical:
                deepest = CRITICAL
            dropped.append(
                Dropped("resources", resource.id, reason, LEVELS[max(floor, required_level)])
            )
    _widen_excerpts(chosen, remaining, terms)
    included = required + sorted(chosen, key=lambda i: i.rank or 0)
    return PackResult(
        budget=data.budget,
        level=LEVELS[deepest],
        brief_context=brief_text,
        breadcrumbs=[i for i in included if i.section == "breadcrumbs"],
        segments=[i for i in included if i.section == "segments"],
        # docs/concepts.md#context-packs: constraints, then organizational policy, then the
        # rest by rank.
        facts=sorted(
            (i for i in included if i.section == "facts"),
            key=lambda i: (not i.source.is_constraint, not i.source.governs, i.rank or 0),
        ),
        working_set=[i for i in included if i.section == "working_set"],
        dropped=dropped,
        brief_tokens=brief_tokens,
        resources=resources,
    )


@functools.cache
def _required_score(priority: str) -> tuple[float, ...]:
    """A required item's score: its priority's weight, nothing ranked."""
    return tuple(score_row(Score(priority=PRIORITY_SCORE.get(priority, 50) / 100)))


def _required_depth(
    required: list[PackedItem[Any]], fill_drops: list[Dropped], brief_text: str, brief: str
) -> int:
    """The deepest level the brief and the required items show: their forms, and the
    critical level when it left a breadcrumb out or cut an item to nothing."""
    if fill_drops:
        return CRITICAL
    deepest = max((LEVEL_INDEX[FORM_LEVEL.get(i.form, "none")] for i in required), default=0)
    if brief_text != brief:
        deepest = max(
            deepest, LEVEL_INDEX["light"] if brief_text == light_trim(brief) else CRITICAL
        )
    return deepest


def _required_reason(item: PackedItem[Any]) -> str:
    if item.section == "segments":
        return "critical" if item.source.priority == "critical" else "forced"
    if item.section == "facts":
        return "constraint"
    return "essential"


def _render_fact(
    fact: FactItem, level: str, cache: FormCache | None = None
) -> PackedItem[FactItem]:
    text, tokens, form = _render_text(fact.text(), fact.tokens, level, cache)
    return PackedItem("facts", fact.id, tokens, form, text, fact)


def _render_working(
    entry: WorkingItem, level: str, cache: FormCache | None = None
) -> PackedItem[WorkingItem]:
    text, tokens, form = _render_text(entry.value, entry.tokens, level, cache)
    return PackedItem("working_set", entry.key, tokens, form, text, entry)


def _cut_to_fit(
    budget: int,
    level: str,
    brief_text: str,
    brief_tokens: int,
    crumbs: list[PackedItem[Breadcrumb]],
    segments: list[PackedItem[Segment]],
    fact_items: list[PackedItem[FactItem]],
) -> tuple[
    str,
    int,
    list[PackedItem[Breadcrumb]],
    list[PackedItem[Segment]],
    list[PackedItem[FactItem]],
    list[Dropped],
]:
    """At the critical level: cut required items until they fit, least important first.

    Order of sacrifice: forced non-critical segments (lowest priority, largest first),
    then constraint facts, breadcrumbs, and last the brief. Critical segments are never
    cut (``pack`` refused a budget smaller than they are). A cut item keeps its head and
    is marked ``truncated``; an item cut to nothing is dropped with reason ``over_budget``.
    """
    drops: list[Dropped] = []
    excess = brief_tokens + sum(i.tokens for i in crumbs) + sum(i.tokens for i in segments)
    excess += sum(i.tokens for i in fact_items) - budget

    def shrink(
        items: list[PackedItem[Source]],
        order_key: Callable[[PackedItem[Source]], Any],
        spare: Callable[[PackedItem[Source]], bool] = lambda item: False,
    ) -> list[PackedItem[Source]]:
        nonlocal excess
        result = {id(i): i for i in items}
        for item in sorted(items, key=order_key):
            if excess <= 0:
                break
            if spare(item):
                continue
            limit = item.tokens - excess
            if limit <= 1:
                excess -= item.tokens
                drops.append(Dropped(item.section, item.id, "over_budget", level, item.tokens))
                result.pop(id(item))
            else:
                text = cut_to_tokens(item.text, item.tokens, limit)
                excess -= item.tokens - limit
                result[id(item)] = replace(item, text=text, tokens=limit, form="truncated")
        return [result[id(i)] for i in items if id(i) in result]

    def segment_order(item: PackedItem[Segment]) -> tuple[int, int]:
        return (PRIORITY_SCORE.get(item.source.priority, 0), -item.tokens)

    segments = shrink(segments, segment_order, spare=lambda i: i.source.priority == "critical")
    fact_items = shrink(fact_items, lambda i: -i.tokens)
    crumbs = shrink(crumbs, lambda i: -i.tokens)
    if excess > 0:
        limit = max(0, brief_tokens - excess)
        brief_text = cut_to_tokens(brief_text, brief_tokens, limit)
        brief_tokens = limit
    return brief_text, brief_tokens, crumbs, segments, fact_items, drops
