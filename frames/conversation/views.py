"""The conversation tab of a session: turns, anchors, summaries, compaction runs."""

from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from contextops.actors import user_actor
from contextops.dashboard import organization_required, render_page
from contextops.errors import DomainError, NotFound
from contextops.http import MemberRequest
from frames.models import Session
from frames.selectors import session_get
from frames.strategies import CONVERSATION, strategy_names

from . import selection, selectors
from .compaction import compaction_request_listed
from .models import CompactionRun

TURNS_SHOWN = 500
RUNS_SHOWN = 20
TEMPLATE = "conversation/session_turns.html"


def _session(request: MemberRequest, session_id) -> Session:
    try:
        return session_get(organization=request.organization, session_id=session_id)
    except NotFound:
        raise Http404("No such session.") from None


def _chart(session: Session, series: list[tuple[int, int]]) -> dict:
    """An SVG polyline of occupancy per turn, with the compaction threshold as a line."""
    width, height = 600, 120
    window = max(1, session.context_window_tokens)
    top = max([window] + [o for _, o in series])
    last = max([1] + [i for i, _ in series])

    def y(tokens: int) -> float:
        return round(height - tokens / top * height, 1)

    points = " ".join(f"{round(i / last * width, 1)},{y(o)}" for i, o in series)
    return {
        "width": width,
        "height": height,
        "points": points,
        "threshold_y": y(int(session.compaction_threshold * window)),
        "window_y": y(window),
    }


def _runs_context(session: Session, runs: list[CompactionRun] | None = None) -> dict:
    """The runs panel's context: ``runs``, else the session's newest runs read now."""
    if runs is None:
        runs = list(selectors.compactions_list(session=session)[:RUNS_SHOWN])
    return {
        "session": session,
        "runs": runs,
        "running": any(r.is_open for r in runs),
        "strategies": strategy_names(CONVERSATION),
    }


@require_GET
@organization_required
def conversation_page(request: MemberRequest, session_id) -> HttpResponse:
    session = _session(request, session_id)
    branch = request.GET.get("branch", "")[:120]
    turns = list(selectors.turns_list(session=session, branch=branch, limit=TURNS_SHOWN))
    summaries = selectors.summaries_by_id(session=session)
    # Fold consecutive summarized turns under their summary.
    rows: list[dict] = []
    for turn in turns:
        if (
            turn.summarized
            and rows
            and rows[-1]["kind"] == "summary"
            and rows[-1]["summary"].pk == turn.summary_id
        ):
            rows[-1]["turns"].append(turn)
        elif turn.summarized:
            rows.append(
                {"kind": "summary", "summary": summaries.get(turn.summary_id), "turns": [turn]}
            )
        else:
            rows.append({"kind": "turn", "turn": turn})
    series = selectors.occupancy_series(session=session, branch=branch)
    context = {
        **_runs_context(session),
        "rows": rows,
        "turn_count": len(turns),
        "more_turns": len(turns) == TURNS_SHOWN,
        "branch": branch,
        "branches": selectors.turn_branches(session=session),
        "chart": _chart(session, series) if series else None,
        "threshold_percent": round(session.compaction_threshold * 100),
    }
    return render_page(request, TEMPLATE, context, partial="timeline")


@require_GET
@organization_required
def compactions_fragment(request: MemberRequest, session_id) -> HttpResponse:
    session = _session(request, session_id)
    return render_page(request, TEMPLATE, {**_runs_context(session), "branch": ""}, partial="runs")


@require_POST
@organization_required
def compaction_start(request: MemberRequest, session_id) -> HttpResponse:
    session = _session(request, session_id)
    strategy = request.POST.get("strategy", selection.ANCHOR_POINT)
    keep = request.POST.get("keep_turns", "").strip()
    target = request.POST.get("target_tokens", "").strip()
    error = ""
    runs = None
    try:
        keep_turns = int(keep) if keep else None
        if keep_turns is not None and keep_turns < 0:
            raise ValueError
    except ValueError:
        keep_turns, error = None, "Keep turns must be a whole number, 0 or more."
    try:
        target_tokens = int(target) if target else None
        if target_tokens is not None and target_tokens < 1:
            raise ValueError
    except ValueError:
        target_tokens, error = None, error or "Target tokens must be a whole number above 0."
    if not error:
        try:
            # The runs the fragment lists, read before the commit.
            runs = compaction_request_listed(
                session=session,
                strategy=strategy,
                keep_turns=keep_turns,
                target_tokens=target_tokens,
                actor=user_actor(request.user),
                shown=RUNS_SHOWN,
            )
        except DomainError as exc:
            error = exc.detail
    if not request.htmx:
        return redirect("conversation:turns", session_id=session.pk)
    context = {**_runs_context(session, runs), "branch": "", "error": error}
    return render_page(request, TEMPLATE, context, partial="runs", status=422 if error else 200)
