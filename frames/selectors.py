"""Reads of sessions and frames, always scoped to one organization.

Anything of another organization, or an id that is not even well formed, is NotFound:
the API never says 403 for objects a caller may not know exist.
"""

import functools
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as day_time
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from contextops.errors import NotFound
from contextops.ids import row_get, uuid_or_none
from contextops.models import Organization
from contextops.pages import lookups_set
from contextops.rows import columns, converter, fetch, param

from .archive import session_events
from .budget import call_occupancy, token_counts
from .costs import CostTotal, Price, call_cost, cost_total, price_for
from .models import (
    ContextHandle,
    ContextPackRecord,
    Event,
    EventArchive,
    Frame,
    ModelPrice,
    Session,
    Usage,
)
from .pressure import LEVELS, LOW, Pressure, level_next, utilization_of


def session_get(*, organization, session_id: Any) -> Session:
    session = row_get(
        Session.objects.filter(organization=organization), session_id, "No such session."
    )
    if isinstance(organization, Organization):
        session.organization = organization  # the one it was found in: no query to read it
    return session


def frame_get(*, organization, frame_id: Any) -> Frame:
    frames = Frame.objects.select_related("session").filter(organization=organization)
    return row_get(frames, frame_id, "No such frame.")


def session_get_optional(*, organization, session_id: Any) -> Session | None:
    """``session_get`` when a request names a session; None when ``session_id`` is empty."""
    return session_get(organization=organization, session_id=session_id) if session_id else None


def frame_get_optional(*, organization, frame_id: Any) -> Frame | None:
    """``frame_get`` when a request names a frame; None when ``frame_id`` is empty."""
    return frame_get(organization=organization, frame_id=frame_id) if frame_id else None


def session_frame_get(*, session: Session, frame_id: Any) -> Frame:
    """One of ``session``'s frames (the session already read for its organization);
    NotFound for another session's frame or a malformed id."""
    return row_get(
        Frame.objects.filter(session=session), frame_id, "No such frame in this session."
    )


SESSION_ORDERS = {
    "newest": ("-created_at", "-pk"),
    "oldest": ("created_at", "pk"),
    "last_activity": ("-updated_at", "-pk"),
    "tokens": ("-window_tokens", "-created_at"),
    "calls": ("-api_calls_total", "-created_at"),
}


def _top_pressure(**status: Any) -> Subquery:
    return Subquery(
        Frame.objects.filter(session=OuterRef("pk"), **status)
        .order_by(*_STACK_ORDER)
        .values("pressure_level")[:1]
    )


def day_start(moment: datetime | date, *, after: bool = False) -> datetime:
    """A moment as it is; a date alone as the start of that day in the server's zone (of
    the next day with ``after``, so an ``until`` date includes its whole day)."""
    if isinstance(moment, datetime):
        return moment
    day = moment + timedelta(days=1) if after else moment
    return timezone.make_aware(datetime.combine(day, day_time.min))


def session_list(
    *,
    organization,
    search: str = "",
    status: str = "",
    pressure: str = "",
    agent: str = "",
    since: datetime | date | None = None,
    until: datetime | date | None = None,
    order: str = "newest",
) -> QuerySet[Session]:
    """The organization's sessions matching the filters, in ``order`` (``SESSION_ORDERS``).

    ``search`` looks in title, agent, model and ids; ``status`` is the lifecycle state;
    ``pressure`` the level the session's gauge shows (that of the top of its stack, as
    ``pressure_of`` reads it, so a list and a page never disagree); ``agent`` the agent's
    name; ``since`` / ``until`` bound when the session started (a date alone is that
    whole day in the server's zone: ``since`` from its start, ``until`` through its end). Each row carries
    ``gauge_level`` and ``window_tokens`` (every token its calls put in the window).
    """
    sessions = (
        Session.objects.filter(organization=organization)
        .select_related("agent")
        .annotate(
            gauge_level=Coalesce(
                _top_pressure(status=Frame.Status.ACTIVE),
                _top_pressure(status__in=Frame.OPEN_STATUSES),
                F("pressure_level"),
            ),
            window_tokens=F("input_tokens_total")
            + F("output_tokens_total")
            + F("cache_creation_tokens_total")
            + F("cache_read_tokens_total"),
        )
        .order_by(*SESSION_ORDERS.get(order, SESSION_ORDERS["newest"]))
    )
    search = search.strip()
    if search:
        condition = (
            Q(title__icontains=search)
            | Q(agent__name__icontains=search)
            | Q(model__icontains=search)
        )
        pk = uuid_or_none(search)
        if pk is not None:
            condition |= Q(pk=pk)
        elif (ids := _uuid_prefix_range(search)) is not None:
            condition |= Q(pk__gte=ids[0], pk__lte=ids[1])
        sessions = sessions.filter(condition)
    sessions = sessions.filter(
        **lookups_set(lifecycle_state=status, gauge_level=pressure, agent__name=agent)
    )
    if since is not None:
        sessions = sessions.filter(started_at__gte=day_start(since))
    if until is not None:
        sessions = sessions.filter(started_at__lt=day_start(until, after=True))
    return sessions


def _uuid_prefix_range(text: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """The ids that start with ``text`` (4 or more hex digits, dashes ignored: the short
    ids the CLI, the audit log and the RLM list show) as the range (lowest, highest);
    None for anything else."""
    digits = text.replace("-", "").lower()
    if not 4 <= len(digits) < 32 or digits.strip("0123456789abcdef"):
        return None
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


def session_graph_threads(session: Session) -> list:
    """The LangGraph threads ``session`` keeps (``frames.graphs``), latest first; empty
    for a session without one. Read through the relation, as frames sits below graphs."""
    return list(session.graph_threads.only("id", "thread_id", "session_id", "updated_at"))


def sessions_graph_thread(session_ids: list) -> dict[Any, Any]:
    """For each of these sessions that keeps a LangGraph thread, the id of its latest
    thread (the one a list row links to); sessions without one are absent. One query."""
    rows = (
        Session.objects.filter(pk__in=session_ids, graph_threads__isnull=False)
        .order_by("graph_threads__updated_at")
        .values_list("pk", "graph_threads__id")
    )
    return dict(rows)  # the latest thread of a session comes last and stays


def agent_names(*, organization) -> list[str]:
    """The names of the organization's agents that have sessions, sorted."""
    return sorted(
        set(
            Session.objects.filter(organization=organization, agent__isnull=False).values_list(
                "agent__name", flat=True
            )
        )
    )


def frame_ancestry(frame: Frame) -> list[Frame]:
    """The frame's ancestors and itself, root first; one query per level, bounded by depth."""
    chain = [frame]
    parent_id = frame.parent_id
    while parent_id is not None and len(chain) <= frame.depth + 1:
        parent = Frame.objects.get(pk=parent_id)
        chain.append(parent)
        parent_id = parent.parent_id
    return list(reversed(chain))


def frame_children(
    *, frame: Frame | None, session: Session, limit: int = 200, offset: int = 0
) -> list[Frame]:
    """One page of a frame's children (or the session's roots when ``frame`` is None)."""
    children = Frame.objects.filter(session=session, parent=frame).order_by("created_at", "id")
    return list(children[offset : offset + limit])


def frames_children_of(parents: list[Frame], *, session: Session) -> dict[Any, list[Frame]]:
    """The children of each of ``parents``, by parent id, in order (one query)."""
    found: dict[Any, list[Frame]] = {}
    # Queried even for no parents (an id no frame has), so a page costs the same queries
    # whatever its tree looks like.
    wanted = [p.pk for p in parents] or [uuid.UUID(int=0)]
    rows = Frame.objects.filter(session=session, parent__in=wanted).order_by("created_at", "id")
    for frame in rows:
        found.setdefault(frame.parent_id, []).append(frame)
    return found


@functools.cache
def _overruns_below_sql(count: int) -> str:
    """Walks up from each overspent frame of a session (``Budget.overrun`` in SQL) to its
    ancestors: one row per (overspent frame, ancestor) pair, counted per ancestor asked for."""
    qn = connection.ops.quote_name
    table = qn(Frame._meta.db_table)
    marks = ", ".join(["%s"] * count)
    return (
        f"WITH RECURSIVE up(over_id, ancestor_id) AS ("
        f" SELECT f.{qn('id')}, f.{qn('parent_id')} FROM {table} f"
        f" WHERE f.{qn('session_id')} = %s AND f.{qn('parent_id')} IS NOT NULL"
        f" AND f.{qn('budget_used')} + f.{qn('budget_reserved')} + f.{qn('subcall_allocation')}"
        f" > f.{qn('budget_total')}"
        f" UNION ALL SELECT up.over_id, p.{qn('parent_id')} FROM up"
        f" JOIN {table} p ON p.{qn('id')} = up.ancestor_id WHERE p.{qn('parent_id')} IS NOT NULL"
        f") SELECT ancestor_id, COUNT(*) FROM up WHERE ancestor_id IN ({marks})"
        f" GROUP BY ancestor_id"
    )


def overruns_below(frames: list[Frame], *, session: Session) -> dict[Any, int]:
    """How many overspent frames each of ``frames`` has among its descendants, by frame id
    (absent when none): one recursive query, whatever the depth, so a collapsed node of the
    tree can say an overrun is hidden under it. Queried even for no frames, so a page costs
    the same queries whatever its tree looks like."""
    ids = [f.pk for f in frames] or [uuid.UUID(int=0)]
    read = converter(Frame, "parent")
    params = [param(Frame, "session", session.pk), *(param(Frame, "id", pk) for pk in ids)]
    with connection.cursor() as cursor:
        cursor.execute(_overruns_below_sql(len(ids)), params)
        return {read(ancestor): count for ancestor, count in cursor.fetchall()}


@functools.cache
def _session_top_frame_sql() -> str:
    statuses = ", ".join(["%s"] * len(Frame.OPEN_STATUSES))
    return (
        f"SELECT {columns(Frame, 'f')} FROM {Frame._meta.db_table} f"
        f' WHERE f."session_id" = %s AND f."status" IN ({statuses})'
        f' ORDER BY CASE WHEN f."status" = %s THEN 0 ELSE 1 END, {stack_order_sql("f")} LIMIT 1'
    )


def session_top_frame(session: Session) -> Frame | None:
    """The top of the session's stack (as ``top_frame`` chooses it) with every field, in
    one query: the newest active frame, else the newest open one. Its SQL is written once
    per process (every context pack and turn asks for it)."""
    found = fetch(
        Frame,
        _session_top_frame_sql(),
        [param(Frame, "session", session.pk), *Frame.OPEN_STATUSES, Frame.Status.ACTIVE],
    )
    return found[0] if found else None


@dataclass
class PendingWork:
    frame_id: str
    work_type: str
    description: str


@dataclass
class ResumeState:
    current_frame: Frame | None
    frame_stack: list[Frame]
    pending_work: list[PendingWork] = field(default_factory=list)
    recovery_summary: dict[str, Any] = field(default_factory=dict)


RECENT_TURNS_CHECKED = 50


def _incomplete_tool_calls(frames: list[Frame]) -> dict[Any, list[str]]:
    """For each active frame: tool calls it recorded that no tool result answers yet."""
    active = [f.pk for f in frames if f.status == Frame.Status.ACTIVE]
    if not active:
        return {}
    rows = ContextHandle.objects.filter(
        frame_id__in=active, kind__in=["tool_call", "tool_result"]
    ).exclude(tool_call_id="")
    calls: dict[Any, dict[str, str]] = {}
    answered: set[tuple[Any, str]] = set()
    for frame_id, kind, call_id, category in rows.values_list(
        "frame_id", "kind", "tool_call_id", "category"
    ):
        if kind == "tool_call":
            calls.setdefault(frame_id, {})[call_id] = category or call_id
        else:
            answered.add((frame_id, call_id))
    # Tool calls the conversation recorded (POST /sessions/{id}/messages): a result joins
    # the turn of its call, so a call is pending while its own turn has no result for it.
    # Read through the reverse relation (conversation sits above this floor), newest turns
    # only: an older call without a result was abandoned, not in progress.
    turns = (
        Frame.objects.filter(pk__in=active, turns__isnull=False)
        .order_by("-turns__created_at", "-turns__index")
        .values_list("pk", "turns__tool_calls", "turns__tool_results")[:RECENT_TURNS_CHECKED]
    )
    for frame_id, tool_calls, tool_results in turns:
        results = {r.get("tool_use_id") for r in tool_results or [] if isinstance(r, dict)}
        for call in tool_calls or []:
            if isinstance(call, dict) and call.get("id") and call["id"] not in results:
                calls.setdefault(frame_id, {})[call["id"]] = call.get("name") or call["id"]
    return {
        frame_id: [name for call_id, name in pending.items() if (frame_id, call_id) not in answered]
        for frame_id, pending in calls.items()
    }


def session_resume_state(session: Session) -> ResumeState:
    """Resuming (docs/concepts.md#resume): the stack from the top frame to its root, and the
    work left pending."""
    started = time.perf_counter()
    top = session_top_frame(session)
    stack = frame_ancestry(top) if top is not None else []
    pending: list[PendingWork] = []
    incomplete = _incomplete_tool_calls(stack)
    for frame in stack:
        if frame.status == Frame.Status.WAITING:
            pending.append(
                PendingWork(str(frame.pk), "waiting_for_subcall", f"Frame '{frame.goal}' waiting")
            )
        elif frame.status == Frame.Status.SUSPENDED:
            pending.append(
                PendingWork(str(frame.pk), "suspended", f"Frame '{frame.goal}' suspended")
            )
        for tool in incomplete.get(frame.pk, []):
            pending.append(
                PendingWork(str(frame.pk), "tool_in_progress", f"Tool '{tool}' incomplete")
            )
    suspended = (
        Frame.objects.filter(session=session, status=Frame.Status.SUSPENDED)
        .exclude(pk__in=[f.pk for f in stack])
        .order_by("created_at")
    )
    for frame in suspended:
        pending.append(PendingWork(str(frame.pk), "suspended", f"Frame '{frame.goal}' suspended"))
    session.refresh_from_db(fields=["last_event_seq"])
    return ResumeState(
        current_frame=stack[-1] if stack else None,
        frame_stack=stack,
        pending_work=pending,
        recovery_summary={
            "frames_recovered": len(stack),
            "pending_work_items": len(pending),
            "last_event_seq": session.last_event_seq,
            "recovery_time_ms": round((time.perf_counter() - started) * 1000, 3),
        },
    )


def event_list(
    *, session: Session, after: int = 0, limit: int = 500, frame: Frame | None = None
) -> list[Event]:
    archived = EventArchive.objects.filter(session=session, last_seq__gt=after).exists()
    if archived:
        # An ended session past retention: its log is read back from the archive files.
        found = []
        for event in session_events(session, after=after):
            if frame is None or str(event.frame_id or "") == str(frame.pk):
                found.append(event)
                if len(found) == limit:
                    break
        return found
    events = Event.objects.filter(session=session, seq__gt=after)
    if frame is not None:
        events = events.filter(frame_id=frame.pk)
    return list(events.order_by("seq")[:limit])


@dataclass
class TreeChanges:
    """What the events after one sequence number did to a session's frame tree.

    ``appended``: new frames to add at the end of their parent's list (or the roots);
    ``reshaped``: frames that got their first children, whose node becomes expandable;
    ``updated``: other frames whose status or budget moved. Each is a list of frames.
    """

    after: int
    appended: list[Frame] = field(default_factory=list)
    reshaped: list[Frame] = field(default_factory=list)
    updated: list[Frame] = field(default_factory=list)


def tree_changes(*, session: Session, after: int, limit: int, page_size: int) -> TreeChanges:
    """The frames touched by up to ``limit`` events after ``after``, and their parents.

    A constant number of queries, whatever the size of the tree: the events, the frames
    they name, those frames' parents, and (only when a root was pushed) the root count.
    A new frame is appended only where its whole list is on the page once loaded (at most
    ``page_size`` siblings); under a longer list it shows up on "Show more".
    """
    events = list(
        Event.objects.filter(session=session, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "type", "frame_id")[:limit]
    )
    changes = TreeChanges(after=events[-1][0] if events else session.last_event_seq)
    touched = {frame_id for _, _, frame_id in events if frame_id is not None}
    pushed = {frame_id for _, kind, frame_id in events if kind == "frame.pushed"}
    if not touched:
        return changes
    frames = {f.pk: f for f in Frame.objects.filter(session=session, pk__in=touched)}
    parent_ids = {f.parent_id for f in frames.values() if f.parent_id} - frames.keys()
    if parent_ids:
        frames.update({f.pk: f for f in Frame.objects.filter(session=session, pk__in=parent_ids)})
    new_children = Counter(f.parent_id for f in frames.values() if f.pk in pushed)
    reshaped = {
        pk
        for pk, frame in frames.items()
        if pk not in pushed
        and frame.children_count
        and frame.children_count == new_children.get(pk)
    }
    roots_fit = None not in new_children or (
        Frame.objects.filter(session=session, parent=None).count() <= page_size
    )
    for frame in sorted(frames.values(), key=lambda f: (f.created_at, str(f.pk))):
        if frame.pk in reshaped:
            changes.reshaped.append(frame)
        elif frame.pk not in pushed:
            changes.updated.append(frame)
        elif frame.parent_id is None:
            if roots_fit:
                changes.appended.append(frame)
        else:
            parent = frames.get(frame.parent_id)
            if (
                parent is not None
                and parent.pk not in pushed
                and parent.pk not in reshaped
                and parent.children_count <= page_size
            ):
                changes.appended.append(frame)
    return changes


def frame_calls_recent(*, frame: Frame, limit: int) -> tuple[list[Usage], int]:
    """The frame's latest ``limit`` model calls, newest first (by when each was sent, else
    recorded: ``call_list``'s order, reversed), and how many the frame made in all."""
    calls = Usage.objects.filter(frame=frame)
    newest = calls.order_by(Coalesce("started_at", "created_at").desc(), "-id")
    return list(newest[:limit]), calls.count()


@dataclass
class EventsPage:
    """A page of a frame's events, newest first: the ``limit`` events before the sequence
    number ``before`` (None: the newest page). ``newer`` is how many of the frame's events
    are newer than the page, ``count`` how many it has in all, and ``newer_before`` the
    anchor of the page just newer than this one (None when that is the newest page)."""

    events: list[Event]
    count: int
    newer: int = 0
    before: int | None = None
    newer_before: int | None = None


def frame_events_newest_first(*, frame: Frame, limit: int, before: int | None) -> EventsPage:
    """The ``limit`` events about ``frame`` before the sequence number ``before``, newest
    first: a page anchored on a sequence number keeps its rows while new events arrive.
    An anchor at or past the oldest event gives the oldest page; one with nothing newer,
    the newest. The log of a session past retention is read back from its archive files."""
    session = frame.session
    if EventArchive.objects.filter(session=session).exists():
        found = [e for e in session_events(session) if str(e.frame_id or "") == str(frame.pk)]
        rows = [e for e in found if before is None or e.seq < before][-limit:][::-1]
        if not rows and found and before is not None:
            rows = found[:limit][::-1]
            before = rows[0].seq + 1
        newer = [e.seq for e in found if rows and e.seq > rows[0].seq]
        return _events_page(rows, len(found), len(newer), before, newer[limit : limit + 1])
    events = Event.objects.filter(session=session, frame_id=frame.pk)
    page = events if before is None else events.filter(seq__lt=before)
    rows = list(page.order_by("-seq")[:limit])
    if before is None:
        return EventsPage(rows, events.count())
    if not rows:
        rows = list(events.order_by("seq")[:limit])[::-1]
        before = rows[0].seq + 1 if rows else None
    newest = rows[0].seq if rows else 0
    counts = events.aggregate(count=Count("pk"), newer=Count("pk", filter=Q(seq__gt=newest)))
    # The page just newer holds the ``limit`` events above this one, anchored on the event
    # after them; it is read only when it is not the newest page, which has no anchor.
    newer_before = (
        events.filter(seq__gt=newest)
        .order_by("seq")
        .values_list("seq", flat=True)[limit : limit + 1]
        if counts["newer"] > limit
        else []
    )
    return _events_page(rows, counts["count"], counts["newer"], before, list(newer_before))


def _events_page(
    rows: list[Event], count: int, newer: int, before: int | None, newer_before: list[int]
) -> EventsPage:
    if not newer or before is None:  # nothing newer than the page: the newest page
        return EventsPage(rows, count)
    return EventsPage(rows, count, newer, before, newer_before[0] if newer_before else None)


def context_packs_newest_first(session: Session) -> QuerySet[ContextPackRecord]:
    """The packs agents asked for in ``session`` (previews are never stored)."""
    return ContextPackRecord.objects.filter(session=session).order_by("-created_at", "-id")


TOP_FRAME_FIELDS = (
    "id",
    "session_id",
    "last_occupancy_tokens",
    "pressure_level",
    "status",
    "goal",
    "created_at",
)
# The order of a session's stack, its top first: the deepest frame, then the newest.
_STACK_ORDER = ("-depth", "-created_at")


def stack_order_sql(alias: str) -> str:
    """``_STACK_ORDER`` as the ORDER BY of SQL written by hand over frames aliased ``alias``."""
    return ", ".join(
        f'{alias}."{name.lstrip("-")}"'  # plain fields: each column is its field's name
        + (" DESC" if name.startswith("-") else "")
        for name in _STACK_ORDER
    )


def top_frame(session: Session) -> Frame | None:
    """The top of the session's stack: its newest active frame, else its newest open one."""
    frames = Frame.objects.filter(session=session).only(*TOP_FRAME_FIELDS)
    return (
        frames.filter(status=Frame.Status.ACTIVE).order_by(*_STACK_ORDER).first()
        or frames.filter(status__in=Frame.OPEN_STATUSES).order_by(*_STACK_ORDER).first()
    )


def _top_frame_id(session_ref: str = "pk", **status: Any) -> Subquery:
    return Subquery(
        Frame.objects.filter(session=OuterRef(session_ref), **status)
        .order_by(*_STACK_ORDER)
        .values("pk")[:1]
    )


def top_frame_id_of(session_ref: str) -> Coalesce:
    """The id of the top of the stack (as ``top_frame`` chooses it) of the session whose
    id the outer query's ``session_ref`` holds, as an annotation: no query of its own."""
    return Coalesce(
        _top_frame_id(session_ref, status=Frame.Status.ACTIVE),
        _top_frame_id(session_ref, status__in=Frame.OPEN_STATUSES),
    )


def top_frames(sessions: QuerySet[Session], page: slice) -> list[tuple[Session, Frame | None]]:
    """The ``page`` of ``sessions``, each with the top of its stack (as ``top_frame``
    chooses it), in two queries whatever the page's length."""
    annotated = sessions.annotate(
        top_active_id=_top_frame_id(status=Frame.Status.ACTIVE),
        top_open_id=_top_frame_id(status__in=Frame.OPEN_STATUSES),
    )
    rows = list(annotated[page])
    wanted = {row.top_active_id or row.top_open_id for row in rows} - {None}
    frames = Frame.objects.filter(pk__in=wanted).only(*TOP_FRAME_FIELDS) if wanted else []
    by_pk = {frame.pk: frame for frame in frames}
    return [(row, by_pk.get(row.top_active_id or row.top_open_id)) for row in rows]


def pressure_of(session: Session, top: Frame | None) -> Pressure:
    """The pressure the session's gauge shows, given the top of its stack (no query)."""
    occupancy = top.last_occupancy_tokens if top is not None else 0
    utilization = utilization_of(occupancy, session.context_window_tokens)
    level = top.pressure_level if top is not None else session.pressure_level
    if level not in LEVELS:
        level = level_next(LOW, utilization)
    return Pressure(level, utilization, occupancy, session.context_window_tokens)


def session_pressure(session: Session) -> Pressure:
    """The pressure the session's gauge shows: that of the frame at the top of its stack."""
    return pressure_of(session, top_frame(session))


USAGE_SUMS = {
    "input_tokens": Sum("input_tokens"),
    "output_tokens": Sum("output_tokens"),
    "cache_creation_input_tokens": Sum("cache_creation_input_tokens"),
    "cache_read_input_tokens": Sum("cache_read_input_tokens"),
}


def price_table() -> dict[str, Price]:
    """Every model's price, by model name (one query)."""
    return {
        row.model: Price(
            input=row.input_per_mtok,
            output=row.output_per_mtok,
            cache_write_5m=row.cache_write_5m_per_mtok,
            cache_write_1h=row.cache_write_1h_per_mtok,
            cache_read=row.cache_read_per_mtok,
        )
        for row in ModelPrice.objects.all()
    }


def usage_cost(usage: Usage, prices: dict[str, Price]) -> Decimal | None:
    """One call's cost in US dollars; None when its model has no price."""
    return call_cost(price_for(usage.model, prices), **token_counts(usage))


def session_cost(session: Session, prices: dict[str, Price] | None = None) -> CostTotal:
    """What the session's calls cost (one query, plus the price table when not given)."""
    rows = Usage.objects.filter(session=session).values("model").annotate(**USAGE_SUMS)
    return cost_total(rows, price_table() if prices is None else prices)


def sessions_costs(session_ids: list, prices: dict[str, Price] | None = None) -> dict:
    """Each session's ``CostTotal``, by session id, in one query."""
    prices = price_table() if prices is None else prices
    rows: dict = {}
    for row in (
        Usage.objects.filter(session_id__in=session_ids)
        .values("session_id", "model")
        .annotate(**USAGE_SUMS)
    ):
        rows.setdefault(row["session_id"], []).append(row)
    return {pk: cost_total(rows.get(pk, []), prices) for pk in session_ids}


def frame_cost(frame: Frame, prices: dict[str, Price] | None = None) -> CostTotal:
    """What the frame's calls and all its descendants' calls cost: two queries, the
    session's frame parents and its usage by frame and model."""
    parents = dict(Frame.objects.filter(session_id=frame.session_id).values_list("pk", "parent_id"))
    subtree = {frame.pk}
    changed = True
    while changed:
        grown = {pk for pk, parent in parents.items() if parent in subtree} | subtree
        changed = len(grown) != len(subtree)
        subtree = grown
    rows = (
        Usage.objects.filter(session_id=frame.session_id, frame_id__in=subtree)
        .values("model")
        .annotate(**USAGE_SUMS)
    )
    return cost_total(rows, price_table() if prices is None else prices)


def call_list(
    *, session: Session, limit: int, offset: int, frame: Frame | None = None
) -> tuple[list[Usage], int]:
    """One page of the session's model calls (``frame``'s alone, given one) in the order
    they were made (when they were sent, else when recorded), and how many there are.
    Each call carries ``frame_goal``, the goal of the frame it was made in (None without
    one), read in the same query."""
    calls = Usage.objects.filter(session=session)
    if frame is not None:
        calls = calls.filter(frame=frame)
    calls = calls.order_by(Coalesce("started_at", "created_at"), "id")
    page = calls.annotate(frame_goal=F("frame__goal"))[offset : offset + limit]
    return list(page), calls.count()


def frame_list(
    *, session: Session, limit: int, offset: int, status: str = ""
) -> tuple[list[Frame], int]:
    """One page of the session's frames in the order they were pushed (those in
    ``status``, given one), and how many there are."""
    frames = Frame.objects.filter(session=session)
    if status:
        frames = frames.filter(status=status)
    frames = frames.order_by("created_at", "id")
    return list(frames[offset : offset + limit]), frames.count()


def call_get(*, session: Session, call_id: Any) -> Usage:
    """One model call of ``session``; NotFound for another session's or a malformed id."""
    try:
        pk = int(call_id)
    except (TypeError, ValueError):
        pk = None
    call = Usage.objects.filter(session=session, pk=pk).first() if pk is not None else None
    if call is None:
        raise NotFound("No such model call in this session.")
    return call


@dataclass(frozen=True)
class UsageDay:
    day: Any
    model: str
    agent: str
    tokens: int
    cost: Decimal | None


def usage_by_day(
    *, organization, since: datetime, prices: dict[str, Price] | None = None
) -> list[UsageDay]:
    """The organization's model calls since ``since``, summed per day (when each was sent,
    else recorded; UTC), model and agent, each with its window tokens and cost (None for
    a model without a price). One query, and the price table when not given."""
    prices = price_table() if prices is None else prices
    rows: Any = (
        Usage.objects.filter(session__organization=organization)
        .annotate(moment=Coalesce("started_at", "created_at"))
        .filter(moment__gte=since)
        .annotate(day=TruncDate("moment"))
        .values("day", "model", "session__agent__name")
        .annotate(**USAGE_SUMS)
        .order_by("day", "model")
    )
    return [
        UsageDay(
            day=row["day"],
            model=row["model"] or "",
            agent=row["session__agent__name"] or "",
            tokens=row["input_tokens"]
            + row["output_tokens"]
            + row["cache_creation_input_tokens"]
            + row["cache_read_input_tokens"],
            cost=call_cost(
                price_for(row["model"], prices),
                input_tokens=row["input_tokens"],
                output_tokens=row["output_tokens"],
                cache_creation_input_tokens=row["cache_creation_input_tokens"],
                cache_read_input_tokens=row["cache_read_input_tokens"],
            ),
        )
        for row in rows
    ]


@dataclass
class UsageTotal:
    """One model's or one agent's calls over a window: how many, their tokens by kind,
    and what they cost (``cost.usd`` over the priced calls; ``cost.unpriced_models``
    names the models without a price, whose calls ``usd`` leaves out)."""

    name: str
    calls: int = 0
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    cost: CostTotal = field(default_factory=lambda: CostTotal(usd=Decimal(0)))
    priced: bool = True  # a model's row: whether the model has a price at all

    @property
    def tokens(self) -> int:
        return call_occupancy(self)


@dataclass(frozen=True)
class UsageTotals:
    by_model: list[UsageTotal]
    by_agent: list[UsageTotal]
    total: UsageTotal


def _usage_total(name: str, rows: list[dict], prices: dict[str, Price]) -> UsageTotal:
    """Rows of one group (one per model) summed, their cost by ``cost_total``: the same
    sum the sessions list and a session's page make."""
    total = UsageTotal(name=name, cost=cost_total(rows, prices))
    for row in rows:
        total.calls += row["calls"]
        for kind in USAGE_SUMS:
            setattr(total, kind, getattr(total, kind) + (row[kind] or 0))
    return total


def usage_totals(
    *, organization, since: datetime, prices: dict[str, Price] | None = None
) -> UsageTotals:
    """The organization's model calls since ``since`` (when each was sent, else recorded),
    totalled by model, by agent and altogether, most costly first. One aggregate query
    grouped by agent and model, whatever the number of calls, and the price table when
    not given."""
    prices = price_table() if prices is None else prices
    rows: Any = (
        Usage.objects.filter(session__organization=organization)
        .annotate(moment=Coalesce("started_at", "created_at"))
        .filter(moment__gte=since)
        .values("session__agent__name", "model")
        .annotate(calls=Count("id"), **USAGE_SUMS)
        .order_by("session__agent__name", "model")
    )
    models: dict[str, list[dict]] = {}
    agents: dict[str, list[dict]] = {}
    for row in rows:
        row["model"] = row["model"] or ""
        models.setdefault(row["model"], []).append(row)
        agents.setdefault(row["session__agent__name"] or "", []).append(row)

    def ranked(groups: dict[str, list[dict]]) -> list[UsageTotal]:
        totals = [_usage_total(name, group, prices) for name, group in groups.items()]
        return sorted(totals, key=lambda t: (t.cost.usd, t.tokens), reverse=True)

    by_model = ranked(models)
    for total in by_model:
        total.priced = price_for(total.name, prices) is not None
    return UsageTotals(
        by_model=by_model,
        by_agent=ranked(agents),
        total=_usage_total("Total", [row for group in models.values() for row in group], prices),
    )
