"""The conversation tab of a session: turns, anchors, summaries, compaction runs."""

import bisect
import json
from collections.abc import Callable

from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods

from contextops.actors import user_actor
from contextops.dashboard import organization_required, render_page
from contextops.errors import DomainError, NotFound
from contextops.http import MemberRequest
from frames import charts
from frames import selectors as frames_selectors
from frames.models import Session
from frames.selectors import session_get
from frames.strategies import CONVERSATION, strategy_names

from . import anatomy, selection, selectors
from . import counterfactual as cf
from .compaction import compaction_request_listed
from .models import CompactionRun

TURNS_SHOWN = 500
RUNS_SHOWN = 20
TEMPLATE = "conversation/session_turns.html"
COUNTERFACTUAL_TEMPLATE = "conversation/counterfactual.html"
# Marker colours of the policies on the counterfactual chart, in strategy order.
POLICY_COLOURS = ("#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#c2185b")
# Why an ended session's runs panel has no form, and why its POST is refused.
ENDED_NOTE = "This session has ended: it is read-only, so it takes no more compactions."


def _session(request: MemberRequest, session_id) -> Session:
    try:
        return session_get(organization=request.organization, session_id=session_id)
    except NotFound:
        raise Http404("No such session.") from None


def _chart(session: Session, series: list[tuple[int, int]]) -> dict:
    """An SVG chart of occupancy per turn: axes with token ticks and turn numbers, the
    compaction threshold and the window as lines, and a dot for every turn's point.

    The axis names the first and the last turn of ``series``, or its one turn alone
    (drawn in the middle) when it has one."""
    width, height, left, bottom, top_margin = 600, 140, 56, 18, 6
    window = max(1, session.context_window_tokens)
    top = max([window] + [o for _, o in series])
    indices = [i for i, _ in series] or [0]
    first, last = min(indices), max(indices)
    plot_width = width - left - 8
    plot_height = height - bottom - top_margin

    def x(index: int) -> float:
        if last == first:
            return round(left + plot_width / 2, 1)
        return round(left + (index - first) / (last - first) * plot_width, 1)

    def y(tokens: int) -> float:
        return round(height - bottom - tokens / top * plot_height, 1)

    dots = [{"x": x(i), "y": y(o), "title": f"turn {i}: {o:,} tokens"} for i, o in series]
    return {
        "width": width,
        "height": height,
        "left": left,
        "axis_y": height - bottom,
        "points": " ".join(f"{d['x']},{d['y']}" for d in dots),
        "dots": dots,
        "ticks": [{"y": y(top * k // 4), "text": f"{top * k // 4:,}"} for k in range(5)],
        "labels": [{"x": x(i), "text": f"turn {i}"} for i in sorted({first, last})],
        "threshold_y": y(int(session.compaction_threshold * window)),
        "window_y": y(window),
    }


def _runs_context(
    session: Session, runs: list[CompactionRun] | None = None, form: dict | None = None
) -> dict:
    """The runs panel's context: ``runs``, else the session's newest runs read now, and
    the form's values (``form``: what was submitted; empty fields when None). An ended
    session's panel offers no form: ``ended_note`` says why instead."""
    if runs is None:
        runs = list(selectors.compactions_list(session=session)[:RUNS_SHOWN])
    ended = session.lifecycle_state == Session.Lifecycle.ENDED
    return {
        "session": session,
        "ended_note": ENDED_NOTE if ended else "",
        "runs": runs,
        "running": any(r.is_open for r in runs),
        "strategies": strategy_names(CONVERSATION),
        "form": form or {"strategy": selection.ANCHOR_POINT, "keep_turns": "", "target_tokens": ""},
    }


def _page_context(
    session: Session, branch: str, *, form: dict | None = None, error: str = ""
) -> dict:
    """The turns page's context for ``branch``, its runs panel with ``form``'s values and
    ``error`` (a refused compaction's, "" for none)."""
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
    return {
        **_runs_context(session, form=form),
        "error": error,
        "rows": rows,
        "turn_count": len(turns),
        "more_turns": len(turns) == TURNS_SHOWN,
        "branch": branch,
        "branches": selectors.turn_branches(session=session),
        "chart": _chart(session, series) if series else None,
        "threshold_percent": round(session.compaction_threshold * 100),
    }


@require_GET
@organization_required
def conversation_page(request: MemberRequest, session_id) -> HttpResponse:
    session = _session(request, session_id)
    context = _page_context(session, request.GET.get("branch", "")[:120])
    return render_page(request, TEMPLATE, context, partial="timeline")


@require_GET
@organization_required
def compactions_fragment(request: MemberRequest, session_id) -> HttpResponse:
    session = _session(request, session_id)
    return render_page(request, TEMPLATE, {**_runs_context(session), "branch": ""}, partial="runs")


def _whole_number(text: str, *, minimum: int) -> int | None:
    """A form's number: None when left empty; ValueError unless a whole number of at
    least ``minimum``."""
    number = int(text) if text else None
    if number is not None and number < minimum:
        raise ValueError
    return number


@require_http_methods(["GET", "POST"])
@organization_required
def compaction_start(request: MemberRequest, session_id) -> HttpResponse:
    """Queue a compaction from the form. For htmx the runs panel answers; without it, a
    redirect to the turns page, or that page with the error at this address (422). A GET
    of this address, a person coming back to that page later, goes to the turns page.
    An ended session is refused before its fields are read (422, nothing queued)."""
    session = _session(request, session_id)
    if request.method == "GET":
        return redirect("conversation:turns", session_id=session.pk)
    strategy = request.POST.get("strategy", selection.ANCHOR_POINT)
    keep = request.POST.get("keep_turns", "").strip()
    target = request.POST.get("target_tokens", "").strip()
    form = {"strategy": strategy, "keep_turns": keep, "target_tokens": target}
    if session.lifecycle_state == Session.Lifecycle.ENDED:
        error = ENDED_NOTE
    else:
        error = "" if strategy.strip() else "Choose a strategy."
    runs = None
    try:
        keep_turns = _whole_number(keep, minimum=0)
    except ValueError:
        keep_turns, error = None, error or "Keep turns must be a whole number, 0 or more."
    try:
        target_tokens = _whole_number(target, minimum=1)
    except ValueError:
        target_tokens, error = None, error or "Target tokens must be a whole number above 0."
    if not error:
        try:
            # The runs the fragment lists, read before the commit.
            runs = compaction_request_listed(
                RUNS_SHOWN,
                session=session,
                strategy=strategy,
                keep_turns=keep_turns,
                target_tokens=target_tokens,
                actor=user_actor(request.user),
                user=request.user,
            )
        except DomainError as exc:
            error = exc.detail
    if not request.htmx:
        if not error:
            return redirect("conversation:turns", session_id=session.pk)
        # Without htmx the whole page answers, so the error and the typed values show.
        context = _page_context(session, "", form=form, error=error)
        return render_page(request, TEMPLATE, context, status=422)
    context = {**_runs_context(session, runs, form), "branch": "", "error": error}
    return render_page(request, TEMPLATE, context, partial="runs", status=422 if error else 200)


def _counterfactual_chart(answer: cf.Counterfactual, number: Callable[[int], int]) -> dict:
    """The occupancy curve as it was and with the real compactions undone, the threshold,
    the real compaction points, and one lane of would-be points per policy, on labelled
    axes: tokens up the left, ticked from 0 to a round top at or above the window and
    the curves (``charts.axis_steps``); the units along the bottom, ticked at round
    numbers as the page numbers them (``_unit_ticks``). The window and trigger lines
    name themselves, and ``description`` says it all in words for a screen reader."""
    # The top margin leaves room for the window line's label above it at the top tick.
    width, left, right, top_margin, plot_height, lane = 800, 104, 12, 14, 200, 18
    axis_y = top_margin + plot_height
    lanes_y = axis_y + 44  # below the unit ticks (+14) and the axis title (+32)
    last = max([1] + [t for t, _ in answer.uncompacted_curve])
    steps = charts.axis_steps(
        max([answer.window_tokens] + [o for _, o in answer.uncompacted_curve])
    )
    top = steps[-1]
    plot_width = width - left - right

    def x(turn: int) -> float:
        return round(left + turn / last * plot_width, 1)

    def y(tokens: int) -> float:
        return round(axis_y - tokens / top * plot_height, 1)

    lanes = []
    for i, policy in enumerate(answer.policies):
        colour = (
            "#d32f2f" if policy.policy == cf.ACTUAL else POLICY_COLOURS[i % len(POLICY_COLOURS)]
        )
        lanes.append(
            {
                "policy": policy.policy,
                "colour": colour,
                "y": lanes_y + i * lane,
                "text_y": lanes_y + 10 + i * lane,
                "points": [
                    {
                        "x": x(f.turn),
                        "curve_y": y(f.occupancy),
                        "turn": number(f.turn),
                        "occupancy": f.occupancy,
                    }
                    for f in policy.fires
                ],
            }
        )
    x_ticks = _unit_ticks(last, number)
    unit, numbered = (
        ("Model call", "on the call pages")
        if answer.unit == "call"
        else ("Conversation turn", "in the turn list")
    )
    percent = round(answer.threshold * 100)
    return {
        "width": width,
        "left": left,
        "right": width - right,
        "top": top_margin,
        "axis_y": axis_y,
        "full_height": lanes_y + len(lanes) * lane + 4,
        "points": " ".join(f"{x(t)},{y(o)}" for t, o in answer.curve),
        "uncompacted": " ".join(f"{x(t)},{y(o)}" for t, o in answer.uncompacted_curve),
        "y_ticks": [{"y": y(v), "text": f"{v:,}"} for v in steps],
        "x_ticks": [{"x": x(i), "text": str(n)} for i, n in x_ticks],
        "y_title": "Tokens in the window",
        "y_title_y": top_margin + plot_height / 2,
        "x_title": f"{unit} (numbered as {numbered})",
        "x_title_x": round(left + plot_width / 2, 1),
        "threshold_y": y(answer.threshold_tokens),
        "threshold_label": f"our trigger, {percent}%: {answer.threshold_tokens:,} tokens",
        "window_y": y(answer.window_tokens),
        "window_label": f"context window: {answer.window_tokens:,} tokens",
        "lanes": lanes,
        "description": (
            f"Across: {unit.lower()}s {number(0)} to {number(last)}. Up: tokens in the "
            f"window, 0 to {top:,}. The context window is {answer.window_tokens:,} tokens "
            f"and our trigger fires above {answer.threshold_tokens:,} ({percent}%). "
            "One curve is the full input plus output of each call as it was, the other "
            "the same with the real compactions undone; below them, one lane per policy "
            "marks where it compacts."
        ),
    }


def _unit_ticks(last: int, number: Callable[[int], int]) -> list[tuple[int, int]]:
    """(unit index, the number the page gives it) for the ticks of a chart of units 0 to
    ``last``: the first unit, then every unit whose number is a round multiple
    (``charts.axis_steps`` over the numbers' span, at most 8 steps) and not within half
    a step of the first. Where the numbers skip a multiple (a subagent's calls), the
    tick goes on the next unit, with its own number."""
    numbers = [number(i) for i in range(last + 1)]
    first = numbers[0]
    steps = charts.axis_steps(numbers[-1] - first, most=8)
    step = steps[1]
    ticks = [(0, first)]
    for multiple in range(step * (first // step + 1), numbers[-1] + 1, step):
        index = bisect.bisect_left(numbers, multiple)
        if multiple - first > step / 2 and index > ticks[-1][0]:
            ticks.append((index, numbers[index]))
    return ticks


def _runs_text(runs: list[list[int]], number: Callable[[int], int]) -> str:
    """[[0, 60], [62, 62]] as "0–60, 62", each index as ``number`` shows it, a run split
    where the shown numbers skip some (a subagent's calls); "—" for none."""
    shown = cf.ranges(number(i) for first, last in runs for i in range(first, last + 1))
    return ", ".join(f"{a}–{b}" if a != b else str(a) for a, b in shown) or "—"


def _unit_number(answer: cf.Counterfactual) -> Callable[[int], int]:
    """How the page numbers a unit: a call as the call pages do ("Model call N of M",
    from 1, a subagent's calls counted too), a conversation turn as the turn list does
    (from 0)."""
    if answer.unit != "call":
        return lambda index: index
    numbers = answer.call_numbers
    return lambda index: numbers[index] if index < len(numbers) else index + 1


def _compaction_tables(answer: cf.Counterfactual, number: Callable[[int], int]) -> list[dict]:
    """One table per real compaction: the agent's or our run's own row, then a row per
    strategy."""
    tables = []
    for point in answer.compactions:
        actual = point.actual
        rows = [
            {
                "name": f"our run: {actual.strategy} (actual)"
                if point.origin == "contextops"
                else "the agent (actual)",
                "actual": True,
                "kept": "the summary only"
                if actual.summarized and not actual.kept
                else _runs_text(actual.kept, number),
                "summarized": _runs_text(actual.summarized, number),
                "removed": _runs_text(actual.removed, number),
                "tokens_after": point.actual.tokens_after,
                "summary_tokens": point.actual.summary_tokens,
                "anchor": "",
                "cut_at": None,
            }
        ]
        for outcome in point.strategies:
            rows.append(
                {
                    "name": outcome.strategy,
                    "actual": False,
                    "kept": _runs_text(outcome.kept, number),
                    "summarized": _runs_text(outcome.summarized, number),
                    "removed": _runs_text(outcome.removed, number),
                    "tokens_after": outcome.tokens_after,
                    "summary_tokens": outcome.summary_tokens,
                    "anchor": (
                        f"{answer.unit} {number(outcome.anchor['turn'])} ({outcome.anchor['type']})"
                        if outcome.anchor
                        else ""
                    ),
                    "cut_at": None if outcome.cut_at is None else number(outcome.cut_at),
                }
            )
        tables.append({"point": point, "number": number(point.turn), "rows": rows})
    return tables


@require_GET
@organization_required
def counterfactual_page(request: MemberRequest, session_id) -> HttpResponse:
    """Counterfactual compaction side by side: the curve, each policy's compaction points,
    and a table per real compaction. ``?threshold=`` (0 to 1) moves our trigger."""
    session = _session(request, session_id)
    raw = request.GET.get("threshold", "").strip()
    error = ""
    threshold = None
    if raw:
        try:
            threshold = float(raw)
            if not 0 < threshold <= 1:
                raise ValueError
        except ValueError:
            threshold, error = None, "The threshold must be a number above 0 and at most 1."
    answer = selectors.counterfactual_get(session=session, threshold=threshold)
    number = _unit_number(answer)
    context = {
        "session": session,
        "answer": answer,
        "chart": _counterfactual_chart(answer, number) if answer.curve else None,
        "tables": _compaction_tables(answer, number),
        "unit_word": answer.unit,
        "trigger_number": number(answer.trigger.turn) if answer.trigger else None,
        "policy_rows": [
            {"policy": p, "fires": [number(f.turn) for f in p.fires]} for p in answer.policies
        ],
        "threshold_percent": round(answer.threshold * 100),
        "error": error,
        "raw_threshold": raw,
    }
    return render_page(
        request, COUNTERFACTUAL_TEMPLATE, context, partial="report", status=422 if error else 200
    )


CATEGORY_LABELS = {
    "system_and_tools": "System prompt and tools",
    "user_text": "User text",
    "assistant_text": "Assistant text",
    "thinking": "Thinking",
    "tool_calls": "Tool calls",
    "tool_results": "Tool results",
    "summaries": "Summaries",
}
# Message text longer than this shows collapsed, its opening as the summary line.
COLLAPSE_CHARS = 600


def _formatted(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _result_text(content) -> str:
    """A tool result's content: its text, its text blocks' texts, else formatted JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    ):
        return "\n".join(str(b.get("text", "")) for b in content)
    return _formatted(content)


def _block_text(block) -> str:
    """One content block as a person reads it: text as written, a tool call as its name
    and input, a result as what came back, each headed by what it is."""
    if not isinstance(block, dict):
        return _formatted(block)
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return "[thinking]\n" + str(block.get("thinking", ""))
    if kind == "redacted_thinking":
        return "[thinking, redacted]"
    if kind == "tool_use":
        return f"[tool call: {block.get('name', '?')} · {block.get('id', '')}]\n" + _formatted(
            block.get("input", {})
        )
    if kind == "tool_result":
        error = " · error" if block.get("is_error") else ""
        return f"[tool result{error} · {block.get('tool_use_id', '')}]\n" + _result_text(
            block.get("content", "")
        )
    if kind == "image":
        return "[image]"
    return _formatted(block)


def _shown(message) -> dict:
    """A message as the call page shows it: its text, its blocks one after another
    (tool calls and results headed by what they are), never a wall of JSON."""
    content = message.content
    if isinstance(content, str):
        body = content
    elif isinstance(content, list):
        body = "\n\n".join(_block_text(block) for block in content)
    else:
        body = _formatted(content)
    return {
        "message": message,
        "body": body,
        "long": len(body) > COLLAPSE_CHARS,
        "opening": body[:200],
    }


def _request_read(shown: int, read: int) -> str:
    """How the request's heading counts the messages it lists: "" for none, "the one
    message it read", "the 5 messages it read", or "the last 30 of the 120 messages it
    read" when only the last are shown."""
    if not shown:
        return ""
    if shown == read == 1:
        return "the one message it read"
    if shown == read:
        return f"the {read:,} messages it read"
    return f"the last {shown:,} of the {read:,} messages it read"


@require_GET
@organization_required
def call_detail(request: MemberRequest, session_id, call_id: int) -> HttpResponse:
    """One model call: its figures, its input's anatomy as a stacked bar, and the
    request and response with long content collapsed."""
    request.nav_section = "sessions"
    session = _session(request, session_id)
    try:
        call = frames_selectors.call_get(session=session, call_id=call_id)
    except NotFound:
        raise Http404("No such model call.") from None
    found = anatomy.call_anatomy(session=session, call=call).as_dict()
    full = max(found["full_input_tokens"], 1)
    categories = [
        {
            **category,
            "label": CATEGORY_LABELS[category["category"]],
            "width": round(100 * category["tokens"] / full, 2),
        }
        for category in found["categories"]
    ]
    read, response_messages = anatomy.call_exchange(call)
    position, call_count = selectors.call_position(session=session, call=call)
    previous, following = selectors.call_neighbours(session=session, call=call)
    context = {
        "session": session,
        "call": call,
        "position": position,
        "call_count": call_count,
        "previous_call": previous,
        "next_call": following,
        "cost": frames_selectors.usage_cost(call, frames_selectors.price_table()),
        "anatomy": found,
        "categories": categories,
        "threshold_share": round(
            100 * found["threshold_tokens"] / max(found["window_tokens"], 1), 2
        ),
        "window_share": round(100 * found["full_input_tokens"] / max(found["window_tokens"], 1), 2),
        "request_summary": read.summary,
        "request_read": _request_read(len(read.messages), read.read),
        "request_messages": [_shown(m) for m in read.messages],
        "response_messages": [_shown(m) for m in response_messages],
    }
    return render_page(request, "conversation/call_detail.html", context)
