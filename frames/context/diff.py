"""Why a context pack changed: the items two recorded packs of one session differ by, each
with its reason. Pure rules over the records' ``included`` and ``dropped`` lists; the
facts' and handles' states come in as plain dicts (``pack_diff`` reads them).

An item is keyed by its section and id (a fact version, a handle, a working-set key, a
frame's breadcrumb). Reasons, for an item the later pack lacks or shows differently:

- ``over_budget``: the later pack dropped it to fit its budget, at its priority (the
  level that dropped it says how far it had to go);
- ``superseded``: a fact whose newer version replaced it (``superseded_by``);
- ``paged_out``: a handle paged out (offline, cold, or indexed without a summary), or now
  shown by its page-out summary;
- ``excluded_by_hint``: the request's ``exclude_handles`` left it out;
- ``pressure_format``: the same item in a shorter form because the later pack was
  assembled at another compaction level or format (a handle shown as an excerpt in
  either pack is ``over_budget``: its rank left it less room, or ``query``: another
  query chose another passage);
- ``query``: (added items only) the later pack's query differs and ranked it in, where
  the earlier pack dropped it for its budget;
- ``scope``: not a candidate of the later pack at all: a fact of another scope or one
  withdrawn, a handle or breadcrumb of another frame, a working-set item gone; or a fact
  ranked below the facts the pack read (a pack reads the best-ranked facts only, and
  lists none below them).

``over_budget`` covers every drop the packer made for room: ``over_budget`` itself and
the compaction levels' ``low_priority``, ``not_critical`` and ``not_essential``; the
drop's own reason stays in ``after.reason`` and ``detail`` says which it was.
"""

from dataclasses import asdict, dataclass, field
from typing import Any

OVER_BUDGET = "over_budget"
SUPERSEDED = "superseded"
PAGED_OUT = "paged_out"
EXCLUDED_BY_HINT = "excluded_by_hint"
PRESSURE_FORMAT = "pressure_format"
SCOPE = "scope"
CONTENT = "content"
QUERY = "query"
REASONS = (
    OVER_BUDGET,
    SUPERSEDED,
    PAGED_OUT,
    EXCLUDED_BY_HINT,
    PRESSURE_FORMAT,
    SCOPE,
    CONTENT,
    QUERY,
)

# The packer's own drop reasons, as the diff names them.
DROP_REASONS = {
    "over_budget": OVER_BUDGET,
    "low_priority": OVER_BUDGET,
    "not_critical": OVER_BUDGET,
    "not_essential": OVER_BUDGET,
    "excluded": EXCLUDED_BY_HINT,
    "offline": PAGED_OUT,
    "cold": PAGED_OUT,
    "indexed_without_summary": PAGED_OUT,
}

# What the packer's drop reason means, in words (``{level}``: the level that dropped it).
DROP_DETAIL = {
    "over_budget": "Dropped to fit the budget at level {level}: it fitted in no form in the "
    "room its rank left.",
    "low_priority": "Left out at level {level}, which leaves low-priority items out.",
    "not_critical": "Left out at level {level}, which keeps critical items only.",
    "not_essential": "Left out at level {level}, which keeps only the root and current "
    "frames' breadcrumbs.",
    "excluded": "The request's exclude_handles left it out.",
    "offline": "Paged out (offline).",
    "cold": "Paged out (cold: discovered, not loaded).",
    "indexed_without_summary": "Paged out (indexed, with no summary to show).",
}

# Why the packer took an item in, in words.
IN_DETAIL = {
    "critical": "critical: always in",
    "forced": "asked for by include_handles",
    "constraint": "a constraint: always in",
    "essential": "the frame's ancestry",
    "cold": "a cold resource, listed by name",
    "ranked": "ranked",
}


@dataclass(frozen=True)
class PackSide:
    """One recorded pack as the diff reads it."""

    id: str
    frame_id: str | None
    budget: int
    used: int
    level: str
    breakdown: dict
    included: list[dict]
    dropped: list[dict]
    format: str | None = None
    created_at: Any = None
    as_of_seq: int | None = None
    query: str = ""

    def figures(self) -> dict:
        return {
            "id": self.id,
            "frame_id": self.frame_id,
            "budget": self.budget,
            "used": self.used,
            "remaining": self.budget - self.used,
            "level": self.level,
            "format": self.format,
            "breakdown": self.breakdown,
            "created_at": self.created_at,
            "as_of_seq": self.as_of_seq,
            "query": self.query,
        }


@dataclass(frozen=True)
class ItemChange:
    section: str
    id: str
    reason: str
    before: dict | None  # {form, tokens, level} in the earlier pack, None when added
    after: dict | None  # the same in the later pack, or the drop's {reason, level, tokens}
    detail: str = ""
    superseded_by: str | None = None
    priority: str | None = None
    # An added item the earlier pack dropped: that drop {reason, level, tokens, rank, score}.
    earlier_drop: dict | None = None


@dataclass
class PackDiff:
    a: dict
    b: dict
    added: list[ItemChange] = field(default_factory=list)
    dropped: list[ItemChange] = field(default_factory=list)
    changed: list[ItemChange] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _key(item: dict) -> tuple[str, str]:
    return (str(item.get("section", "")), str(item.get("id", "")))


def diff(
    a: PackSide,
    b: PackSide,
    *,
    facts: dict[str, dict] | None = None,
    handles: dict[str, dict] | None = None,
) -> PackDiff:
    """What changed from pack ``a`` to pack ``b``.

    ``facts``: fact id -> ``{status, superseded_by, scope}`` for the facts either pack
    names; ``handles``: handle id -> ``{priority, state, frame_id}``. Items missing from
    both are read as gone (``scope``).
    """
    facts = facts or {}
    handles = handles or {}
    before = {_key(i): i for i in a.included}
    after = {_key(i): i for i in b.included}
    b_dropped = {_key(d): d for d in b.dropped}
    answer = PackDiff(a=a.figures(), b=b.figures())
    a_dropped = {_key(d): d for d in a.dropped}
    for key, item in after.items():
        if key not in before:
            answer.added.append(_added(key, item, a, b, a_dropped.get(key), facts, handles))
    for key, item in before.items():
        if key in after:
            change = _changed(key, item, after[key], a, b, handles)
            if change is not None:
                answer.changed.append(change)
            continue
        answer.dropped.append(_dropped(key, item, a, b, b_dropped.get(key), facts, handles))
    return answer


def _shown(item: dict, level: str) -> dict:
    return {
        "form": item.get("form", ""),
        "tokens": int(item.get("tokens", 0)),
        "level": level,
        "rank": item.get("rank"),
        "score": item.get("score"),
        "reason": item.get("reason"),
    }


def _drop(drop: dict) -> dict:
    return {
        "reason": str(drop.get("reason", "")),
        "level": str(drop.get("level", "")),
        "tokens": int(drop.get("tokens", 0)),
        "rank": drop.get("rank"),
        "score": drop.get("score"),
    }


def _total(item: dict) -> Any:
    score = item.get("score")
    return score.get("total") if isinstance(score, dict) else None


def _ranked(item: dict) -> str:
    """``ranked 3, score 0.71`` or ``unranked``."""
    if item.get("rank") is None:
        return "unranked"
    total = _total(item)
    return f"ranked {item['rank']}" + (f", score {total}" if total is not None else "")


def _query_change(a: PackSide, b: PackSide) -> str:
    if a.query == b.query:
        return ""
    return f" The query changed from {a.query or '(none)'!r} to {b.query or '(none)'!r}."


def _added(
    key: tuple[str, str],
    item: dict,
    a: PackSide,
    b: PackSide,
    earlier: dict | None,
    facts: dict[str, dict],
    handles: dict[str, dict],
) -> ItemChange:
    """An item the earlier pack lacked: why it is in now (the later pack's reason, rank
    and score), what the earlier pack did with it, and the query change if any."""
    section, item_id = key
    shown = _shown(item, b.level)
    in_reason = str(item.get("reason") or "ranked")
    if in_reason == "ranked":
        now = f"In now: {_ranked(item)}"
    else:
        now = f"In now: {IN_DETAIL.get(in_reason, in_reason)}"
        if item.get("rank") is not None:
            now += f" ({_ranked(item)})"
    query = _query_change(a, b)
    if earlier is not None:
        drop_reason = str(earlier.get("reason", ""))
        reason = DROP_REASONS.get(drop_reason, OVER_BUDGET)
        if reason == OVER_BUDGET and query:
            reason = QUERY
        was = DROP_DETAIL.get(drop_reason, drop_reason).format(
            level=earlier.get("level") or a.level
        )
        detail = f"{now}. The earlier pack left it out ({_ranked(earlier)}): {was}{query}"
        return ItemChange(
            section,
            item_id,
            reason,
            None,
            shown,
            detail=detail,
            priority=handles.get(item_id, {}).get("priority"),
            earlier_drop=_drop(earlier),
        )
    if section == "facts":
        fact = facts.get(item_id, {})
        created = fact.get("created_at")
        if created is not None and a.created_at is not None and created > a.created_at:
            was = "The fact was written after the earlier pack."
        else:
            was = (
                "The earlier pack did not read it: ranked below the facts it read (a pack "
                "reads the best-ranked facts only), or of a scope it did not see."
            )
    elif section in ("segments", "breadcrumbs", "resources") and a.frame_id != b.frame_id:
        was = "The earlier pack was assembled for another frame."
    else:
        was = "Not a candidate of the earlier pack (added since, or of another frame)."
    return ItemChange(
        section,
        item_id,
        SCOPE,
        None,
        shown,
        detail=f"{now}. {was}{query}",
        priority=handles.get(item_id, {}).get("priority"),
    )


def _dropped(
    key: tuple[str, str],
    item: dict,
    a: PackSide,
    b: PackSide,
    drop: dict | None,
    facts: dict[str, dict],
    handles: dict[str, dict],
) -> ItemChange:
    section, item_id = key
    handle = handles.get(item_id, {}) if section == "segments" else {}
    fact = facts.get(item_id, {}) if section == "facts" else {}
    shown = _shown(item, a.level)
    if fact.get("superseded_by"):
        return ItemChange(
            section,
            item_id,
            SUPERSEDED,
            shown,
            None,
            detail="A newer version of the fact replaced it.",
            superseded_by=str(fact["superseded_by"]),
        )
    if drop is not None:
        drop_reason = str(drop.get("reason", ""))
        reason = DROP_REASONS.get(drop_reason, OVER_BUDGET)
        ranked = ""
        if drop.get("rank") and drop.get("score"):
            was = f" (ranked {item['rank']} before)" if item.get("rank") else ""
            ranked = f" Ranked {drop['rank']}{was}, score {drop['score'].get('total')}."
        detail = DROP_DETAIL.get(drop_reason, drop_reason).format(
            level=drop.get("level") or b.level
        )
        if reason == OVER_BUDGET:
            detail += ranked
        return ItemChange(
            section,
            item_id,
            reason,
            shown,
            _drop(drop),
            detail=detail + _query_change(a, b),
            priority=handle.get("priority"),
        )
    if section == "facts" and fact.get("status") not in (None, "active"):
        detail = f"The fact is {fact['status']}."
    elif section in ("segments", "breadcrumbs") and a.frame_id != b.frame_id:
        detail = "The later pack was assembled for another frame."
    elif section == "segments" and not handle:
        detail = "The handle is gone."
    elif section == "facts":
        detail = (
            "The later pack did not read it: ranked below the facts it read (a pack reads "
            "the best-ranked facts only, and lists none below them), or of a scope or "
            "validity it did not see."
        )
    else:
        detail = "Not among the later pack's candidates (scope or expiry)."
    return ItemChange(section, item_id, SCOPE, shown, None, detail=detail + _query_change(a, b))


def _excerpt_change(old: dict, new: dict, a: PackSide, b: PackSide) -> tuple[str, str]:
    """Why a handle shown as an excerpt in either pack is shown otherwise in the later:
    the room its rank left (``over_budget``), or the passage another query asked for."""
    if old.get("form") == new.get("form") == "excerpt" and a.query != b.query:
        return QUERY, (
            f"An excerpt in both: the passage the later query ({b.query!r}) asks about "
            f"instead of the earlier's ({a.query!r})."
        )
    if new.get("form") == "excerpt":
        return OVER_BUDGET, (
            f"Shown as an excerpt of {new.get('tokens')} tokens: the room its rank left "
            "held no fuller form."
        )
    return OVER_BUDGET, f"Shown {new.get('form')} again: the room its rank left held it."


def _changed(
    key: tuple[str, str],
    old: dict,
    new: dict,
    a: PackSide,
    b: PackSide,
    handles: dict[str, dict],
) -> ItemChange | None:
    """The same item in another form or size, or None when it is shown alike (an
    excerpt: of the same passage too, which another query may change at the same size)."""
    if all(old.get(part) == new.get(part) for part in ("form", "tokens", "passage")):
        return None
    handle = handles.get(key[1], {}) if key[0] == "segments" else {}
    if "excerpt" in (old.get("form"), new.get("form")):
        reason, detail = _excerpt_change(old, new, a, b)
    elif (a.level, a.format) != (b.level, b.format):
        reason, detail = (
            PRESSURE_FORMAT,
            f"Assembled at {b.level}{f' / {b.format}' if b.format else ''} instead of "
            f"{a.level}{f' / {a.format}' if a.format else ''}.",
        )
    elif new.get("form") == "summary" and handle.get("state") in ("indexed", "offline"):
        reason, detail = PAGED_OUT, "Shown by its page-out summary."
    else:
        reason, detail = CONTENT, "Its content changed."
    return ItemChange(
        key[0],
        key[1],
        reason,
        _shown(old, a.level),
        _shown(new, b.level),
        detail=detail,
        priority=handle.get("priority"),
    )
