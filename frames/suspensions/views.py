"""The approval inbox: pending suspensions with a preview of what each frame resumes
with, and the Approve / Reject actions (htmx fragments, plain form posts as fallback).

The open inbox polls with a fingerprint of the pending list it shows and is answered
204 (nothing to swap) until that list changes, so the previews are assembled again only
when a suspension arrived or left.
"""

import hashlib
import logging

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from contextops.dashboard import organization_required, render_page
from contextops.errors import DomainError, Invalid, NotFound
from frames import selectors
from frames.context.pack import context_pack_assemble
from frames.models import Suspension, token_hash
from frames.views import budget_segments

from . import services as services

logger = logging.getLogger(__name__)

PREVIEW_BUDGET = 2000
INBOX_LIMIT = 30
INBOX_POLL_SECONDS = 10
PERMISSION = "frames.approve_suspension"
ROW_TEMPLATE = "frames/partials/_suspension_row.html"
DECIDED_TEMPLATE = "frames/partials/_suspension_decided.html"


def context_preview(suspension: Suspension) -> dict:
    """What the frame's context pack would hold if it resumed now, at a modest budget.

    Not stored: looking is not a pack an agent asked for. Any failure becomes
    ``{"error": text}`` instead of breaking the page.
    """
    try:
        # A savepoint: a database error here must not spoil the action's transaction.
        with transaction.atomic():
            pack = context_pack_assemble(
                session=suspension.session,
                frame=suspension.frame,
                budget_tokens=PREVIEW_BUDGET,
                store=False,
            )
    except DomainError as exc:
        return {"error": exc.detail}
    except Exception as exc:  # the inbox must render even when a pack cannot be made
        logger.exception("Context pack preview failed for frame %s", suspension.frame_id)
        return {"error": f"The context pack could not be assembled: {exc}"}
    result = pack.result
    return {
        "error": "",
        "brief_context": result.brief_context,
        "sections": [
            ("Breadcrumbs", len(result.breadcrumbs)),
            ("Facts", len(result.facts)),
            ("Working set", len(result.working_set)),
            ("Segments (handles)", len(result.segments)),
            ("Dropped", len(result.dropped)),
        ],
        "budget": result.budget,
        "used": result.used,
        "remaining": result.remaining,
        "breakdown": result.breakdown,
        "compaction_level": result.level,
    }


def _pending_item(suspension: Suspension, *, error: str = "", note: str = "") -> dict:
    frame = suspension.frame
    return {
        "suspension": suspension,
        "frame": frame,
        "hashed": token_hash(suspension.token),
        "ancestry": selectors.frame_ancestry(frame)[:-1],
        "segments": budget_segments(frame),
        "preview": context_preview(suspension),
        "error": error,
        "note": note,
    }


def _decided_item(suspension: Suspension, *, notice: str = "", error: str = "") -> dict:
    return {"s": suspension, "notice": notice, "error": error}


def pending_fingerprint(pending: list[Suspension]) -> str:
    """A short digest of which suspensions wait, in order; it changes when one arrives or
    leaves. Made from the tokens' hashes, so it reveals no token."""
    joined = "|".join(token_hash(s.token) for s in pending)
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def _pending(request: HttpRequest) -> list[Suspension]:
    return services.suspensions_pending(organization=request.organization, limit=INBOX_LIMIT + 1)


def _inbox_context(
    request: HttpRequest, *, override: dict | None = None, pending: list | None = None
) -> dict:
    if pending is None:
        pending = _pending(request)
    items = []
    for suspension in pending[:INBOX_LIMIT]:
        if override and override["suspension"].pk == suspension.pk:
            items.append(override)
        else:
            items.append(_pending_item(suspension))
    return {
        "items": items,
        "more_waiting": len(pending) > INBOX_LIMIT,
        "decided": services.suspensions_decided(organization=request.organization),
        "can_decide": request.user.has_perm(PERMISSION),
        "fingerprint": pending_fingerprint(pending),
        "poll_seconds": INBOX_POLL_SECONDS,
    }


@require_GET
@organization_required
@vary_on_headers("HX-Request")
def inbox(request: HttpRequest) -> HttpResponse:
    """The inbox; for htmx its pending list (and, out of band, the recent decisions), or
    204 when ``shown`` is the fingerprint of the list as it still is."""
    request.nav_section = "inbox"
    pending = _pending(request)
    if request.htmx and request.GET.get("shown") == pending_fingerprint(pending):
        return HttpResponse(status=204)
    context = {**_inbox_context(request, pending=pending), "oob": bool(request.htmx)}
    return render_page(request, "frames/inbox.html", context, partial="pending")


def _suspension_or_404(request: HttpRequest, frame_id, hashed: str) -> Suspension:
    try:
        return services.suspension_for_frame(
            organization=request.organization, frame_id=frame_id, hashed=hashed
        )
    except NotFound as error:
        raise Http404(str(error)) from None


def _decision(request: HttpRequest, frame_id, hashed: str, decide) -> HttpResponse:
    """Run ``decide(suspension, note)``; answer with the changed row (htmx) or a redirect.

    A refused decision answers with the row and the reason: 422 for a missing note
    (nothing changed), 409 / 410 when the suspension was decided or expired meanwhile.
    """
    if not request.user.has_perm(PERMISSION):
        raise PermissionDenied("You may not approve or reject suspensions.")
    request.nav_section = "inbox"
    suspension = _suspension_or_404(request, frame_id, hashed)
    note = request.POST.get("note", "")[:5000].replace("\x00", "")
    try:
        decided = decide(suspension, note)
    except Invalid as exc:
        item = _pending_item(suspension, error=exc.detail, note=note)
        return _refused(request, item, status=exc.status)
    except DomainError as exc:
        current = _suspension_or_404(request, frame_id, hashed)
        return _refused(
            request, _decided_item(current, error=exc.detail), status=exc.status, decided=True
        )
    if request.htmx:
        verb = "Approved" if decided.status == Suspension.Status.APPROVED else "Rejected"
        return render(request, DECIDED_TEMPLATE, _decided_item(decided, notice=f"{verb}."))
    return redirect("suspensions:inbox")


def _refused(
    request: HttpRequest, item: dict, *, status: int, decided: bool = False
) -> HttpResponse:
    if request.htmx:
        if decided:
            return render(request, DECIDED_TEMPLATE, item, status=status)
        return render(request, ROW_TEMPLATE, {"item": item, "can_decide": True}, status=status)
    context = _inbox_context(request, override=None if decided else item)
    context["page_error"] = item["error"]
    return render(request, "frames/inbox.html", context, status=status)


@require_POST
@organization_required
@transaction.atomic  # the answer (a fragment) is rendered before the commit
def approve(request: HttpRequest, frame_id, hashed: str) -> HttpResponse:
    return _decision(
        request,
        frame_id,
        hashed,
        lambda suspension, note: services.suspension_approve(
            suspension=suspension, user=request.user, note=note
        ),
    )


@require_POST
@organization_required
@transaction.atomic  # the answer (a fragment) is rendered before the commit
def reject(request: HttpRequest, frame_id, hashed: str) -> HttpResponse:
    return _decision(
        request,
        frame_id,
        hashed,
        lambda suspension, note: services.suspension_reject(
            suspension=suspension, user=request.user, note=note
        ),
    )
