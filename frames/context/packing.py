"""Fitting a context pack into a token budget: pure rules, dataclasses in and out.

Merges seed 000 (§2 priorities and compaction levels, §5.2 assembly) with seed 001
(context building). Every token figure comes from storage (``tokens`` given on each
item) or, for text made on this path (brief, breadcrumbs, trimmed text), from
``estimate_tokens``; nothing here tokenizes.

Sections, in the order they take the budget:

1. ``brief_context`` (identity + environment) and ``breadcrumbs`` (the frame's
   ancestry, root first) and ``segments`` (the frame's handles) are *required* at a
   level: the level is the first one, from ``min_compaction`` on, at which they fit.
2. ``facts`` (already ranked: constraints and policy first) then ``working_set``
   fill what is left, in rank order; facts take at most 70 % of it (seed 001) unless
   the working set leaves room. Constraint facts are required: they go in before any
   handle is dropped.
3. ``resources`` (cold handles: discovered, not loaded, seed 003) take what is left
   last, by name only; none at the critical level.

Levels (seed 000 §2), each including the ones before it:

- ``none``: full content.
- ``light``: whitespace collapsed, long strings abbreviated (head … tail).
- ``moderate``: segments older than the ``RECENT_SEGMENTS`` newest use their stored
  summary when they have one.
- ``aggressive``: every non-critical segment with a stored summary uses it; low and
  background segments are dropped (unless forced in).
- ``critical``: only critical and forced segments, the root and current breadcrumbs,
  constraint facts; everything else is dropped. If that still does not fit, forced
  then critical segments are cut down, lowest priority and largest first, until it
  does: ``used`` never exceeds ``budget``.
"""

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from contextops.errors import Conflict

MIN_BUDGET = 500
LEVELS = ("none", "light", "moderate", "aggressive", "critical")
PRIORITY_SCORE = {"critical": 100, "high": 75, "medium": 50, "low": 25, "background": 10}
SECTIONS = ("brief_context", "breadcrumbs", "facts", "working_set", "segments", "resources")
RECENT_SEGMENTS = 10
FACTS_SHARE = 0.7
# Light abbreviation: a string past LIGHT_MAX_CHARS keeps its head and tail and loses
# a quarter from the middle (minor trimming, not summarization).
LIGHT_MAX_CHARS = 2000
LIGHT_HEAD_SHARE = 0.60
LIGHT_TAIL_SHARE = 0.15
ELLIPSIS = " … "
_WHITESPACE = re.compile(r"[ \t]{2,}|\t")
_BLANK_LINES = re.compile(r"\n\s*\n+")


# Seed 003 §2: the pack's format follows the session's pressure level. A denser format
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

    @property
    def required_at_critical(self) -> bool:
        return self.forced or self.priority == "critical"


@dataclass(slots=True)  # a large pack makes thousands: no frozen checks
class FactItem:
    """A fact as the packer sees it: ``value`` is the text packed, ``extra`` its own fields.

    ``stored``: what the item stands for when its text is made on first use (``text()``),
    any object with ``text()`` and ``fields()``; the facts a pack drops unread (at the
    critical level, every one that is not a constraint) are then never rendered."""

    id: str
    key: str
    value: str
    tokens: int
    is_constraint: bool = False
    extra: dict = field(default_factory=dict)
    stored: Any = None

    def text(self) -> str:
        """``value``, made from ``stored`` (with ``extra``) the first time."""
        stored = self.stored
        if stored is not None:
            self.value, self.extra, self.stored = stored.text(), stored.fields(), None
        return self.value


@dataclass(frozen=True)
class WorkingItem:
    key: str
    value: str
    tokens: int


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


Source = TypeVar("Source", Breadcrumb, Segment, FactItem, WorkingItem, ResourceName)


@dataclass(slots=True)  # a large pack makes thousands: no frozen checks
class PackedItem(Generic[Source]):
    section: str
    id: str
    tokens: int
    form: str  # full | trimmed | summary | truncated
    text: str
    source: Source  # the input dataclass


@dataclass(slots=True)  # a large pack makes thousands: no frozen checks
class Dropped:
    section: str
    id: str
    reason: str
    level: str
    tokens: int = 0


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
    whole (seed 000), so no pack can be made; the caller needs a larger budget."""

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


def _render_text(
    text: str, tokens: int, level: str, cache: dict[int, str] | None = None
) -> tuple[str, int, str]:
    if level == "none":
        return text, tokens, "full"
    if cache is None:
        trimmed = light_trim(text)
    else:
        cached = cache.get(id(text))
        if cached is None:
            cached = cache[id(text)] = light_trim(text)
        trimmed = cached
    if trimmed == text:
        return text, tokens, "full"
    return trimmed, scaled_tokens(tokens, text, trimmed), "trimmed"


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
    segment: Segment, form: str, cache: dict[int, str] | None = None
) -> PackedItem[Segment]:
    if form == "summary":
        return PackedItem(
            "segments", segment.id, segment.summary_tokens, "summary", segment.summary, segment
        )
    text, tokens, shown = _render_text(
        segment.content, segment.tokens, "none" if form == "whole" else "light", cache
    )
    return PackedItem("segments", segment.id, tokens, shown, text, segment)


def _segment_tokens(segment: Segment, form: str, cache: dict[int, str] | None = None) -> int:
    """What ``_segment_item(segment, form).tokens`` is, without building the item."""
    if form == "summary":
        return segment.summary_tokens
    if form == "whole":
        return segment.tokens
    return _render_text(segment.content, segment.tokens, "light", cache)[1]


def render_segment(
    segment: Segment, level: str, newest_order: int, cache: dict[int, str] | None = None
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
        items.append(
            PackedItem("breadcrumbs", crumb.frame_id, estimate_tokens(text), "full", text, crumb)
        )
    dropped = [c for c in crumbs if c not in kept_crumbs]
    return items, dropped


def _segment_sort_key(item: PackedItem[Segment]) -> tuple[int, int, int]:
    seg = item.source
    return (0 if seg.required_at_critical else 1, -PRIORITY_SCORE.get(seg.priority, 0), -seg.order)


def pack(data: PackInput) -> PackResult:
    """The pack for ``data``: the first level that fits, and what was dropped at which level.

    Every critical segment is included whole at every level. Raises BudgetTooSmall when
    the budget is under MIN_BUDGET, and CriticalExceedsBudget when critical content alone
    is larger than the budget.
    """
    if data.budget < MIN_BUDGET:
        raise BudgetTooSmall(f"A context pack needs a budget of at least {MIN_BUDGET} tokens.")
    critical_tokens = sum(s.tokens for s in data.segments if s.priority == "critical")
    if critical_tokens > data.budget:
        raise CriticalExceedsBudget(critical_tokens=critical_tokens, budget_tokens=data.budget)
    newest = max((s.order for s in data.segments), default=0)
    constraints = [f for f in data.facts if f.is_constraint]
    others = [f for f in data.facts if not f.is_constraint]
    start = level_index(data.min_compaction)
    dropped: list[Dropped] = [
        Dropped("segments", sid, reason, LEVELS[start]) for sid, reason in data.skipped
    ]
    trim_cache: dict[
        int, str
    ] = {}  # id(text) -> light-trimmed text; the texts live as long as ``data``
    forms = [_segment_forms(seg, newest) for seg in data.segments]
    # A segment's tokens in the form ``shown``, counted once whatever the levels tried
    # (``whole`` and ``summary`` are stored counts); only the level that fits renders.
    shown_tokens: list[int | None] = [None] * len(forms)
    constraint_items: dict[bool, list[PackedItem[FactItem]]] = {}  # trimmed? -> rendered

    for index in range(start, len(LEVELS)):
        level = LEVELS[index]
        brief_text = data.brief_context if level == "none" else light_trim(data.brief_context)
        brief_tokens = estimate_tokens(brief_text)
        crumbs, crumbs_dropped = _breadcrumbs_at(data.breadcrumbs, level)
        trimmed = level != "none"
        if trimmed not in constraint_items:
            constraint_items[trimmed] = [_render_fact(f, level, trim_cache) for f in constraints]
        fact_items = list(constraint_items[trimmed])
        required = brief_tokens + sum(i.tokens for i in crumbs) + sum(i.tokens for i in fact_items)
        last = index == len(LEVELS) - 1
        # What the level's segments take, until it is more than the budget: a level that
        # does not fit is left as soon as that is known (on a frame of a thousand handles,
        # after a few dozen), and only the last level needs the whole sum (to cut to fit).
        for position, seg in enumerate(data.segments):
            form = forms[position][index]
            if form == "whole":
                required += seg.tokens
            elif form == "summary":
                required += seg.summary_tokens
            elif form is not None:
                tokens = shown_tokens[position]
                if tokens is None:
                    tokens = shown_tokens[position] = _segment_tokens(seg, form, trim_cache)
                required += tokens
            if required > data.budget and not last:
                break
        if required > data.budget and not last:
            continue
        at_level = [(seg, f[index]) for seg, f in zip(data.segments, forms, strict=True)]
        shown = [(seg, form) for seg, form in at_level if form is not None]
        left_out = [seg for seg, form in at_level if form is None]  # dropped at this level
        segments = [_segment_item(seg, form, trim_cache) for seg, form in shown]
        reason = "low_priority" if level == "aggressive" else "not_critical"
        level_drops = [Dropped("segments", s.id, reason, level, s.tokens) for s in left_out]
        level_drops += [
            Dropped("breadcrumbs", c.frame_id, "not_essential", level) for c in crumbs_dropped
        ]
        if required > data.budget:
            brief_text, brief_tokens, crumbs, segments, fact_items, cut_drops = _cut_to_fit(
                data.budget, level, brief_text, brief_tokens, crumbs, segments, fact_items
            )
            level_drops += cut_drops
        remaining = data.budget - brief_tokens - sum(i.tokens for i in crumbs)
        remaining -= sum(i.tokens for i in segments) + sum(i.tokens for i in fact_items)
        working: list[PackedItem[WorkingItem]] = []
        resources: list[PackedItem[ResourceName]] = []
        if level == "critical":
            level_drops += [Dropped("facts", f.id, "not_critical", level, f.tokens) for f in others]
            level_drops += [
                Dropped("working_set", w.key, "not_critical", level, w.tokens)
                for w in data.working_set
            ]
        else:
            facts_room = math.floor(remaining * FACTS_SHARE)
            working_need = sum(w.tokens for w in data.working_set)
            facts_room = max(facts_room, remaining - working_need)
            taken = 0
            for fact in others:
                fact_item = _render_fact(fact, level, trim_cache)
                if taken + fact_item.tokens <= facts_room:
                    fact_items.append(fact_item)
                    taken += fact_item.tokens
                else:
                    level_drops.append(Dropped("facts", fact.id, "over_budget", level, fact.tokens))
            remaining -= taken
            for entry in data.working_set:
                working_item = _render_working(entry, level, trim_cache)
                if working_item.tokens <= remaining:
                    working.append(working_item)
                    remaining -= working_item.tokens
                else:
                    level_drops.append(
                        Dropped("working_set", entry.key, "over_budget", level, entry.tokens)
                    )
        for resource in data.resources:
            if level != "critical" and resource.tokens <= remaining:
                resources.append(
                    PackedItem(
                        "resources", resource.id, resource.tokens, "name", resource.name, resource
                    )
                )
                remaining -= resource.tokens
            else:
                reason = "not_critical" if level == "critical" else "over_budget"
                level_drops.append(Dropped("resources", resource.id, reason, level))
        segments.sort(key=_segment_sort_key)
        return PackResult(
            budget=data.budget,
            level=level,
            brief_context=brief_text,
            breadcrumbs=crumbs,
            segments=segments,
            facts=fact_items,
            working_set=working,
            dropped=dropped + level_drops,
            brief_tokens=brief_tokens,
            resources=resources,
        )
    raise AssertionError("unreachable: the critical level always returns")  # pragma: no cover


def _render_fact(
    fact: FactItem, level: str, cache: dict[int, str] | None = None
) -> PackedItem[FactItem]:
    text, tokens, form = _render_text(fact.text(), fact.tokens, level, cache)
    return PackedItem("facts", fact.id, tokens, form, text, fact)


def _render_working(
    entry: WorkingItem, level: str, cache: dict[int, str] | None = None
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
