"""Reads of recorded context packs, scoped to one organization."""

import uuid
from typing import Any

from contextops.errors import Invalid, NotFound
from contextops.ids import row_get
from facts.models import Fact
from frames.models import ContextHandle, ContextPackRecord, Frame, Session

from . import diff


def context_pack_get(*, organization: Any, pack_id: Any) -> ContextPackRecord:
    """The organization's recorded pack ``pack_id``; NotFound for any other."""
    records = ContextPackRecord.objects.select_related("session")
    return row_get(
        records.filter(session__organization=organization), pack_id, "No such context pack."
    )


def _side(record: ContextPackRecord) -> diff.PackSide:
    return diff.PackSide(
        id=str(record.pk),
        frame_id=str(record.frame_id) if record.frame_id else None,
        budget=record.budget,
        used=record.used,
        level=record.level,
        breakdown=record.breakdown,
        included=record.included,
        dropped=record.dropped,
        format=record.format or None,
        created_at=record.created_at,
        as_of_seq=record.as_of_seq,
        query=record.query,
    )


def context_pack_diff(
    *, organization: Any, a_id: Any, b_id: Any, session: Session | None = None
) -> diff.PackDiff:
    """Why pack ``b`` differs from pack ``a``: both the organization's, of one session
    (422 ``packs_of_other_sessions`` otherwise) and, with ``session``, of that one
    (NotFound otherwise)."""
    a = context_pack_get(organization=organization, pack_id=a_id)
    b = context_pack_get(organization=organization, pack_id=b_id)
    if session is not None and session.pk not in (a.session_id, b.session_id):
        raise NotFound("No such context pack in this session.")
    if a.session_id != b.session_id:
        raise Invalid(
            "Both packs must belong to one session.", field="b", code="packs_of_other_sessions"
        )
    named = [*a.included, *a.dropped, *b.included, *b.dropped]
    fact_ids = {str(i.get("id")) for i in named if i.get("section") == "facts"}
    handle_ids: list[uuid.UUID] = []
    for item in named:
        if item.get("section") == "segments":
            try:
                handle_ids.append(uuid.UUID(str(item.get("id"))))
            except ValueError:
                continue
    facts = {
        str(pk): {
            "status": status,
            "superseded_by": next_id,
            "scope": scope,
            "created_at": created_at,
        }
        for pk, status, scope, next_id, created_at in Fact.objects.filter(
            pk__in=[int(f) for f in fact_ids if f.isdigit()], organization=organization
        ).values_list("pk", "status", "scope", "superseded_by", "created_at")
    }
    handles = {
        str(pk): {"priority": priority, "state": state, "frame_id": str(frame_id)}
        for pk, priority, state, frame_id in ContextHandle.objects.filter(
            pk__in=handle_ids, frame__session_id=a.session_id
        ).values_list("pk", "priority", "state", "frame_id")
    }
    return diff.diff(_side(a), _side(b), facts=facts, handles=handles)


# Why an item is in or out, in words (the reason codes are the packer's).
_WHY_IN = {
    "critical": "critical: always in, never cut",
    "forced": "asked for by the agent (include_handles)",
    "constraint": "a constraint: always in",
    "essential": "the frame's ancestry",
    "cold": "discovered, not loaded: listed by name",
    "ranked": "ranked",
}
_WHY_OUT = {
    "over_budget": "fitted in no form in the room left",
    "excluded": "left out by the agent (exclude_handles)",
    "offline": "paged out (offline)",
    "cold": "discovered, not loaded: offered by name only",
    "indexed_without_summary": "indexed, with no summary to show",
    "low_priority": "low priority, left out at the aggressive level",
    "not_critical": "not critical, left out at the critical level",
    "not_essential": "not the root or current frame, left out at the critical level",
}
_FORM_WHY = {
    "full": "whole",
    "light": "trimmed (light)",
    "summary": "its stored summary",
    "excerpt": "an excerpt cut to fit: the passages that best match the query",
    "truncated": "cut to fit",
    "name": "by name",
}


def _labels(record: ContextPackRecord, items: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """What each item is, in a few words: a handle's content, a fact's key, a frame's goal
    (one read per section that has items)."""
    wanted: dict[str, set[str]] = {}
    for item in items:
        wanted.setdefault(str(item.get("section")), set()).add(str(item.get("id")))
    labels: dict[tuple[str, str], str] = {}
    handle_ids: list[uuid.UUID] = []
    for value in wanted.get("segments", set()) | wanted.get("resources", set()):
        try:
            handle_ids.append(uuid.UUID(value))
        except ValueError:
            continue
    if handle_ids:
        for pk, content, ref, kind in ContextHandle.objects.filter(
            pk__in=handle_ids, frame__session_id=record.session_id
        ).values_list("pk", "content", "ref", "kind"):
            text = " ".join((content or ref or "").split())
            for section in ("segments", "resources"):
                labels[(section, str(pk))] = f"{kind}: {text[:120]}"
    fact_ids = [int(v) for v in wanted.get("facts", set()) if v.isdigit()]
    if fact_ids:
        for fact_pk, key in Fact.objects.filter(
            pk__in=fact_ids, organization_id=record.session.organization_id
        ).values_list("pk", "key"):
            labels[("facts", str(fact_pk))] = key
    crumbs: list[uuid.UUID] = []
    for value in wanted.get("breadcrumbs", set()):
        try:
            crumbs.append(uuid.UUID(value))
        except ValueError:
            continue
    if crumbs:
        for pk, goal in Frame.objects.filter(
            pk__in=crumbs, session_id=record.session_id
        ).values_list("pk", "goal"):
            labels[("breadcrumbs", str(pk))] = goal
    for value in wanted.get("working_set", set()):
        labels[("working_set", value)] = value
    return labels


def _briefly(labels: dict[tuple[str, str], str], section: str, item_id: str) -> str:
    """An item named in a few words: its id, shortened, and the start of what it is (a row's
    "why" names the newer near-duplicate this way, not by its whole text)."""
    short = item_id if len(item_id) <= 12 else f"{item_id[:8]}…"
    label = labels.get((section, item_id), "")
    if not label or label == item_id:
        return short
    excerpt = label if len(label) <= 32 else f"{label[:31].rstrip()}…"
    return f"{short} “{excerpt}”"


# Included items that are in before the ranking, unranked (packing's required items).
_REQUIRED = frozenset({"critical", "forced", "constraint", "essential"})


def _row_place(entry: dict[str, Any]) -> tuple[int, int]:
    """Required items first (unranked, in as the pack took them), then by rank, then the
    other unranked ones (resources by name, items skipped before the ranking)."""
    rank = entry.get("rank")
    if rank is not None:
        return 1, rank
    return (0 if entry["included"] and entry.get("reason") in _REQUIRED else 2), 0


def context_pack_rows(record: ContextPackRecord, limit: int = 500) -> list[dict[str, Any]]:
    """Every item of ``record``, in or out, the required ones first, then by rank (other
    unranked ones last): what it is, its form or reason, its tokens, its score parts and
    why, as the pack pages show them. At most ``limit`` rows."""
    entries = [{**i, "included": True} for i in record.included]
    entries += [{**d, "included": False} for d in record.dropped]
    entries.sort(key=_row_place)
    entries = entries[:limit]
    newer = [
        {"section": e.get("section"), "id": e["older_than"]} for e in entries if e.get("older_than")
    ]
    labels = _labels(record, entries + newer)
    rows = []
    for entry in entries:
        section, item_id = str(entry.get("section")), str(entry.get("id"))
        reason = str(entry.get("reason") or "")
        if entry["included"]:
            form = str(entry.get("form") or "full")
            why = _WHY_IN.get(reason, reason or "in")
            if form != "full" or reason == "ranked":
                why = f"{why}; {_FORM_WHY.get(form, form)}"
            if entry.get("passage"):
                why = f"{why}, from “{entry['passage']}…”"
        else:
            why = _WHY_OUT.get(reason, reason)
        if entry.get("older_than"):
            why += f"; an older near-duplicate of {_briefly(labels, section, str(entry['older_than']))}"
        rows.append(
            {
                **entry,
                "label": labels.get((section, item_id), item_id),
                "why": why,
                "score": entry.get("score"),
            }
        )
    return rows
