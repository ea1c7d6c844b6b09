"""Dashboard pages of RLM states: the list and one state with its log and checkpoints."""

import json

from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from contextops.dashboard import organization_required, render_page
from contextops.errors import DomainError, NotFound

from . import selectors, services

MUTATIONS_SHOWN = 50
STATES_PER_PAGE = 50
PREVIEW_CHARS = 160
IN_FILE = "(stored in a file)"


def can_roll_back(user) -> bool:
    return bool(user.is_staff or user.has_perm("rlm.rollback_state"))


def _preview(value) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _state(request: HttpRequest, state_id: str):
    try:
        return selectors.state_get(organization=request.organization, state_id=state_id)
    except NotFound:
        raise Http404("No such RLM state.") from None


def _state_context(request: HttpRequest, state, *, error: str = "", notice: str = "") -> dict:
    # Values that live in files are not opened to draw the page: the API reads them.
    variables = [
        {"row": v, "preview": IN_FILE if v.file_name else _preview(v.value)}
        for v in selectors.state_variables(state)
    ]
    mutations = [
        {
            "row": m,
            "old": IN_FILE if m.old_file else _preview(m.old_value),
            "new": IN_FILE if m.new_file else _preview(m.new_value),
        }
        for m in selectors.mutation_list(state=state, limit=MUTATIONS_SHOWN, newest_first=True)
    ]
    return {
        "state": state,
        "variables": variables,
        "mutations": mutations,
        "mutations_shown": MUTATIONS_SHOWN,
        "checkpoints": selectors.checkpoint_list(state),
        "can_roll_back": can_roll_back(request.user),
        "error": error,
        "notice": notice,
    }


@require_GET
@organization_required
def state_list(request: HttpRequest) -> HttpResponse:
    request.nav_section = "rlm"
    states = selectors.state_list(
        organization=request.organization, completion_status=request.GET.get("status") or None
    )
    page = Paginator(states, STATES_PER_PAGE).get_page(request.GET.get("page"))
    return render_page(
        request,
        "rlm/state_list.html",
        {"page": page, "status": request.GET.get("status", "")},
        partial="states",
    )


@require_GET
@organization_required
def state_detail(request: HttpRequest, state_id: str) -> HttpResponse:
    request.nav_section = "rlm"
    state = _state(request, state_id)
    return render_page(
        request, "rlm/state_detail.html", _state_context(request, state), partial="state"
    )


@require_POST
@organization_required
@transaction.atomic  # the answer (a fragment) is rendered before the commit
def state_rollback(request: HttpRequest, state_id: str) -> HttpResponse:
    request.nav_section = "rlm"
    state = _state(request, state_id)
    checkpoint_id = request.POST.get("checkpoint_id", "")
    error = notice = ""
    status = 200
    if not can_roll_back(request.user):
        error, status = "You do not have permission to roll states back.", 403
    else:
        try:
            services.state_rollback(
                state=state,
                checkpoint_id=checkpoint_id,
                actor=f"user:{request.user.get_username()}",
            )
            notice = f"Rolled back to {checkpoint_id}."
        except DomainError as exc:
            error, status = exc.detail, exc.status
    if not request.htmx:
        if status == 403:
            return HttpResponse(error, status=403)
        return redirect(reverse("rlm:state_detail", args=[state.state_id]))
    state = _state(request, state_id)
    context = _state_context(request, state, error=error, notice=notice)
    # htmx swaps only 2xx answers: the refusal or error is shown inside the fragment.
    return render_page(request, "rlm/state_detail.html", context, partial="state")
