"""Reads of the conversation, scoped to one organization (another's objects are NotFound)."""

import bisect
from typing import Any

from django.db.models import Count, F, Q, QuerySet
from django.db.models.functions import Coalesce

from contextops.errors import Invalid, NotFound
from contextops.ids import row_get
from contextops.tokens import count_tokens
from frames.models import Event, Session, Usage

from . import counterfactual as cf
from . import selection as sel
from .anchors import AnchorPatterns
from .models import MAIN_BRANCH, CompactionRun, Import, Message, Summary, Turn


def turns_list(
    *,
    session: Session,
    branch: str = MAIN_BRANCH,
    after: int | None = None,
    limit: int | None = None,
) -> QuerySet[Turn]:
    """The branch's turns in order (index ascending), after index ``after`` when given."""
    turns = Turn.objects.filter(session=session, branch=branch).order_by("index")
    if after is not None:
        turns = turns.filter(index__gt=after)
    return turns[:limit] if limit else turns


def turn_branches(*, session: Session) -> list[str]:
    return list(
        Turn.objects.filter(session=session)
        .order_by("branch")
        .values_list("branch", flat=True)
        .distinct()
    )


def compaction_get(*, organization, compaction_id: Any) -> CompactionRun:
    runs = CompactionRun.objects.select_related("summary")
    return row_get(
        runs.filter(session__organization=organization), compaction_id, "No such compaction."
    )


def compactions_list(*, session: Session) -> QuerySet[CompactionRun]:
    return (
        CompactionRun.objects.filter(session=session)
        .select_related("summary")
        .order_by("-created_at")
    )


def summaries_by_id(*, session: Session) -> dict:
    return {s.pk: s for s in Summary.objects.filter(session=session)}


def occupancy_series(*, session: Session, branch: str = MAIN_BRANCH) -> list[tuple[int, int]]:
    """(turn index, window occupancy of its latest call) for the turns that reported usage."""
    return list(
        Turn.objects.filter(session=session, branch=branch, occupancy_tokens__gt=0)
        .order_by("index")
        .values_list("index", "occupancy_tokens")
    )


def call_position(*, session: Session, call: Usage) -> tuple[int, int]:
    """(the call's place among the session's calls, counted from 1, how many there are),
    in the order the session's calls list shows them: when sent, else when recorded, then
    by id. One query."""
    moment = call.started_at or call.created_at
    counts = _calls_sent(session).aggregate(
        total=Count("id"),
        before=Count("id", filter=Q(moment__lt=moment) | Q(moment=moment, id__lt=call.pk)),
    )
    return counts["before"] + 1, counts["total"]


def call_neighbours(*, session: Session, call: Usage) -> tuple[int | None, int | None]:
    """The ids of the calls just before and just after ``call`` in the calls list's order
    (None at either end). Two queries, each one step along the (moment, id) order."""
    moment = call.started_at or call.created_at
    calls = _calls_sent(session)
    before = (
        calls.filter(Q(moment__lt=moment) | Q(moment=moment, id__lt=call.pk))
        .order_by(F("moment").desc(), F("id").desc())
        .values_list("id", flat=True)
        .first()
    )
    after = (
        calls.filter(Q(moment__gt=moment) | Q(moment=moment, id__gt=call.pk))
        .values_list("id", flat=True)
        .first()
    )
    return before, after


def call_numbers(*, session: Session) -> dict[int, int]:
    """Every call's id -> its place among the session's calls as ``call_position`` counts
    it (from 1, a subagent's calls included). One query."""
    ids = _calls_sent(session).values_list("id", flat=True)
    return {pk: number for number, pk in enumerate(ids, start=1)}


def _calls_sent(session: Session) -> QuerySet[Usage]:
    """The session's calls in the calls list's order, with ``moment``, the time it
    orders them by."""
    return (
        Usage.objects.filter(session=session)
        .annotate(moment=Coalesce("started_at", "created_at"))
        .order_by("moment", "id")
    )


def import_get(*, organization, import_id: Any) -> Import:
    """The organization's import ``import_id``, with its source; NotFound for any other."""
    import_id = str(import_id)
    job = (
        Import.objects.select_related("source")
        .filter(pk=import_id, organization=organization)
        .first()
        if len(import_id) <= 24
        else None
    )
    if job is None:
        raise NotFound("No such import.")
    return job


def counterfactual_get(*, session: Session, threshold: float | None = None) -> cf.Counterfactual:
    """The counterfactual of ``session``'s main conversation at ``threshold`` (the share of
    the context window at which our trigger fires; the session's own when None).

    Raises Invalid(field="threshold") outside (0, 1]. The units are the main
    conversation's model calls (``counterfactual.steps``: every call of the session but
    those made in a subagent conversation's frame), or its turns when it reported none;
    each call unit is named by its number on the call pages (``call_numbers``), which
    count a subagent's calls too. The real compactions are the ones its transcript
    recorded and the session's own runs that took turns out of its window
    (``_runs_applied``): not one that crashed.

    Long because it gathers the calls, turns and real compactions the pure rule
    counterfactual.counterfactual takes, in the order it takes them; each read is a few
    lines no other page makes.
    """
    if threshold is None:
        threshold = float(session.compaction_threshold)
    if not 0 < threshold <= 1:
        raise Invalid("threshold must be above 0 and at most 1.", field="threshold")
    turns = list(
        Turn.objects.filter(session=session, branch=MAIN_BRANCH)
        .order_by("index")
        .only(
            "index",
            "tokens",
            "anchor_type",
            "has_error",
            "occupancy_tokens",
            "created_at",
            "compaction_run_id",
        )
    )
    # Every call of the session, but those made in a frame that holds another branch's
    # conversation (an imported subagent's): they filled another context window.
    elsewhere = (
        Turn.objects.filter(session=session, frame_id__isnull=False)
        .exclude(branch=MAIN_BRANCH)
        .values("frame_id")
    )
    usage = (
        Usage.objects.filter(session=session)
        .exclude(frame_id__in=elsewhere)
        .order_by("created_at", "id")
    )
    records = list(
        usage.only(
            "id",
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "created_at",
        )
    )
    call_times = [r.created_at for r in records]
    if records:
        messages = [
            cf.MessagePoint(turn_index, role, content, tokens, at)
            for turn_index, role, content, tokens, at in Message.objects.filter(
                session=session, turn__branch=MAIN_BRANCH
            )
            .order_by("seq")
            .values_list("turn__index", "role", "content", "tokens", "created_at")
        ]
        units = cf.steps(messages, call_times, AnchorPatterns.from_settings())
    else:
        units = [
            cf.TurnPoint(
                t.index,
                t.tokens,
                t.anchor_type,
                t.has_error,
                t.occupancy_tokens,
                t.created_at,
                t.index,
            )
            for t in turns
        ]
    calls = [
        cf.Call(
            turn=i,
            input_tokens=r.input_tokens + r.cache_creation_input_tokens + r.cache_read_input_tokens,
            output_tokens=r.output_tokens,
            at=r.created_at,
        )
        for i, r in enumerate(records)
    ]
    unit_numbers: list[int] = []
    if records:
        numbers = call_numbers(session=session)
        unit_numbers = [numbers[r.pk] for r in records]
        # A last unit of messages after the last call is numbered after every call.
        unit_numbers += [len(numbers) + 1] * (len(units) - len(records))
    return cf.counterfactual(
        turns=units,
        calls=calls,
        real=_real_compactions(session, units, call_times),
        window_tokens=session.context_window_tokens,
        threshold=threshold,
        strategies=sel.strategies(),
        unit="call" if records else "turn",
        call_numbers=unit_numbers,
    )


def _real_compactions(
    session: Session, units: list[cf.TurnPoint], call_times: list
) -> list[cf.RealCompaction]:
    """The transcript's compactions (``conversation.compacted`` events of the main branch)
    and the session's runs that took turns out (``_runs_applied``), each placed before the
    first unit that began after it, with the units it took out of the window."""

    def unit_at(moment) -> int:
        if call_times:
            return bisect.bisect_left(call_times, moment)
        return sum(1 for u in units if u.at is not None and u.at <= moment)

    real = []
    earlier = 0
    events = Event.objects.filter(session=session, type=cf.COMPACTED_EVENT).order_by("seq")
    for event in events:
        payload = event.payload
        if payload.get("branch", MAIN_BRANCH) != MAIN_BRANCH:
            continue
        before = unit_at(event.created_at)
        summary_text = (
            Turn.objects.filter(
                session=session, branch=MAIN_BRANCH, index=int(payload.get("before_turn") or 0)
            )
            .values_list("user_message", flat=True)
            .first()
        )
        summary = count_tokens(summary_text) if summary_text else None
        real.append(
            cf.RealCompaction(
                before_turn=before,
                pre_tokens=int(payload.get("pre_tokens") or 0),
                taken=frozenset(u.index for u in units if earlier <= u.index < before),
                at=event.created_at,
                origin="transcript",
                trigger=str(payload.get("trigger") or ""),
                id=str(event.seq),
                summary_tokens=summary,
                summary_turn=before if summary else None,
                conversation_turn=int(payload.get("before_turn") or 0),
            )
        )
        earlier = before
    for run in _runs_applied(session):
        taken_turns = Turn.objects.filter(compaction_run=run, branch=MAIN_BRANCH)
        truncated = dict(taken_turns.values_list("index", "truncated"))
        turns_taken = set(truncated)
        truncated_tokens = sum(taken_turns.filter(truncated=True).values_list("tokens", flat=True))
        before = unit_at(run.created_at)
        real.append(
            cf.RealCompaction(
                before_turn=before,
                # What the run itself measured: the history it found and left.
                pre_tokens=run.original_tokens or 0,
                post_tokens=run.final_tokens,
                basis=cf.HISTORY,
                taken=frozenset(u.index for u in units if u.turn in turns_taken),
                removed=frozenset(u.index for u in units if truncated.get(u.turn)),
                at=run.finished_at,
                origin="contextops",
                trigger=run.trigger,
                strategy=run.strategy,
                id=str(run.pk),
                summary_tokens=run.summary.tokens if run.summary else None,
                replaced_tokens=_summary_replaced(run, truncated_tokens),
                # The conversation turn of the first call after it (the one in progress
                # when it ran), as a transcript's compaction names the turn it came before.
                conversation_turn=(
                    units[before].turn
                    if before < len(units)
                    else (units[-1].turn + 1 if units else 0)
                ),
            )
        )
    return real


def _runs_applied(session: Session) -> QuerySet[CompactionRun]:
    """The session's runs that took turns out of its window, oldest first: completed,
    or failed after applying (its summary failed every attempt and the generic
    continuation message stands for the turns it took out). Not one that crashed: its
    changes rolled back, and it recorded only its error, no figures (``original_tokens``
    is None). Not a reverted run, nor one still queued or running."""
    applied = Q(status=CompactionRun.Status.COMPLETED) | Q(
        status=CompactionRun.Status.FAILED, original_tokens__isnull=False
    )
    return (
        CompactionRun.objects.filter(applied, session=session, finished_at__isnull=False)
        .select_related("summary")
        .order_by("created_at")
    )


def _summary_replaced(run: CompactionRun, truncated_tokens: int) -> int | None:
    """What ``run``'s summary stands for, as the run counted it: the history it found
    less what it kept (what it left, less the summary) and less the turns it truncated
    (``truncated_tokens``), that is the turns it summarized and the earlier summaries it
    folded in. None without a summary, or when the summary failed (the generic
    continuation message is no summary of them)."""
    summary, found, left = run.summary, run.original_tokens, run.final_tokens
    if summary is None or summary.failed or found is None or left is None:
        return None
    kept = left - summary.tokens
    return max(0, found - kept - truncated_tokens)
