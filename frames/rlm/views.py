"""Dashboard pages of RLM states: the list and one state with its log and checkpoints."""

from typing import Any

from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from contextops.actors import user_actor
from contextops.dashboard import organization_required, render_page
from contextops.errors import DomainError, NotFound
from contextops.http import MemberRequest
from contextops.text import value_text

from . import selectors, snapshots
from .models import RlmState
from .selectors import StateView

MUTATIONS_SHOWN = 50
STATES_PER_PAGE = 50
PREVIEW_CHARS = 160
IN_FILE = "(stored in a file)"


def can_roll_back(user: User) -> bool:
    return bool(user.is_staff or user.has_perm("rlm.rollback_state"))


def _preview(value: Any) -> str:
    text = value_text(value)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _state(request: MemberRequest, state_id: str) -> RlmState:
    try:
        return selectors.state_get(organization=request.organization, state_id=state_id)
    except NotFound:
        raise Http404("No such RLM state.") from None


def _state_context(
    view: StateView, *, can_roll_back: bool, error: str = "", notice: str = ""
) -> dict:
    """The page's context from what ``view`` read; nothing is queried here."""
    # Values that live in files are not opened to draw the page: the API reads them.
    variables = [
        {"row": v, "preview": IN_FILE if v.file_name else _preview(v.value)} for v in view.variables
    ]
    mutations = [
        {
            "row": m,
            "old": IN_FILE if m.old_file else _preview(m.old_value),
            "new": IN_FILE if m.new_file else _preview(m.new_value),
        }
        for m in view.mutations
    ]
    return {
        "state": view.state,
        "variables": variables,
        "mutations": mutations,
        "mutations_shown": MUTATIONS_SHOWN,
        "checkpoints": view.checkpoints,
        "can_roll_back": can_roll_back,
        "error": error,
        "notice": notice,
    }


@require_GET
@organization_required
def state_list(request: MemberRequest) -> HttpResponse:
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
def state_detail(request: MemberRequest, state_id: str) -> HttpResponse:
    request.nav_section = "rlm"
    view = selectors.state_view(_state(request, state_id), mutations=MUTATIONS_SHOWN)
    context = _state_context(view, can_roll_back=can_roll_back(request.user))
    return render_page(request, "rlm/state_detail.html", context, partial="state")


@require_POST
@organization_required
def state_rollback(request: MemberRequest, state_id: str) -> HttpResponse:
    request.nav_section = "rlm"
    state = _state(request, state_id)
    checkpoint_id = request.POST.get("checkpoint_id", "")
    allowed = can_roll_back(request.user)
    view = None
    error = notice = ""
    status = 200
    if not allowed:
        error, status = "You do not have permission to roll states back.", 403
    else:
        try:
            # The state the fragment shows, read before the commit.
            view = snapshots.state_rollback(
                state=state,
                checkpoint_id=checkpoint_id,
                actor=user_actor(request.user),
                user=request.user,
                mutations_shown=MUTATIONS_SHOWN,
            )
            notice = f"Rolled back to {checkpoint_id}."
        except DomainError as exc:
            error, status = exc.detail, exc.status
    if not request.htmx:
        if status == 403:
            return HttpResponse(error, status=403)
        return redirect(reverse("rlm:state_detail", args=[state.state_id]))
    if view is None:  # refused: nothing changed, so the state is read now
        view = selectors.state_view(state, mutations=MUTATIONS_SHOWN)
    context = _state_context(view, can_roll_back=allowed, error=error, notice=notice)
    # htmx swaps only 2xx answers: the refusal or error is shown inside the fragment.
    return render_page(request, "rlm/state_detail.html", context, partial="state")
