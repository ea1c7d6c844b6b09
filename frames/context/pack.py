"""Assembling a context pack for a session (and frame) within a token budget.

Reads the session's layers (identity, environment, valid facts, working set), the
frame's ancestry and handles, hands them to the pure packer (``frames.context.packing``) and
stores the result as a ``ContextPackRecord``. Token counts come from storage
(``ContextHandle.estimated_tokens`` / ``summary_tokens``, ``Fact.tokens``); text made
here (brief, breadcrumbs) is estimated, never tokenized. No model call is made.

The number of queries does not depend on how many facts or handles there are: the
top frame (one query), one per ancestor (bounded by the frame depth), one for handles,
the facts selector's two, the working set, and one insert (with the move out of
``loading`` in its transaction the first time).
"""

import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from contextops.collector import cyclic_collector_paused
from contextops.embeddings import embed_query, vector_from_bytes, vectors_from_bytes
from contextops.errors import Invalid, NotFound
from contextops.rows import converter, param
from contextops.text import value_text
from contextops.zones import local_now, local_zone
from facts.selectors.ranking import facts_for_context
from facts.selectors.working_set import working_set_for_context
from frames.locks import session_require_not_ended
from frames.models import ContextHandle, ContextPackRecord, Frame, Session
from frames.models.context import SCORE_PARTS
from frames.selectors import frame_ancestry, session_top_frame
from frames.services.sessions import session_bootstrapped

from . import packing
from .annotations import notes_by_handle
from .as_of import AsOf, as_of_read
from .excerpts import HEAD
from .resources import COLD, INDEXED, OFFLINE, resource_name

# The facts a pack considers, best ranked first: a first read of one per 20 tokens of
# budget (at least 20, at most FACTS_FIRST_READ); when every one of them fitted with room
# left, the ranking is read again four times as deep, up to FACTS_LIMIT_MAX.
FACTS_FIRST_READ = 400
# With a query, the pack reads at least this many of the best-matching facts: its own
# ranking (BM25 and embeddings) then chooses among more than the database's first guess.
FACTS_QUERY_POOL = 200
FACTS_LIMIT_MAX = 2_000
HANDLE_FIELDS = (
    "id",
    "kind",
    "priority",
    "state",
    "content",
    "ref",
    "category",
    "estimated_tokens",
    "summary",
    "summary_tokens",
    "attention_weight",
    "embedding",
)


@dataclass
class ContextPack:
    record: ContextPackRecord
    result: packing.PackResult
    frame: Frame | None
    query: str
    # verbose, dense or ultra_dense, from the session's pressure level
    # (docs/concepts.md#pressure).
    format: str = "verbose"
    # Notes on the segments' handles, shown in the dense formats: handle id -> notes.
    notes: dict[str, list[str]] = field(default_factory=dict)


def brief_context_text(session: Session, now: datetime | None = None) -> str:
    """Layer 1 (identity) and layer 4 (environment) as a short plain-text brief."""
    identity = session.identity or {}
    env = session.environment or {}
    zone_name, _ = local_zone(env)
    local = local_now(env, now)
    who = identity.get("user_name") or identity.get("user_id") or "unknown user"
    lines = [
        f"User: {who}"
        + (
            f" ({identity['user_id']})"
            if identity.get("user_id") and identity.get("user_name")
            else ""
        )
        + f"; authority: {identity.get('authority') or 'unknown'}"
        + (f"; department: {identity['department']}" if identity.get("department") else "")
        + (f"; organization: {identity['organization']}" if identity.get("organization") else ""),
    ]
    if identity.get("permissions"):
        lines.append("Permissions: " + ", ".join(str(p) for p in identity["permissions"]))
    lines.append(
        f"Now: {local.strftime('%Y-%m-%d %H:%M')} ({zone_name})"
        + (f"; location: {env['location']}" if env.get("location") else "")
    )
    if env.get("external_data"):
        lines.append("External data: " + value_text(env["external_data"]))
    return "\n".join(lines)


def _facts(
    session: Session,
    frames: list[Frame],
    query: str,
    limit: int,
    reader_authority: str | None,
    as_of: AsOf | None = None,
    query_vector: Any = None,
    valid_at: datetime | None = None,
) -> list[packing.FactItem]:
    scope_ids = [str(session.pk), *(str(f.pk) for f in frames)]
    rows = facts_for_context(
        organization=session.organization,
        session=session,
        scope_ids=scope_ids,
        query=query,
        limit=limit,
        reader_authority=reader_authority,
        as_of=as_of.moment if as_of is not None else None,
        query_vector=query_vector,
        valid_at=valid_at,
    )
    vectors, present = vectors_from_bytes([fact.embedding for fact in rows])
    return [
        packing.FactItem(
            id=str(fact.pk),
            key=fact.key,
            value="",
            tokens=fact.tokens or 0,
            is_constraint=fact.is_constraint,
            stored=fact,
            subject=fact.subject,
            governs=fact.memory_type == "organizational",
            newness=int(fact.pk),  # ids grow with writes: the newest fact has the largest
            vector=vectors[index] if present[index] else None,
        )
        for index, fact in enumerate(rows)
    ]


def _more_facts_may_fit(
    result: packing.PackResult, facts: list[packing.FactItem], limit: int
) -> bool:
    """Whether a deeper read of the ranking could add facts: it was read to ``limit``
    (and not to the end), every fact read was packed, and the budget has room left."""
    return (
        limit < FACTS_LIMIT_MAX
        and len(facts) >= limit
        and result.remaining > 0
        and not any(d.section == "facts" for d in result.dropped)
    )


def _working_set(
    session: Session, query: str, as_of: AsOf | None = None
) -> list[packing.WorkingItem]:
    items = []
    for entry in working_set_for_context(session=session, query=query):
        if as_of is not None and entry.updated_at > as_of.moment:
            continue
        value = value_text(entry.value)
        tokens = int(getattr(entry, "tokens", 0) or 0) or packing.estimate_tokens(value)
        items.append(
            packing.WorkingItem(
                key=entry.key,
                value=f"{entry.key}: {value}",
                tokens=tokens,
                vector=vector_from_bytes(getattr(entry, "embedding", None)),
            )
        )
    return items


@dataclass
class _FrameRead:
    """A frame's handles as a pack read them (``version``: see ``_handles_changed``),
    what ``_segments`` made of them, and the memo packing keeps of those segments
    (``packing.PackInput.memo``)."""

    version: Any
    segments: list[packing.Segment]
    skipped: list[tuple[str, str]]
    cold: list[dict[str, Any]]
    memo: dict[Any, Any] = field(default_factory=dict)


# An agent asks for a pack step after step, and its frame's handles change little between
# two: the last read of each of the FRAMES_KEPT frames packed most recently is kept, and a
# pack that finds the very same rows starts from what was made of them (a frame of a
# thousand handles spends most of its pack preparing them).
FRAMES_KEPT = 32
_frames_read: "OrderedDict[Any, _FrameRead]" = OrderedDict()
_frames_read_lock = threading.Lock()

SegmentsRead = tuple[list[packing.Segment], list[tuple[str, str]], list[dict[str, Any]]]


def _segments(
    frame: Frame, include: set[str], exclude: set[str], as_of: AsOf | None = None
) -> tuple[*SegmentsRead, dict[Any, Any] | None]:
    """The frame's handles as segments, what was skipped and why, the cold handles
    (discovered, not loaded) the pack lists by name, and the memo packing may keep of
    these segments (None for a pack that names handles to include or exclude, or reads a
    past moment): one read of the handles, as plain rows of the columns the pack uses (a
    frame may hold a thousand of them)."""
    if as_of is not None:
        rows = [
            (str(row[0]), *row[1:-1])
            for row in ContextHandle.objects.filter(frame_id=frame.pk)
            .order_by("created_at", "id")
            .values_list(*HANDLE_FIELDS, "created_at")
            if as_of.handle_visible(str(row[0]), row[-1])
        ]
        return (*_segments_of(rows, include, exclude, as_of), None)
    if include or exclude:
        return (*_segments_of(_handle_rows(frame), include, exclude, None), None)
    with _frames_read_lock:
        read = _frames_read.get(frame.pk)
        if read is not None:
            _frames_read.move_to_end(frame.pk)
    version, changed = _handles_changed(frame, read.version if read is not None else None)
    if read is None or changed is not None:
        read = _FrameRead(version, *_segments_of(changed or [], include, exclude, None))
        with _frames_read_lock:
            _frames_read[frame.pk] = read
            while len(_frames_read) > FRAMES_KEPT:
                _frames_read.popitem(last=False)
    return read.segments, read.skipped, read.cold, read.memo


def _segments_of(
    rows: list[tuple[Any, ...]], include: set[str], exclude: set[str], as_of: AsOf | None
) -> SegmentsRead:
    """``_segments`` of the handles' ``rows``, made anew."""
    segments, skipped, cold = [], [], []
    # Every stored vector decoded at once (one buffer), each segment given its row.
    vectors, present = vectors_from_bytes([row[11] for row in rows])
    for order, row in enumerate(rows):
        hid, kind, priority, state, content, ref, _, tokens, summary, summary_tokens = row[:10]
        attention = row[10]
        if as_of is not None:
            state = as_of.handle_states.get(hid, state)
            if hid in as_of.summaries_after:
                summary, summary_tokens = "", 0
        forced = hid in include
        if hid in exclude:
            skipped.append((hid, "excluded"))
            continue
        if state == OFFLINE:
            skipped.append((hid, "offline"))
            continue
        if state == COLD and not forced and priority != "critical":
            # Discovered, not loaded: the pack lists it by name only (``resources``).
            skipped.append((hid, "cold"))
            cold.append(dict(zip(HANDLE_FIELDS, row, strict=True)))
            continue
        if state == INDEXED and not summary and not forced and priority != "critical":
            skipped.append((hid, "indexed_without_summary"))
            continue
        segments.append(
            packing.Segment(
                id=hid,
                kind=kind,
                priority=priority,
                state=state,
                content=content or ref,
                tokens=tokens,
                summary=summary,
                summary_tokens=summary_tokens,
                order=order,
                forced=forced,
                attention=attention,
                vector=vectors[order] if present[order] else None,
            )
        )
    return segments, skipped, cold


@functools.cache
def _handle_rows_sql() -> str:
    """On PostgreSQL the ids are read as their text (``uuid::text`` is the form ``str``
    of a UUID gives); SQLite stores them as 32 hex digits, converted here."""
    qn = connection.ops.quote_name
    selected = [qn(f) for f in HANDLE_FIELDS]
    if connection.vendor == "postgresql":
        selected[0] += "::text"
    return (
        f"SELECT {', '.join(selected)} FROM {qn(ContextHandle._meta.db_table)}"
        ' WHERE "frame_id" = %s ORDER BY "created_at", "id"'
    )


@functools.cache
def _handle_versions_sql() -> str:
    """PostgreSQL: a digest of the frame's handles' row versions (each row's place and the
    transaction that wrote it: any insert, update or delete, by the services or past them,
    gives another; rows read in another order only give another digest), then the rows,
    only when the digest differs from the one given (a condition PostgreSQL evaluates
    once, before reading any handle)."""
    qn = connection.ops.quote_name
    table = qn(ContextHandle._meta.db_table)
    selected = ", ".join(f"h.{qn(f)}" for f in HANDLE_FIELDS).replace('h."id"', 'h."id"::text', 1)
    return f"""
        WITH versions AS MATERIALIZED (
            SELECT md5(string_agg(ctid::text || xmin::text, ',')) AS digest
            FROM {table} WHERE "frame_id" = %s
        )
        SELECT versions.digest, handle.* FROM versions LEFT JOIN (
            SELECT {selected}, h."created_at" AS order_at, h."id" AS order_id FROM {table} h
            WHERE h."frame_id" = %s AND (SELECT digest FROM versions) IS DISTINCT FROM %s
        ) handle ON true
        ORDER BY handle.order_at, handle.order_id
    """


def _handles_changed(frame: Frame, known: Any) -> tuple[Any, list[tuple[Any, ...]] | None]:
    """The version of ``frame``'s handles, and their rows (``_handle_rows``) unless that
    version is ``known`` (None then). The version is the rows themselves, compared, but on
    PostgreSQL, where it is a digest of the rows' versions: the rows are not read again."""
    if connection.vendor != "postgresql":
        rows = _handle_rows(frame)
        return rows, (None if rows == known else rows)
    pk = param(ContextHandle, "frame", frame.pk)
    with connection.cursor() as cursor:
        cursor.execute(_handle_versions_sql(), [pk, pk, known])
        found = cursor.fetchall()
    digest = found[0][0]
    if known is not None and digest == known:
        return digest, None
    return digest, [row[1:-2] for row in found if row[1] is not None]


def _handle_rows(frame: Frame) -> list[tuple[Any, ...]]:
    """The frame's handles, oldest first, as rows of HANDLE_FIELDS with their ids as text:
    one statement written once per process (a frame may hold a thousand handles, and the
    ORM's converting of each row cost more than reading it)."""
    with connection.cursor() as cursor:
        cursor.execute(_handle_rows_sql(), [param(ContextHandle, "frame", frame.pk)])
        rows = cursor.fetchall()
    if connection.vendor != "postgresql":
        to_uuid = converter(ContextHandle, "id")
        rows = [(str(to_uuid(row[0])), *row[1:]) for row in rows]
    return rows


def _with_notes(segment: packing.Segment, notes: list[str]) -> packing.Segment:
    """``segment`` with its handle's notes after its content (and its summary), counted."""
    text = "".join(f"\n[note] {note}" for note in notes)
    tokens = packing.estimate_tokens(text)
    return replace(
        segment,
        content=segment.content + text,
        tokens=segment.tokens + tokens,
        summary=segment.summary + text if segment.summary else "",
        summary_tokens=segment.summary_tokens + tokens if segment.summary else 0,
    )


def _resources(cold: list[dict[str, Any]], pack_format: str) -> list[packing.ResourceName]:
    """The frame's cold handles (discovered, not loaded) by name, oldest first; the
    ultra-dense format marks each with cold's mark, ○ (docs/concepts.md#resources)."""
    resources = []
    for handle in cold:
        name = resource_name(
            ref=handle["ref"],
            content=handle["content"],
            category=handle["category"],
            kind=handle["kind"],
        )
        if pack_format == "ultra_dense":
            name = f"○ {name}"
        resources.append(packing.ResourceName(handle["id"], name, packing.estimate_tokens(name)))
    return resources


# A recorded excerpt keeps this many characters of what it showed, to say which passage.
PASSAGE_SHOWN = 120


def _included_entry(item: packing.PackedItem[Any]) -> dict[str, Any]:
    """An included item as the pack's record keeps it: enough to explain it later."""
    entry: dict[str, Any] = {
        "section": item.section,
        "id": item.id,
        "tokens": item.tokens,
        "form": item.form,
        "rank": item.rank,
        "reason": item.reason,
        "score": dict(zip(SCORE_PARTS, item.score, strict=True)) if item.score else None,
        "older_than": item.older_than,
    }
    if item.form == "excerpt":  # which part: the opening of the passages shown
        entry["passage"] = " ".join(item.text.removeprefix(HEAD).split())[:PASSAGE_SHOWN]
    return entry


@cyclic_collector_paused()
def context_pack_assemble(
    *,
    session: Session,
    budget_tokens: int,
    frame: Frame | None = None,
    query: str = "",
    include_handles: list[str] | tuple = (),
    exclude_handles: list[str] | tuple = (),
    min_compaction: str = "none",
    reader_authority: str | None = None,
    store: bool = True,
    actor: str = "",
    as_of_seq: int | None = None,
    valid_at: datetime | None = None,
) -> ContextPack:
    """Assemble, store and return the context pack of ``session`` (at ``frame`` or its top).

    Facts are those readable at the session's authority and, when ``reader_authority``
    is given (the calling agent's), at that one too: a pack never shows a reader more
    than it could read itself. ``store=False`` assembles without keeping a record (the
    dashboard's preview), so the packs an agent lists are the ones agents asked for; a
    stored pack also moves a loading session to bootstrap.

    Raises Invalid(code="budget_too_small") under 500 tokens, NotFound when ``frame`` is
    not one of the session's frames, and Invalid(field="include_handles") for an included
    handle the frame does not hold (unknown, another frame's, or another organization's).
    Without any frame the pack holds the brief, facts and working set only.

    ``as_of_seq``: a replay, the pack as it would have been assembled right after that
    event of the session (``as_of``): stored with ``as_of_seq`` so it can be compared
    with the recorded ones, in an ended session too, and moving no lifecycle.
    Invalid(field="as_of_seq") for an event the session has not; Invalid(field="frame_id")
    for a frame pushed after it.

    ``valid_at``: the facts that held at that time (valid time) instead of the current
    ones; every other section is as now (or as at ``as_of_seq``).
    """
    if budget_tokens < packing.MIN_BUDGET:
        raise Invalid(
            f"A context pack needs a budget of at least {packing.MIN_BUDGET} tokens.",
            code="budget_too_small",
            minimum=packing.MIN_BUDGET,
            budget=budget_tokens,
        )
    if min_compaction not in packing.LEVELS:
        raise Invalid(
            f"min_compaction must be one of {', '.join(packing.LEVELS)}.",
            field="min_compaction",
        )
    as_of = as_of_read(session=session, seq=as_of_seq) if as_of_seq is not None else None
    if (
        store and as_of is None
    ):  # an agent's pack is work in the session; a person's preview only looks
        session_require_not_ended(session)
    if frame is not None and frame.session_id != session.pk:
        raise NotFound("No such frame in this session.")
    if as_of is None:
        frame = frame or session_top_frame(session)
    elif frame is None:
        frame = as_of.top_frame(list(Frame.objects.filter(session=session)))
    elif not as_of.frame_existed(frame):
        raise Invalid("The frame was pushed after that event.", field="frame_id")
    ancestry = frame_ancestry(frame) if frame is not None else []
    include, exclude = {str(h) for h in include_handles}, {str(h) for h in exclude_handles}
    segments, skipped, cold, memo = (
        _segments(frame, include, exclude, as_of) if frame else ([], [], [], None)
    )
    unknown = include - {s.id for s in segments} - {hid for hid, _ in skipped}
    if unknown:
        raise Invalid(
            "include_handles names handles the frame does not hold"
            + (" at that event" if as_of is not None else "")
            + f": {', '.join(sorted(unknown)[:5])}{' …' if len(unknown) > 5 else ''}.",
            field="include_handles",
        )
    pack_format = packing.pack_format(session.pressure_level)
    notes = (
        notes_by_handle([s.id for s in segments]) if segments and pack_format != "verbose" else {}
    )
    if notes:
        segments = [_with_notes(s, notes[s.id]) if s.id in notes else s for s in segments]
        memo = None  # these segments are this pack's own
    # The question's vector, once (a pack never embeds a stored item: they carry theirs).
    query_vector = embed_query(query) if query.strip() else None
    # With a query the ranking here re-reads relevance: it gets a deeper pool to choose from.
    limit = (
        max(FACTS_QUERY_POOL, min(FACTS_FIRST_READ, budget_tokens // 10))
        if query
        else max(20, min(FACTS_FIRST_READ, budget_tokens // 20))
    )
    data = packing.PackInput(
        budget=budget_tokens,
        brief_context=brief_context_text(session, as_of.moment if as_of else None),
        breadcrumbs=[
            packing.Breadcrumb(
                str(f.pk), f.goal, as_of.status_of(f) if as_of else f.status, f.depth
            )
            for f in ancestry
        ],
        segments=segments,
        facts=_facts(
            session, ancestry, query, limit, reader_authority, as_of, query_vector, valid_at
        ),
        working_set=_working_set(session, query, as_of),
        min_compaction=packing.format_min_level(pack_format, min_compaction),
        skipped=skipped,
        resources=_resources(cold, pack_format),
        query=query,
        query_vector=query_vector,
        memo=memo,
    )
    result = packing.pack(data)
    while _more_facts_may_fit(result, data.facts, limit):
        limit = min(FACTS_LIMIT_MAX, limit * 4)
        data = replace(
            data,
            facts=_facts(
                session, ancestry, query, limit, reader_authority, as_of, query_vector, valid_at
            ),
        )
        result = packing.pack(data)
    record = ContextPackRecord(
        session=session,
        frame=frame,
        budget=budget_tokens,
        used=result.used,
        level=result.level,
        min_compaction=min_compaction,
        breakdown=result.breakdown,
        included=[_included_entry(i) for i in result.included],
        query=query[:2000],
        as_of_seq=as_of_seq,
        format=pack_format,
    )
    record.dropped_keep(result.dropped)
    if store and session.lifecycle_state == Session.Lifecycle.LOADING:
        with transaction.atomic():
            record.save(force_insert=True)
            if as_of is None:
                # An agent reading its context back is what moves a loading session on.
                session_bootstrapped(session=session, actor=actor)
    elif store:
        record.save(force_insert=True)
    return ContextPack(
        record=record, result=result, frame=frame, query=query, format=pack_format, notes=notes
    )
