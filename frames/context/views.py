"""Dashboard fragments for the session page: pressure gauge, the packs agents asked for,
pack preview, handles table. The gauge, the packs and the handles poll themselves."""

from collections import Counter

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from contextops.dashboard import organization_required
from contextops.errors import DomainError
from frames import selectors
from frames.models import ContextHandle, ContextPackRecord, Frame, Session
from frames.pressure import LEVELS
from frames.selectors import session_pressure, top_frame

from . import packing
from .eviction import eviction_candidates
from .pack import context_pack_assemble
from .paging import handle_page_in, handle_page_out_request
from .resources import ACTIVE_STATES, COLD, INDEXED

DEFAULT_PREVIEW_BUDGET = 4000
HANDLES_SHOWN = 200
PACKS_SHOWN = 5
# How often the fragments poll, in seconds.
PACKS_POLL_SECONDS = 10
HANDLES_POLL_SECONDS = 3


def _session(request: HttpRequest, session_id) -> Session:
    return get_object_or_404(Session, pk=session_id, organization=request.organization)


@require_GET
@organization_required
def pressure_fragment(request: HttpRequest, session_id) -> HttpResponse:
    session = _session(request, session_id)
    frame = top_frame(session)
    pressure = session_pressure(session)
    down, up = pressure.band
    context = {
        "session": session,
        "frame": frame,
        "pressure": pressure,
        "width": min(100.0, pressure.percentage),
        "band_down": round(down * 100),
        "band_up": round(up * 100) if up is not None else None,
        "levels": LEVELS,
        "candidates": eviction_candidates(session=session, frame=frame, limit=5) if frame else [],
    }
    return render(request, "context/_pressure.html", context)


@require_GET
@organization_required
def context_preview_fragment(request: HttpRequest, session_id) -> HttpResponse:
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
    context = {
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
        ]
        context["breakdown"] = result.breakdown
        context["dropped_by_level"] = pack.record.dropped_by_level
        context["used_percent"] = round(100 * result.used / budget, 1) if budget else 0
    return render(request, "context/_preview.html", context)


def _pack_summary(record: ContextPackRecord) -> dict:
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
def context_packs_fragment(request: HttpRequest, session_id) -> HttpResponse:
    """The last PACKS_SHOWN packs agents asked for in the session, newest first.

    The card polls with ``newest`` set to the newest pack it shows and gets 204 (nothing
    to swap) while that is still the newest, so what a person expanded stays open.
    """
    session = _session(request, session_id)
    records = selectors.context_packs_newest_first(session)
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
        "newest": marker,
        "poll_seconds": PACKS_POLL_SECONDS,
    }
    return render(request, "context/_packs.html", context)


def _handles_context(frame: Frame, error: str = "", notice: str = "") -> dict:
    handles = list(
        ContextHandle.objects.filter(frame=frame)
        .only(
            "id",
            "kind",
            "priority",
            "category",
            "state",
            "attention_weight",
            "estimated_tokens",
            "summary_tokens",
            "last_access_at",
            "created_at",
        )
        .order_by("created_at", "id")[:HANDLES_SHOWN]
    )
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
def frame_handles_fragment(request: HttpRequest, frame_id) -> HttpResponse:
    frame = get_object_or_404(Frame, pk=frame_id, organization=request.organization)
    return render(request, "context/_handles.html", _handles_context(frame))


def _handle_action(request: HttpRequest, handle_id, action, notice: str = "") -> HttpResponse:
    handle = get_object_or_404(
        ContextHandle.objects.select_related("frame"),
        pk=handle_id,
        session__organization=request.organization,
    )
    error = ""
    try:
        with transaction.atomic():
            action(handle, f"user:{request.user.get_username()}")
    except DomainError as exc:
        error = exc.detail
    if not request.htmx:
        return redirect(reverse("context:frame_handles", args=[handle.frame_id]))
    context = _handles_context(handle.frame, error, "" if error else notice)
    return render(request, "context/_handles.html", context)


@require_POST
@organization_required
@transaction.atomic  # the answer (a fragment) is rendered before the commit
def handle_page_in_action(request: HttpRequest, handle_id) -> HttpResponse:
    mode = "full" if request.POST.get("mode") == "full" else "summary"
    return _handle_action(
        request, handle_id, lambda h, actor: handle_page_in(handle=h, mode=mode, actor=actor)
    )


@require_POST
@organization_required
@transaction.atomic  # the answer (a fragment) is rendered before the commit
def handle_page_out_action(request: HttpRequest, handle_id) -> HttpResponse:
    return _handle_action(
        request,
        handle_id,
        lambda h, actor: handle_page_out_request(handle=h, actor=actor),
        notice="Page-out queued: the worker summarizes the handle, then it shows as indexed.",
    )
