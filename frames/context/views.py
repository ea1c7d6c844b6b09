"""Dashboard fragments for the session page: pressure gauge, the packs agents asked for,
pack preview, handles table. The gauge, the packs and the handles poll themselves.

The handles' actions (page in, page out) answer with the table as their own
transaction read it (``frames.context.handles``): nothing is queried after the commit.
"""

from collections import Counter
from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from contextops.actors import user_actor
from contextops.dashboard import organization_required, render_page
from contextops.errors import DomainError
from contextops.http import MemberRequest
from frames.models import ContextHandle, ContextPackRecord, Frame, Session
from frames.pressure import LEVELS
from frames.selectors import context_packs_newest_first

from . import packing
from .handles import HandlesAnswer, frame_handles, handle_page_in_answered, handle_page_out_answered
from .pack import context_pack_assemble
from .pressure_report import pressure_report
from .resources import ACTIVE_STATES, COLD, INDEXED
from .selectors import context_pack_diff, context_pack_get, context_pack_rows

DEFAULT_PREVIEW_BUDGET = 4000
# The preview's results, which its form swaps (an id of context/_preview.html, and its partial).
PREVIEW_RESULTS = "preview-results"
HANDLES_SHOWN = 200
PACKS_SHOWN = 5
PACKS_PER_PAGE = 25
# How often the fragments poll, in seconds.
PACKS_POLL_SECONDS = 10
HANDLES_POLL_SECONDS = 3
GAUGE_CANDIDATES = 5


def _session(request: MemberRequest, session_id: UUID) -> Session:
    return get_object_or_404(Session, pk=session_id, organization=request.organization)


@require_GET
@organization_required
def pressure_fragment(request: MemberRequest, session_id: UUID) -> HttpResponse:
    session = _session(request, session_id)
    report = pressure_report(session=session, candidates=GAUGE_CANDIDATES)
    pressure = report.pressure
    down, up = pressure.band
    context = {
        "session": session,
        "frame": report.frame,
        "pressure": pressure,
        "width": min(100.0, pressure.percentage),
        "band_down": round(down * 100),
        "band_up": round(up * 100) if up is not None else None,
        "levels": LEVELS,
        "candidates": report.candidates,
    }
    return render(request, "context/_pressure.html", context)


@require_GET
@organization_required
def context_preview_fragment(request: MemberRequest, session_id: UUID) -> HttpResponse:
    session = _session(request, session_id)
    maximum = max(packing.MIN_BUDGET, min(session.context_window_tokens, 200_000))
    error = ""
    try:
        budget = int(request.GET.get("budget", DEFAULT_PREVIEW_BUDGET))
    except ValueError:
        budget, error = DEFAULT_PREVIEW_BUDGET, "The budget must be a whole number of tokens."
    budget = min(budget, maximum)
    pack = None
    if not error:
        try:
            # Not stored: a slider move is not a pack an agent asked for, and the agents'
            # list of recent packs (GET /sessions/{id}/context-packs) must stay theirs.
            pack = context_pack_assemble(
                session=session,
                budget_tokens=budget,
                query=request.GET.get("query", "")[:2000],
                store=False,
            )
        except DomainError as exc:
            error = exc.detail
    context: dict[str, Any] = {
        "session": session,
        "budget": budget,
        "maximum": maximum,
        "minimum": packing.MIN_BUDGET,
        "pack": pack,
        "error": error,
    }
    if pack is not None:
        result = pack.result
        context["sections"] = [
            ("Brief context", "brief_context", 1),
            ("Breadcrumbs", "breadcrumbs", len(result.breadcrumbs)),
            ("Facts", "facts", len(result.facts)),
            ("Working set", "working_set", len(result.working_set)),
            ("Segments (handles)", "segments", len(result.segments)),
            ("Resources (cold, by name)", "resources", len(result.resources)),
        ]
        context["breakdown"] = result.breakdown
        context["dropped_by_level"] = pack.record.dropped_by_level
        context["used_percent"] = round(100 * result.used / budget, 1) if budget else 0
        context.update(_ranking(pack.record, RANKING_ROWS_PREVIEW))
    context["query"] = request.GET.get("query", "")[:2000]
    if request.htmx and request.htmx.target == PREVIEW_RESULTS:
        # The form asked: its results alone (and the budget shown), never the form a
        # person may be typing in while this was assembled.
        return render(request, f"context/_preview.html#{PREVIEW_RESULTS}", {**context, "oob": True})
    return render(request, "context/_preview.html", context)


RANKING_ROWS_PAGE = 500
RANKING_ROWS_PREVIEW = 60


def _ranking(record: ContextPackRecord, limit: int) -> dict[str, Any]:
    rows = context_pack_rows(record, limit=limit)
    total = len(record.included) + len(record.dropped)
    return {"rows": rows, "more": max(0, total - len(rows))}


@require_GET
@organization_required
def context_pack_page(request: MemberRequest, session_id: UUID, pack_id: UUID) -> HttpResponse:
    """One stored pack: its figures and every item, in or out, with its score parts and why."""
    session = _session(request, session_id)
    try:
        record = context_pack_get(organization=request.organization, pack_id=pack_id)
    except DomainError:
        raise Http404("No such context pack.") from None
    if record.session_id != session.pk:
        raise Http404("No such context pack in this session.")
    context = {
        "session": session,
        "record": record,
        "used_percent": round(100 * record.used / record.budget, 1) if record.budget else 0,
        **_ranking(record, RANKING_ROWS_PAGE),
    }
    return render(request, "context/pack_detail.html", context)


def _pack_summary(record: ContextPackRecord) -> dict[str, Any]:
    """What the session page shows of one stored pack: figures, sections, drops by level."""
    return {
        "record": record,
        "used_percent": round(100 * record.used / record.budget, 1) if record.budget else 0,
        "included_by_section": sorted(
            Counter(i.get("section", "") for i in record.included).items()
        ),
        "dropped_by_level": record.dropped_by_level,
    }


@require_GET
@organization_required
def context_pack_diff_page(request: MemberRequest, session_id: UUID) -> HttpResponse:
    """Why pack ``b`` differs from pack ``a`` (both of this session): the page, or for
    htmx only the diff, swapped in under the pack list."""
    session = _session(request, session_id)
    context: dict[str, Any] = {"session": session, "error": "", "diff": None}
    status = 200
    try:
        context["diff"] = context_pack_diff(
            organization=request.organization,
            a_id=request.GET.get("a", ""),
            b_id=request.GET.get("b", ""),
            session=session,
        )
    except DomainError as exc:
        context["error"], status = exc.detail, exc.status
    return render_page(request, "context/pack_diff.html", context, partial="diff", status=status)


@require_GET
@organization_required
@vary_on_headers("HX-Request")  # its 204 answers htmx alone, outside render_page
def context_packs_fragment(request: MemberRequest, session_id: UUID) -> HttpResponse:
    """The last PACKS_SHOWN packs agents asked for in the session, newest first.

    The card polls with ``newest`` set to the newest pack it shows and gets 204 (nothing
    to swap) while that is still the newest, so what a person expanded stays open.
    """
    session = _session(request, session_id)
    records = context_packs_newest_first(session)
    newest = records.values_list("pk", flat=True).first()
    marker = str(newest) if newest else "none"
    if request.htmx and request.GET.get("newest") == marker:
        return HttpResponse(status=204)
    packs = (
        [_pack_summary(r) for r in records.select_related("frame")[:PACKS_SHOWN]] if newest else []
    )
    context = {
        "session": session,
        "packs": packs,
        "total": records.count() if newest else 0,
        "newest": marker,
        "poll_seconds": PACKS_POLL_SECONDS,
    }
    return render(request, "context/_packs.html", context)


@require_GET
@organization_required
def context_packs_list_page(request: MemberRequest, session_id: UUID) -> HttpResponse:
    """Every pack agents asked for in the session, newest first, PACKS_PER_PAGE a page, with
    the comparison of any two of a page: the session page shows only the newest."""
    session = _session(request, session_id)
    paginator = Paginator(
        context_packs_newest_first(session).select_related("frame"), PACKS_PER_PAGE
    )
    # get_page answers a page out of range or not a number with the last or the first.
    page = paginator.get_page(request.GET.get("page"))
    context = {
        "session": session,
        "page": page,
        "packs": [_pack_summary(r) for r in page.object_list],
    }
    return render(request, "context/pack_list.html", context)


def _handles_context(
    frame: Frame, handles: list[ContextHandle], error: str = "", notice: str = ""
) -> dict[str, Any]:
    return {
        "frame": frame,
        "handles": handles,
        "error": error,
        "notice": notice,
        "active_states": ACTIVE_STATES,
        "page_in_states": (COLD, INDEXED),
        "shown": HANDLES_SHOWN,
        "poll_seconds": HANDLES_POLL_SECONDS,
    }


@require_GET
@organization_required
def frame_handles_fragment(request: MemberRequest, frame_id: UUID) -> HttpResponse:
    frame = get_object_or_404(Frame, pk=frame_id, organization=request.organization)
    handles = frame_handles(frame_id=frame.pk, limit=HANDLES_SHOWN)
    return render(request, "context/_handles.html", _handles_context(frame, handles))


def _handle(request: MemberRequest, handle_id: UUID) -> ContextHandle:
    return get_object_or_404(
        ContextHandle.objects.select_related("frame"),
        pk=handle_id,
        session__organization=request.organization,
    )


def _handle_act(
    request: MemberRequest,
    handle_id: UUID,
    act: Callable[..., HandlesAnswer],
    notice: str = "",
    **options: str,
) -> HttpResponse:
    """One of a handle's actions by the person: the table as the action's transaction
    read it (htmx), else back to the table."""
    handle = _handle(request, handle_id)
    answer = act(
        handle=handle,
        actor=user_actor(request.user),
        user=request.user,
        rows=HANDLES_SHOWN if request.htmx else 0,
        **options,
    )
    if not request.htmx:
        return redirect("context:frame_handles", handle.frame_id)
    context = _handles_context(
        handle.frame, answer.handles, answer.error, "" if answer.error else notice
    )
    return render(request, "context/_handles.html", context)


@require_POST
@organization_required
def handle_page_in_action(request: MemberRequest, handle_id: UUID) -> HttpResponse:
    mode = "full" if request.POST.get("mode") == "full" else "summary"
    return _handle_act(request, handle_id, handle_page_in_answered, mode=mode)


@require_POST
@organization_required
def handle_page_out_action(request: MemberRequest, handle_id: UUID) -> HttpResponse:
    notice = "Page-out queued: the worker summarizes the handle, then it shows as indexed."
    return _handle_act(request, handle_id, handle_page_out_answered, notice)
