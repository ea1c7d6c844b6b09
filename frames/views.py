"""Dashboard pages for sessions and frames: list, session with its lazy frame tree, frame.

Open pages keep themselves current by polling: the session page asks what changed
since the last event it has seen (``session_changes``), the frame page re-reads its
budget card, calls and events (an htmx request for ``frame_detail``).
"""

import hashlib
import json
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from contextops.audit import session_deleted_title
from contextops.dashboard import organization_required, render_page
from contextops.errors import NotFound
from contextops.http import MemberRequest
from frames.services.expiry import frame_suspension_expire_if_overdue

from . import charts, projections, selectors
from .models import Event, Frame, Session
from .pressure import LEVELS
from .selectors import session_pressure

SESSIONS_PER_PAGE = 25
# Children shown expanded under the roots when the session page opens, at most.
EXPANDED_CHILDREN = 200
LIST_POLL_SECONDS = 10
CHILDREN_PER_REQUEST = 100
RECENT_EVENTS = 15
# The frame page's lists: its latest calls (all of them on the session's calls page,
# filtered to the frame) and its events, newest first, a page at a time.
USAGE_SHOWN = 20
FRAME_EVENTS_PER_PAGE = 50
# The largest sequence number an event can have (a 64-bit integer).
MAX_SEQ = 2**63 - 1
# How often open pages poll, in seconds.
TREE_POLL_SECONDS = 3
FRAME_POLL_SECONDS = 3
# Events one poll of the session page turns into updates; a busier session catches up
# over the next polls.
EVENTS_PER_POLL = 200
LIFECYCLE_STEPS = Session.Lifecycle.choices


def _json(value: Any) -> str:
    """A value as a person reads it: formatted JSON, never a Python repr."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _readable(mapping: dict) -> list[tuple[str, str]]:
    """A dict's items with text as it is and anything else as compact JSON."""
    return [
        (key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for key, value in mapping.items()
    ]


def _get_or_404(getter, **kwargs):
    try:
        return getter(**kwargs)
    except NotFound as error:
        raise Http404(str(error)) from None


def _offset(request: MemberRequest, name: str = "offset") -> int:
    """A page's offset from the query string; 0 when absent, negative or not a number."""
    try:
        return max(0, int(request.GET.get(name, 0)))
    except ValueError:
        return 0


@require_GET
@organization_required
@vary_on_headers("HX-Request")
def session_list(request: MemberRequest) -> HttpResponse:
    """The sessions list, filtered and sorted as the API's ``GET /sessions`` is; for htmx
    only its results, which the open page asks for again every LIST_POLL_SECONDS. The
    search is ``q`` (the page's own form) or ``search`` (the API's name for it)."""
    request.nav_section = "sessions"
    query = request.GET
    search = (query.get("q") or query.get("search", ""))[:200].replace("\x00", "")
    filters: dict[str, Any] = {
        "status": _choice(query.get("status"), Session.Lifecycle.values),
        "pressure": _choice(query.get("pressure"), LEVELS),
        "agent": query.get("agent", "")[:200].replace("\x00", ""),
        "since": _day(query.get("since")),
        "until": _day(query.get("until")),
        "order": _choice(query.get("order"), list(selectors.SESSION_ORDERS)) or "newest",
    }
    sessions = selectors.session_list(organization=request.organization, search=search, **filters)
    page = Paginator(sessions, SESSIONS_PER_PAGE).get_page(query.get("page"))
    ids = [s.pk for s in page.object_list]
    costs = selectors.sessions_costs(ids)
    threads = selectors.sessions_graph_thread(ids)
    rows = [(s, costs[s.pk], threads.get(s.pk)) for s in page.object_list]
    kept = query.copy()
    kept.pop("page", None)
    kept.pop("deleted", None)
    context = {
        "page": page,
        "rows": rows,
        "deleted": session_deleted_title(
            organization=request.organization, session_id=query.get("deleted", "")
        ),
        "q": search,
        "filters": {**filters, "since": query.get("since", ""), "until": query.get("until", "")},
        "filter_errors": _date_errors(query),
        "querystring": kept.urlencode(),
        "statuses": Session.Lifecycle.choices,
        "levels": LEVELS,
        "orders": SESSION_ORDER_LABELS,
        "agents": selectors.agent_names(organization=request.organization),
        "poll_seconds": LIST_POLL_SECONDS,
    }
    return render_page(request, "frames/session_list.html", context, partial="results")


SESSION_ORDER_LABELS = [
    ("newest", "Newest first"),
    ("oldest", "Oldest first"),
    ("last_activity", "Last activity"),
    ("tokens", "Most tokens"),
    ("calls", "Most model calls"),
]


def _choice(value: str | None, allowed) -> str:
    return value if value is not None and value in allowed else ""


def _day(value: str | None) -> date | None:
    """A date from the filter form (the selector takes it as that whole day); None when
    empty or not a date (``_date_errors`` says so)."""
    try:
        return date.fromisoformat(value or "")
    except ValueError:
        return None


def _date_errors(query: Any) -> list[str]:
    """What the page says about a filter date it could not read (and so did not apply)."""
    return [
        f"“{query[name]}” is not a date (YYYY-MM-DD): the {label} filter is not applied."
        for name, label in (("since", "“Started from”"), ("until", "“to”"))
        if query.get(name, "").strip() and _day(query.get(name)) is None
    ]


def _tree_nodes(frames: list[Frame], session: Session) -> list[dict]:
    """Tree nodes with their budget figures; an imported session's frames carry no real
    budget (the importer sizes them to what they spent), so they show none."""
    budgeted = not session.source
    return [
        {
            "frame": f,
            "segments": f.budget.segments(),
            "overrun": f.budget.overrun,
            "budgeted": budgeted,
        }
        for f in frames
    ]


def _expand(nodes: list[dict], session: Session) -> None:
    """Open the first level of the tree: the roots' children come with the page (one
    query), as long as they fit in EXPANDED_CHILDREN; other roots load on expand."""
    wanted, room = [], EXPANDED_CHILDREN
    for node in nodes:
        count = node["frame"].children_count
        if count and count <= room:
            wanted.append(node)
            room -= count
    children = selectors.frames_children_of([node["frame"] for node in wanted], session=session)
    for node in wanted:
        node["children"] = _tree_nodes(children.get(node["frame"].pk, []), session)
        node["expanded"] = True


def _mark_overruns_below(nodes: list[dict], session: Session) -> None:
    """Give each node (and each of its loaded children) ``overruns_below``: how many
    overspent frames its subtree hides, which a collapsed node shows in red (one query for
    all of them). An imported session's frames carry no budget, so they mark none."""
    shown = [*nodes, *(child for node in nodes for child in node.get("children", ()))]
    below = selectors.overruns_below([node["frame"] for node in shown], session=session)
    for node in shown:
        node["overruns_below"] = below.get(node["frame"].pk, 0) if node["budgeted"] else 0


def _recent_events(session: Session) -> list[Event]:
    return selectors.event_list(
        session=session, after=max(0, session.last_event_seq - RECENT_EVENTS), limit=RECENT_EVENTS
    )


@require_GET
@organization_required
@vary_on_headers("HX-Request")
def session_detail(request: MemberRequest, session_id) -> HttpResponse:
    request.nav_section = "sessions"
    session = _get_or_404(
        selectors.session_get, organization=request.organization, session_id=session_id
    )
    roots = selectors.frame_children(frame=None, session=session, limit=CHILDREN_PER_REQUEST + 1)
    nodes = _tree_nodes(roots[:CHILDREN_PER_REQUEST], session)
    _expand(nodes, session)
    _mark_overruns_below(nodes, session)
    top = selectors.session_top_frame(session)
    context = {
        "session": session,
        "roots": nodes,
        "more_roots": len(roots) > CHILDREN_PER_REQUEST,
        "next_offset": CHILDREN_PER_REQUEST,
        "top": top,
        "graph_threads": selectors.session_graph_threads(session),
        "pressure": session_pressure(session),
        "lifecycle_steps": LIFECYCLE_STEPS,
        "events": _recent_events(session),
        "cost": selectors.session_cost(session),
        "identity": _readable(session.identity),
        "environment": _readable(session.environment),
        # Read with the session, before the roots: a frame pushed in between is then both
        # on the page and in the first update, and the page keeps the node it has.
        "after": session.last_event_seq,
        "poll_seconds": TREE_POLL_SECONDS,
    }
    return render_page(request, "frames/session_detail.html", context, partial="tree")


@require_GET
@organization_required
def session_changes(request: MemberRequest, session_id) -> HttpResponse:
    """What the session page polls: 204 when no event came after ``after``, else
    out-of-band updates of its tree, lifecycle, usage and recent events, and the poller
    again with the new ``after``."""
    session = _get_or_404(
        selectors.session_get, organization=request.organization, session_id=session_id
    )
    try:
        after = max(0, int(request.GET.get("after", "")))
    except ValueError:
        after = session.last_event_seq
    if session.last_event_seq <= after:
        return HttpResponse(status=204)
    found = selectors.tree_changes(
        session=session, after=after, limit=EVENTS_PER_POLL, page_size=CHILDREN_PER_REQUEST
    )
    changes = {
        "after": found.after,
        "appended": _tree_nodes(found.appended, session),
        "reshaped": _tree_nodes(found.reshaped, session),
        "updated": _tree_nodes(found.updated, session),
    }
    context = {
        "session": session,
        "changes": changes,
        "after": found.after,
        "poll_seconds": TREE_POLL_SECONDS,
        "lifecycle_steps": LIFECYCLE_STEPS,
        "events": _recent_events(session),
        "cost": selectors.session_cost(session),
        "oob": True,
    }
    return render(request, "frames/partials/_session_changes.html", context)


@require_GET
@organization_required
def frame_children(request: MemberRequest, frame_id) -> HttpResponse:
    """The children of a frame as tree nodes, one page at a time: what "expand" loads."""
    frame = _get_or_404(selectors.frame_get, organization=request.organization, frame_id=frame_id)
    offset = _offset(request)
    children = selectors.frame_children(
        frame=frame, session=frame.session, limit=CHILDREN_PER_REQUEST + 1, offset=offset
    )
    nodes = _tree_nodes(children[:CHILDREN_PER_REQUEST], frame.session)
    _mark_overruns_below(nodes, frame.session)
    context = {
        "parent": frame,
        "nodes": nodes,
        "more": len(children) > CHILDREN_PER_REQUEST,
        "next_offset": offset + CHILDREN_PER_REQUEST,
    }
    return render_page(request, "frames/partials/_children.html", context)


def _before(request: MemberRequest) -> int | None:
    """The anchor of a page of events from the query string: the sequence number its rows
    come before. None (the newest page) when absent or not a number, and kept within the
    numbers a sequence can hold."""
    try:
        return min(max(0, int(request.GET.get("before", ""))), MAX_SEQ)
    except ValueError:
        return None


def _frame_events_page(frame: Frame, before: int | None) -> dict:
    """The page of the frame's events before the sequence number ``before``, newest first,
    where it stands among them, and the anchors of the pages either side (``events_newer``
    is None when the page just newer is the newest, which needs no anchor)."""
    page = selectors.frame_events_newest_first(
        frame=frame, limit=FRAME_EVENTS_PER_PAGE, before=before
    )
    shown = page.newer + len(page.events)
    return {
        "events": page.events,
        "events_count": page.count,
        "events_before": page.before,
        "events_first": page.newer + 1,
        "events_last": shown,
        "events_newer": page.newer_before,
        "events_older": page.events[-1].seq if shown < page.count else None,
    }


@require_GET
@organization_required
@vary_on_headers("HX-Request")
def frame_detail(request: MemberRequest, frame_id) -> HttpResponse:
    """The frame page; for htmx only its budget card, with its status line, model calls
    and events out of band: what the open page polls every FRAME_POLL_SECONDS.

    Its model calls and events are the latest first, each list saying how many there are
    in all; ``before`` in the query string pages back through the events, anchored on a
    sequence number, and the poll asks for the page shown: an older page keeps its rows
    while new events arrive."""
    request.nav_section = "sessions"
    frame = _get_or_404(selectors.frame_get, organization=request.organization, frame_id=frame_id)
    if frame_suspension_expire_if_overdue(frame):  # as the API's read of it does
        frame = selectors.frame_get(organization=request.organization, frame_id=frame_id)
    prices = selectors.price_table()
    calls, calls_count = selectors.frame_calls_recent(frame=frame, limit=USAGE_SHOWN)
    children = selectors.frame_children(
        frame=frame, session=frame.session, limit=CHILDREN_PER_REQUEST + 1
    )
    # What the page shows of its children, which its poll sends back: the children card is
    # sent again only when this changed (a child pushed, or one changed status).
    shown = ",".join(f"{child.pk.hex[:8]}{child.status[:2]}" for child in children)
    children_shown = hashlib.blake2s(shown.encode(), digest_size=6).hexdigest()

    def tree() -> dict:
        nodes = _tree_nodes(children[:CHILDREN_PER_REQUEST], frame.session)
        _mark_overruns_below(nodes, frame.session)
        return {
            "nodes": nodes,
            "more": len(children) > CHILDREN_PER_REQUEST,
            "next_offset": CHILDREN_PER_REQUEST,
            "parent": frame,
        }

    live = {
        "frame": frame,
        "session": frame.session,
        "segments": frame.budget.segments(),
        "overrun": frame.budget.overrun,
        "budgeted": not frame.session.source,
        "usage": [(call, selectors.usage_cost(call, prices)) for call in calls],
        "calls_count": calls_count,
        "cost": selectors.frame_cost(frame, prices),
        "poll_seconds": FRAME_POLL_SECONDS,
        "children_shown": children_shown,
        **_frame_events_page(frame, _before(request)),
    }
    if request.htmx and not request.htmx.boosted:
        changed = request.GET.get("children") != children_shown
        return render(
            request,
            "frames/frame_detail.html#budget",
            {**live, "oob": True, **(tree() if changed else {"nodes": None})},
        )
    ancestry = selectors.frame_ancestry(frame)
    context = {
        **live,
        **tree(),
        "ancestry": ancestry[:-1],
        "inputs_json": _json(frame.inputs) if frame.inputs else "",
        "results_json": _json(frame.result_refs) if frame.result_refs else "",
    }
    return render(request, "frames/frame_detail.html", context)


@require_GET
@organization_required
@vary_on_headers("HX-Request")
def session_at(request: MemberRequest, session_id) -> HttpResponse:
    """The session's frame tree as it stood after event ``seq`` (default: the newest),
    rebuilt from the log, with controls to step one event back or forward; htmx gets the
    stepper alone (what the session page's history card swaps)."""
    request.nav_section = "sessions"
    session = _get_or_404(
        selectors.session_get, organization=request.organization, session_id=session_id
    )
    last = session.last_event_seq
    try:
        seq = min(max(0, int(request.GET.get("seq", last))), last)
    except ValueError:
        seq = last
    at = projections.session_at(session, seq)
    event = selectors.event_list(session=session, after=seq - 1, limit=1) if seq else []
    context = {
        "session": session,
        "at": at,
        "event": event[0] if event else None,
        "last": last,
        "previous": max(0, seq - 1),
        "next": min(last, seq + 1),
    }
    return render_page(request, "frames/session_at.html", context, partial="history")


CALLS_PER_PAGE = 50


@require_GET
@organization_required
def session_calls(request: MemberRequest, session_id) -> HttpResponse:
    """The session's model calls as a timeline, one page at a time: when each was sent,
    how long it took (a bar, against the slowest on the page), tokens and cost. With
    ``frame`` in the query string, that frame's calls alone (404 for a frame of another
    session). An ``offset`` past the end gives the last page that has calls; a negative
    or unreadable one, the first."""
    request.nav_section = "sessions"
    session = _get_or_404(
        selectors.session_get, organization=request.organization, session_id=session_id
    )
    frame = None
    if "frame" in request.GET:
        frame = _get_or_404(
            selectors.session_frame_get, session=session, frame_id=request.GET["frame"]
        )
    kept = urlencode({"frame": frame.pk}) + "&" if frame else ""
    offset = _offset(request)
    calls, count = selectors.call_list(
        session=session, limit=CALLS_PER_PAGE, offset=offset, frame=frame
    )
    if not calls and offset:  # past the end (a hand-edited address): the last page
        offset = max(0, (count - 1) // CALLS_PER_PAGE * CALLS_PER_PAGE)
        calls, count = selectors.call_list(
            session=session, limit=CALLS_PER_PAGE, offset=offset, frame=frame
        )
    prices = selectors.price_table()
    slowest = max((c.latency_ms or 0 for c in calls), default=0) or 1
    rows = [
        {
            "call": call,
            "cost": selectors.usage_cost(call, prices),
            "latency_width": round(100 * (call.latency_ms or 0) / slowest, 1),
        }
        for call in calls
    ]
    context = {
        "session": session,
        "frame": frame,
        "rows": rows,
        "count": count,
        "offset": offset,
        "previous": max(0, offset - CALLS_PER_PAGE) if offset else None,
        "next": offset + CALLS_PER_PAGE if offset + CALLS_PER_PAGE < count else None,
        "page_at": f"{request.path}?{kept}offset=",  # another page of the same list
    }
    return render_page(request, "frames/session_calls.html", context, partial="calls")


USAGE_DAYS = 30
USAGE_RANGES = (7, 30, 90)  # the windows the page offers, in days


def _usage_days(request: MemberRequest) -> int:
    """The window the address asks for (``?days=``): one of USAGE_RANGES, else
    USAGE_DAYS, whatever the value (missing, not a number, negative, huge)."""
    value = request.GET.get("days", "")
    return int(value) if value in {str(days) for days in USAGE_RANGES} else USAGE_DAYS


def _series(rows, days: list, key: str, value: str) -> dict[str, list]:
    """Per ``key`` (model or agent), one summed ``value`` per day."""
    index = {day: i for i, day in enumerate(days)}
    series: dict[str, list] = {}
    for row in rows:
        amount = getattr(row, value)
        if amount is None:
            continue
        series.setdefault(getattr(row, key), [0] * len(days))[index[row.day]] += amount
    return dict(sorted(series.items(), key=lambda item: -sum(float(v) for v in item[1])))


@require_GET
@organization_required
def usage(request: MemberRequest) -> HttpResponse:
    """Tokens and cost per day over the last ``?days=`` days (USAGE_RANGES; USAGE_DAYS
    by default), by model and by agent, charted and totalled in tables."""
    request.nav_section = "usage"
    window = _usage_days(request)
    today = timezone.now().date()
    days = [today - timedelta(days=n) for n in range(window - 1, -1, -1)]
    since = timezone.make_aware(datetime.combine(days[0], time.min), UTC)
    prices = selectors.price_table()
    rows = selectors.usage_by_day(organization=request.organization, since=since, prices=prices)
    totals = selectors.usage_totals(organization=request.organization, since=since, prices=prices)
    user = request.user
    context = {
        "days": window,
        "ranges": USAGE_RANGES,
        "totals": totals,
        "prices_admin": user.is_active
        and user.is_staff
        and user.has_perm("frames.view_modelprice"),
        "charts": [
            (
                "Tokens per day by model",
                charts.stacked(days, _series(rows, days, "model", "tokens")),
            ),
            (
                "Cost per day by model",
                charts.stacked(days, _series(rows, days, "model", "cost"), money=True),
            ),
            (
                "Tokens per day by agent",
                charts.stacked(days, _series(rows, days, "agent", "tokens")),
            ),
            (
                "Cost per day by agent",
                charts.stacked(days, _series(rows, days, "agent", "cost"), money=True),
            ),
        ],
        "total_tokens": totals.total.tokens,
        "total_cost": totals.total.cost.usd,
        "unpriced": [model or "(unnamed)" for model in totals.total.cost.unpriced_models],
    }
    return render_page(request, "frames/usage.html", context)
