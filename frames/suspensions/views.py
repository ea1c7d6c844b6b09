"""The approval inbox: pending suspensions with a preview of what each frame resumes
with, and the Approve / Reject actions (htmx fragments, plain form posts as fallback).

The open inbox polls with a fingerprint of the pending list it shows and is answered
204 (nothing to swap) until that list changes, so the previews are assembled again only
when a suspension arrived or left. What the rows show, and a decision's answer, come
from ``frames.suspensions.inbox``.
"""

from uuid import UUID

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from contextops.dashboard import organization_required, render_page
from contextops.errors import NotFound
from contextops.http import MemberRequest
from frames.services.expiry import suspensions_expire

from . import selectors
from .inbox import Verdict, inbox_context, inbox_decide, pending_fingerprint

PREVIEW_BUDGET = 2000
INBOX_LIMIT = 30
INBOX_POLL_SECONDS = 10
PERMISSION = "frames.approve_suspension"
ROW_TEMPLATE = "frames/partials/_suspension_row.html"
DECIDED_TEMPLATE = "frames/partials/_suspension_decided.html"
DECISION_TEMPLATE = "frames/partials/_suspension_decision.html"


@require_GET
@organization_required
@vary_on_headers("HX-Request")
def inbox(request: MemberRequest) -> HttpResponse:
    """The inbox; for htmx its pending list (and, out of band, the recent decisions), or
    204 when ``shown`` is the fingerprint of the list as it still is."""
    request.nav_section = "inbox"
    suspensions_expire(organization=request.organization)  # none shows as pending
    pending = selectors.suspensions_pending(
        organization=request.organization, limit=INBOX_LIMIT + 1
    )
    if request.htmx and request.GET.get("shown") == pending_fingerprint(pending):
        return HttpResponse(status=204)
    context = inbox_context(
        organization=request.organization,
        pending=pending,
        limit=INBOX_LIMIT,
        preview_budget=PREVIEW_BUDGET,
        can_decide=request.user.has_perm(PERMISSION),
    )
    context.update(oob=bool(request.htmx), poll_seconds=INBOX_POLL_SECONDS)
    return render_page(request, "frames/inbox.html", context, partial="pending")


def _decision(
    request: MemberRequest, frame_id: UUID, hashed: str, verdict: Verdict
) -> HttpResponse:
    """Approve or reject; answer with the changed row (htmx) or a redirect.

    A refused decision answers with the row and the reason: 422 for a missing note
    (nothing changed), 409 / 410 when the suspension was decided or expired meanwhile.
    """
    if not request.user.has_perm(PERMISSION):
        raise PermissionDenied("You may not approve or reject suspensions.")
    request.nav_section = "inbox"
    note = request.POST.get("note", "")[:5000].replace("\x00", "")
    try:
        answer = inbox_decide(
            organization=request.organization,
            user=request.user,
            frame_id=frame_id,
            hashed=hashed,
            verdict=verdict,
            note=note,
            page=not request.htmx,
            limit=INBOX_LIMIT,
            preview_budget=PREVIEW_BUDGET,
        )
    except NotFound as error:
        raise Http404(str(error)) from None
    if answer.done:
        if request.htmx:
            context = {**answer.row, "decided": answer.decided, "oob": True}
            return render(request, DECISION_TEMPLATE, context)
        return redirect("suspensions:inbox")
    if request.htmx:
        if answer.row_pending:
            context = {"item": answer.row, "can_decide": True}
            return render(request, ROW_TEMPLATE, context, status=answer.status)
        return render(request, DECIDED_TEMPLATE, answer.row, status=answer.status)
    context = {**(answer.page or {}), "poll_seconds": INBOX_POLL_SECONDS}
    return render(request, "frames/inbox.html", context, status=answer.status)


@require_POST
@organization_required
def approve(request: MemberRequest, frame_id: UUID, hashed: str) -> HttpResponse:
    return _decision(request, frame_id, hashed, "approved")


@require_POST
@organization_required
def reject(request: MemberRequest, frame_id: UUID, hashed: str) -> HttpResponse:
    return _decision(request, frame_id, hashed, "rejected")
