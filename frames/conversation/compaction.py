"""Compaction runs: the threshold trigger, request and queue, claim, execute and apply,
retry with backoff, revert, and the sweep that sends stuck jobs again.

A run takes turns out of the window and never deletes one: summarized turns are marked
and linked to the new summary, truncated turns are marked, and a revert brings them back.
Which turns go is the pure rule in ``selection``; the summary comes from ``contextops.llm``.
"""

import json
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Concatenate, ParamSpec

from django.conf import settings
from django.contrib.auth.models import User
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import F, Q
from django.utils import timezone

from contextops import tracing
from contextops.audit import audit_person_act, session_target
from contextops.errors import Conflict, Invalid
from contextops.jobs import job_send, job_send_on_commit
from contextops.llm import Summarizer, SummaryOutcome, TurnText, summarizer_default
from contextops.models import AuditEntry
from contextops.notifications.services import notify, public_url
from contextops.tokens import count_tokens
from frames.events import event_append
from frames.locks import session_lock
from frames.models import Frame, Session
from frames.selectors import session_top_frame
from frames.services.handles import handle_add
from frames.services.pressure import pressure_update
from frames.strategies import (
    CONVERSATION,
    strategy_require,
)

from . import selection as sel
from . import selectors
from .models import MAIN_BRANCH, CompactionRun, Summary, Turn

P = ParamSpec("P")

logger = logging.getLogger(__name__)

# The actor of what the compaction job writes (events, the summary handle).
WORKER = "worker"


# -- the trigger --------------------------------------------------------------------------


def occupancy_over_threshold(session: Session, occupancy: int | None) -> bool:
    """True when a call's window occupancy passes the session's compaction threshold.

    Occupancy is the full input (uncached + cache writes + cache reads) plus output: the
    cache makes tokens cheaper, not smaller, so it never counts as free room.
    """
    if occupancy is None:
        return False
    return occupancy > session.compaction_threshold * session.context_window_tokens


def _has_turns_to_compact(session: Session) -> bool:
    """More turns in the window than the ones every strategy keeps; else a run would do nothing."""
    in_window = Turn.objects.filter(
        session=session, branch=MAIN_BRANCH, summarized=False, truncated=False
    )
    return in_window[: sel.ALWAYS_KEEP_RECENT + 1].count() > sel.ALWAYS_KEEP_RECENT


def compaction_due(*, session: Session, occupancy: int | None) -> bool:
    """True when a call's occupancy passes the threshold and a run would have turns to take."""
    return occupancy_over_threshold(session, occupancy) and _has_turns_to_compact(session)


def _run_event_append(
    session: Session,
    run: CompactionRun,
    type: str,
    actor: str,
    payload: dict[str, Any] | None = None,
    frame: Frame | None = None,
) -> None:
    """``event_append`` of an event about compaction ``run``: the run's id first in the
    payload, then ``payload``."""
    event_append(
        session=session,
        type=type,
        frame=frame,
        actor=actor,
        payload={"compaction_id": str(run.pk), **(payload or {})},
    )


# -- request and queue --------------------------------------------------------------------


def compaction_queue(
    *,
    session: Session,
    strategy: str,
    trigger: str,
    target_tokens: int | None = None,
    keep_turns: int | None = None,
    occupancy_tokens: int | None = None,
    actor: str = "",
    if_none_open: bool = False,
) -> CompactionRun | None:
    """Create a queued run and queue its job after commit; the caller holds the session lock.

    When a run of the session is open already: None with ``if_none_open``, else 409
    ``compaction_in_progress``.
    """
    # tasks imports this module: queue the job without a cycle
    from .tasks import compaction_run

    open_run = CompactionRun.objects.filter(
        session=session, status__in=CompactionRun.OPEN_STATUSES
    ).first()
    if open_run is not None:
        if if_none_open:
            return None
        raise Conflict(
            "compaction_in_progress",
            "A compaction of this session is already queued or running; wait for it to finish.",
            compaction_id=str(open_run.pk),
        )
    run = CompactionRun.objects.create(
        session=session,
        strategy=strategy,
        trigger=trigger,
        target_tokens=target_tokens,
        keep_turns=keep_turns,
        occupancy_tokens=occupancy_tokens,
    )
    _run_event_append(
        session,
        run,
        "compaction.queued",
        actor,
        {"strategy": strategy, "trigger": trigger, "occupancy_tokens": occupancy_tokens},
    )
    job_send_on_commit(compaction_run, str(run.pk))
    return run


def compaction_require_turns(session: Session) -> None:
    """Conflict ``nothing_to_compact`` when no turn of ``session`` is in its window: it has
    none yet, or earlier compactions took every one out. A run would change nothing."""
    if Turn.objects.filter(
        session=session, branch=MAIN_BRANCH, summarized=False, truncated=False
    ).exists():
        return
    if Turn.objects.filter(session=session, branch=MAIN_BRANCH).exists():
        detail = (
            "Every turn of this session is out of the window already: there is nothing to compact."
        )
    else:
        detail = "This session has no turns yet: there is nothing to compact."
    raise Conflict("nothing_to_compact", detail)


def compaction_request(
    *,
    session: Session,
    strategy: str = sel.ANCHOR_POINT,
    target_tokens: int | None = None,
    keep_turns: int | None = None,
    actor: str = "",
    user: User | None = None,
) -> CompactionRun:
    """Queue a compaction of ``session``; 409 ``session_ended`` once it has ended,
    ``nothing_to_compact`` with no turn in its window, ``compaction_in_progress`` while
    one is open. A person's request (``user``: the dashboard's "Compact now") is audited;
    an agent's, through the API, is in the session's events only."""
    strategy_require(strategy, CONVERSATION)
    if strategy == sel.TRUNCATE_AT and keep_turns is None:
        raise Invalid(
            "truncate_at needs keep_turns: how many recent turns stay.", field="keep_turns"
        )
    if target_tokens is not None and not 1 <= target_tokens <= sel.MAX_TARGET_TOKENS:
        raise Invalid(
            f"target_tokens must be from 1 to {sel.MAX_TARGET_TOKENS:,}.",
            field="target_tokens",
        )
    if keep_turns is not None and not 0 <= keep_turns <= sel.MAX_KEEP_TURNS:
        raise Invalid(f"keep_turns must be from 0 to {sel.MAX_KEEP_TURNS:,}.", field="keep_turns")
    with transaction.atomic():
        session = session_lock(session)
        compaction_require_turns(session)
        run = compaction_queue(
            session=session,
            strategy=strategy,
            trigger=CompactionRun.Trigger.MANUAL,
            target_tokens=target_tokens,
            keep_turns=keep_turns,
            actor=actor,
        )
        assert run is not None  # without if_none_open, an open run raises instead
        audit_person_act(
            user,
            action=AuditEntry.Action.COMPACTION_REQUESTED,
            organization_id=session.organization_id,
            target=session_target(session.pk),
            detail={
                "run_id": str(run.pk),
                "strategy": strategy,
                "keep_turns": keep_turns,
                "target_tokens": target_tokens,
            },
        )
        return run


def _listed(
    request: Callable[P, CompactionRun],
) -> Callable[Concatenate[int, P], list[CompactionRun]]:
    """``request`` (with its own arguments, which mypy checks), answering with the
    session's newest ``shown`` runs (the new one first, their summaries loaded), read
    before the commit: the dashboard's list. ``shown`` comes first."""

    def listed(shown: int, /, *args: P.args, **kwargs: P.kwargs) -> list[CompactionRun]:
        with transaction.atomic():
            run = request(*args, **kwargs)
            return list(selectors.compactions_list(session=run.session)[:shown])

    return listed


compaction_request_listed = _listed(compaction_request)


# -- claim, execute, apply ----------------------------------------------------------------


class CompactionRetry(Exception):
    """The summary provider failed every attempt and the run went back to the queue.

    The job that raised it sends itself again after ``countdown`` seconds.
    """

    def __init__(self, *, run_id: Any, retry: int, countdown: float, error: str) -> None:
        super().__init__(f"compaction {run_id}: retry {retry} in {countdown:g} s after {error}")
        self.run_id = run_id
        self.retry = retry
        self.countdown = countdown
        self.error = error


def compaction_retry_countdown(retries: int) -> float:
    """Seconds before retry number ``retries + 1``: the base doubled for each earlier retry."""
    base = float(getattr(settings, "CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN", 30))
    return base * 2**retries


def compaction_claim(*, run_id: Any) -> bool:
    """Take a queued run (or a running one whose worker vanished); False when someone else has it.

    A conditional UPDATE, so of two deliveries of one job only one proceeds.
    """
    stale = timezone.now() - timedelta(
        seconds=getattr(settings, "CONTEXTOPS_COMPACTION_STALE_SECONDS", 900)
    )
    claimable = Q(status=CompactionRun.Status.QUEUED) | Q(
        status=CompactionRun.Status.RUNNING, started_at__lt=stale
    )
    return (
        CompactionRun.objects.filter(claimable, pk=run_id).update(
            status=CompactionRun.Status.RUNNING, started_at=timezone.now()
        )
        == 1
    )


def compaction_execute(
    *, run_id: Any, summarizer: Summarizer | None = None, retry_provider_errors: bool = False
) -> CompactionRun | None:
    """Run a queued compaction; None when it is not there or not claimable (a repeated delivery).

    Never deletes a turn: summarized turns are marked and linked to the new summary,
    which also goes into the session's top frame as a ``summary`` handle.

    With ``retry_provider_errors`` (the job), a summary provider that fails every attempt
    puts the run back in the queue with nothing written and raises ``CompactionRetry``,
    until the run has had ``CONTEXTOPS_COMPACTION_MAX_RETRIES`` retries; then, or
    without the flag, the generic continuation message is recorded as a failure.
    """
    if not compaction_claim(run_id=run_id):
        return None
    run = CompactionRun.objects.select_related("session").get(pk=run_id)
    compacting = {
        "gen_ai.operation.name": "update_memory",
        "gen_ai.conversation.id": str(run.session_id),
        "contextops.compaction.id": str(run.pk),
        "contextops.compaction.strategy": run.strategy,
    }
    with tracing.span("compaction", compacting) as current:
        done = _compaction_guarded(run, summarizer, retry_provider_errors)
        if done is not None:
            tracing.span_set(
                current,
                {
                    "contextops.compaction.status": done.status,
                    "contextops.compaction.level": done.level,
                    "contextops.compaction.original_tokens": done.original_tokens,
                    "contextops.compaction.final_tokens": done.final_tokens,
                    "contextops.compaction.items_summarized": done.items_summarized,
                },
            )
    return done


def _compaction_guarded(
    run: CompactionRun, summarizer: Summarizer | None, retry_provider_errors: bool
) -> CompactionRun | None:
    """``_compaction_apply``, a failure recorded on the run (and announced)."""
    run_id = run.pk
    try:
        return _compaction_apply(run, summarizer, retry_provider_errors)
    except (CompactionRetry, OperationalError, InterfaceError):
        # The database went away mid-run: nothing of the run committed, and it cannot be
        # recorded as failed; it stays claimed until stale, then the sweep sends it again.
        raise
    except Exception as exc:  # the run must not stay "running" forever
        logger.exception("compaction %s failed", run_id)
        CompactionRun.objects.filter(pk=run_id, status=CompactionRun.Status.RUNNING).update(
            status=CompactionRun.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now(),
        )
        run.refresh_from_db()
        compaction_failed_notify(run)
        return run


def _select(run: CompactionRun, turns: list[Turn]) -> sel.Selection:
    if run.strategy not in sel.STRATEGIES:
        try:
            return sel.select_registered(
                run.strategy,
                [
                    sel.TurnFacts(t.tokens, anchor=bool(t.anchor_type), error=t.has_error)
                    for t in turns
                ],
                target_tokens=run.target_tokens,
                keep_turns=run.keep_turns,
                ids=[str(t.index) for t in turns],
            )
        except ValueError:
            raise LookupError(f"the strategy {run.strategy!r} is no longer registered") from None
    if run.strategy == sel.PRIORITY_BASED:
        return sel.select_priority_based(
            [sel.TurnFacts(t.tokens, anchor=bool(t.anchor_type), error=t.has_error) for t in turns],
            target_tokens=run.target_tokens,
            keep_recent=sel.ALWAYS_KEEP_RECENT if run.keep_turns is None else run.keep_turns,
        )
    if run.strategy == sel.SUMMARIZE_OLDEST:
        return sel.select_summarize_oldest(
            [t.tokens for t in turns], keep_recent=run.keep_turns, target_tokens=run.target_tokens
        )
    if run.strategy == sel.TRUNCATE_AT:
        return sel.select_truncate_at(len(turns), run.keep_turns or 0)
    anchors = [i for i, t in enumerate(turns) if t.anchor_type]
    return sel.select_anchor_point(
        len(turns), anchors, keep_recent=run.keep_turns or sel.ALWAYS_KEEP_RECENT
    )


def _turn_text(turn: Turn) -> TurnText:
    return TurnText(
        index=turn.index,
        user_message=turn.user_message,
        assistant_response=turn.assistant_response,
        tool_calls=[
            {"name": c.get("name", ""), "input": c.get("input", {})} for c in turn.tool_calls
        ],
        tool_results=[
            {"output": r.get("output", ""), "is_error": r.get("is_error", False)}
            for r in turn.tool_results
        ],
        anchor=turn.anchor_type,
    )


def _summary_texts(to_summarize: Sequence[Turn], previous: Sequence[Summary]) -> list[TurnText]:
    """What the summarizer reads: the earlier summaries first, then the turns to summarize."""
    texts = [_turn_text(t) for t in to_summarize]
    if previous:
        earlier = "\n\n".join(s.content for s in previous)
        texts.insert(
            0,
            TurnText(
                index=to_summarize[0].index,
                user_message=f"Summary of the earlier conversation: {earlier}",
            ),
        )
    return texts


def _compaction_retry_later(run: CompactionRun, outcome: SummaryOutcome) -> CompactionRetry | None:
    """Hand a run whose summary failed back to the queue; None when someone else holds it.

    The run counts its own retries, so a job sent again by the sweep or redelivered by
    the broker does not start a fresh count.
    """
    countdown = compaction_retry_countdown(run.retries)
    with transaction.atomic():
        session = session_lock(run.session_id, open_only=False)
        handed_back = CompactionRun.objects.filter(
            pk=run.pk, status=CompactionRun.Status.RUNNING, retries=run.retries
        ).update(
            status=CompactionRun.Status.QUEUED,
            started_at=None,
            retries=F("retries") + 1,
            retry_at=timezone.now() + timedelta(seconds=countdown),
            summarizer=outcome.provider,
            attempts=outcome.attempts,
            error=outcome.error,
        )
        if handed_back != 1:
            return None
        _run_event_append(
            session,
            run,
            "compaction.retrying",
            WORKER,
            {
                "retry": run.retries + 1,
                "countdown_seconds": countdown,
                "error": outcome.error[:500],
            },
        )
    return CompactionRetry(
        run_id=run.pk, retry=run.retries + 1, countdown=countdown, error=outcome.error
    )


def _compaction_apply(
    run: CompactionRun, summarizer: Summarizer | None, retry_provider_errors: bool = False
) -> CompactionRun:
    session = run.session
    turns = list(
        Turn.objects.filter(
            session=session, branch=MAIN_BRANCH, summarized=False, truncated=False
        ).order_by("index")
    )
    previous = list(
        Summary.objects.filter(session=session, turns__summarized=True)
        .distinct()
        .order_by("created_at")
    )
    previous_tokens = sum(s.tokens for s in previous)
    original = sum(t.tokens for t in turns) + previous_tokens
    chosen = _select(run, turns)
    to_summarize = [turns[i] for i in chosen.summarize]
    to_remove = [turns[i] for i in chosen.remove]
    kept_tokens = sum(turns[i].tokens for i in chosen.keep)
    outcome = None
    if to_summarize:
        outcome = (summarizer or summarizer_default()).summarize(
            _summary_texts(to_summarize, previous)
        )
    max_retries = getattr(settings, "CONTEXTOPS_COMPACTION_MAX_RETRIES", 3)
    if (
        retry_provider_errors
        and outcome is not None
        and outcome.failed
        and run.retries < max_retries
    ):
        retry = _compaction_retry_later(run, outcome)
        if retry is None:  # the run is no longer ours to hand back
            run.refresh_from_db()
            return run
        raise retry
    with transaction.atomic():
        session = session_lock(session, open_only=False)
        run = CompactionRun.objects.select_for_update(no_key=True).get(pk=run.pk)
        if run.status != CompactionRun.Status.RUNNING:
            return run
        frame = _compacted_frame(session=session, turns=turns)
        summary = None
        if outcome is not None:
            summary = Summary.objects.create(
                session=session,
                content=outcome.text,
                tokens=count_tokens(outcome.text),
                provider=outcome.provider,
                model=outcome.model,
                failed=outcome.failed,
                first_turn_index=to_summarize[0].index,
                last_turn_index=to_summarize[-1].index,
            )
            Turn.objects.filter(pk__in=[t.pk for t in to_summarize], summarized=False).update(
                summarized=True, summary=summary, compaction_run=run, updated_at=timezone.now()
            )
            # The earlier summaries now live inside the new one.
            Turn.objects.filter(session=session, summary__in=previous).update(summary=summary)
            _summary_handle(frame=frame, summary=summary)
        if to_remove:
            Turn.objects.filter(pk__in=[t.pk for t in to_remove], truncated=False).update(
                truncated=True, compaction_run=run, updated_at=timezone.now()
            )
        final = kept_tokens + (summary.tokens if summary else previous_tokens)
        ratio = sel.compression_ratio(original, final)
        warning = sel.quality_warning(
            ratio,
            final_tokens=final,
            large_tokens=sel.large_window_tokens(
                context_window_tokens=session.context_window_tokens,
                threshold=session.compaction_threshold,
            ),
        )
        failed = bool(outcome and outcome.failed)
        if summary is not None and not failed:
            covered = sel.summary_quality_warning(summary.content, _worked_on(to_summarize))
            warning = " ".join(w for w in (warning, covered) if w)
        if failed:
            warning = "Summary generation failed after every attempt; the generic continuation message stands in for the summarized turns."
        run.status = CompactionRun.Status.FAILED if failed else CompactionRun.Status.COMPLETED
        run.level = sel.compaction_level(original, final)
        run.original_tokens = original
        run.final_tokens = final
        run.items_summarized = len(to_summarize)
        run.items_removed = len(to_remove)
        run.compression_ratio = round(ratio, 4)
        run.warning = warning[:300]
        run.preserved_anchor_index = (
            turns[chosen.preserved_anchor].index if chosen.preserved_anchor is not None else None
        )
        run.summary = summary
        run.summarizer = outcome.provider if outcome else ""
        run.attempts = outcome.attempts if outcome else 0
        run.error = outcome.error if outcome is not None and failed else ""
        run.retry_at = None
        run.finished_at = timezone.now()
        run.save()
        if failed:
            compaction_failed_notify(run)
        if final < original:
            _window_tracker_reset(session=session, frame=frame, taken=original - final)
        if frame is not None and (to_summarize or to_remove):
            _run_event_append(
                session,
                run,
                "frame.compacted",
                WORKER,
                {
                    "strategy": run.strategy,
                    "compaction_level": run.level,
                    "original_tokens": original,
                    "final_tokens": final,
                    "items_removed": run.items_removed,
                    "items_summarized": run.items_summarized,
                    "summary_id": str(summary.pk) if summary else None,
                    "handle_id": str(summary.handle_id) if summary and summary.handle_id else None,
                },
                frame=frame,
            )
        _run_event_append(
            session,
            run,
            "compaction.completed" if not failed else "compaction.failed",
            WORKER,
            {
                "strategy": run.strategy,
                "original_tokens": original,
                "final_tokens": final,
                "items_summarized": run.items_summarized,
                "items_removed": run.items_removed,
                "summary_id": str(summary.pk) if summary else None,
            },
        )
    return run


def _worked_on(turns: Sequence[Turn]) -> list[str]:
    """The files the turns worked on: named in their prompts or their tool calls' inputs."""
    texts = [t.user_message for t in turns]
    texts += [json.dumps(c.get("input", {})) for t in turns for c in t.tool_calls]
    return sel.salient_files(texts)


def _window_tracker_reset(*, session: Session, frame: Frame | None, taken: int) -> None:
    """codelet's "prompt cache cleared" (docs/compaction.md), as the server keeps it: the window the
    last call measured (its cached prefix included) no longer exists, so the compacted
    frame's occupancy drops by what the compaction took out and the pressure gauge follows
    now, not at the next model call. The next call's usage measures the window again."""
    if frame is None or frame.last_occupancy_tokens <= 0:
        return
    after = max(0, frame.last_occupancy_tokens - taken)
    Frame.objects.filter(pk=frame.pk).update(last_occupancy_tokens=after)
    frame.last_occupancy_tokens = after
    pressure_update(session=session, frame=frame)


def _compacted_frame(*, session: Session, turns: list[Turn]) -> Frame | None:
    """The frame whose context a compaction changes: the session's top open frame, where
    the summary handle goes; when none is open, the frame of the newest turn in the window."""
    frame = session_top_frame(session)
    if frame is None and turns and turns[-1].frame_id is not None:
        frame = Frame.objects.filter(pk=turns[-1].frame_id).first()
    return frame


def _summary_handle(*, frame: Frame | None, summary: Summary) -> None:
    """Put the summary in ``frame`` as a ``summary`` handle, when the frame is still open."""
    if frame is None or frame.status not in Frame.OPEN_STATUSES:
        return
    handle = handle_add(
        frame=frame,
        kind="summary",
        priority="high",
        content=summary.content,
        category="conversation",
        actor=WORKER,
    )
    Summary.objects.filter(pk=summary.pk).update(handle_id=handle.pk)
    summary.handle_id = handle.pk


# -- revert and the sweep -----------------------------------------------------------------


def compaction_revert(*, run: CompactionRun, actor: str = "") -> CompactionRun:
    """Bring the turns a completed run took out of the window back in; 409 for other runs.

    The summary and its handle stay stored (nothing is deleted); the turns simply stop
    pointing at it. Returns the run with its summary, read before the commit.
    """
    with transaction.atomic():
        session = session_lock(run.session_id, open_only=False)
        run = CompactionRun.objects.select_for_update(no_key=True).get(pk=run.pk)
        if (
            run.status not in (CompactionRun.Status.COMPLETED, CompactionRun.Status.FAILED)
            or run.finished_at is None
        ):
            raise Conflict(
                "compaction_not_revertible",
                "Only a finished compaction can be reverted.",
                status=run.status,
            )
        later = CompactionRun.objects.filter(
            session=session, created_at__gt=run.created_at
        ).exclude(status=CompactionRun.Status.REVERTED)
        if later.exists():
            raise Conflict(
                "compaction_not_revertible", "Revert the later compactions of this session first."
            )
        Turn.objects.filter(compaction_run=run).update(
            summarized=False,
            truncated=False,
            summary=None,
            compaction_run=None,
            updated_at=timezone.now(),
        )
        if run.summary_id is not None:
            # Turns of earlier runs were folded into this run's summary: give them theirs back.
            for earlier in CompactionRun.objects.filter(
                session=session, summary__isnull=False
            ).exclude(pk=run.pk):
                Turn.objects.filter(compaction_run=earlier, summary_id=run.summary_id).update(
                    summary=earlier.summary_id
                )
        run.status = CompactionRun.Status.REVERTED
        run.save(update_fields=["status"])
        _run_event_append(session, run, "compaction.reverted", actor)
        return CompactionRun.objects.select_related("summary").get(pk=run.pk)


def compactions_requeue(*, older_than_seconds: int = 30) -> int:
    """Send again the jobs of runs still queued after ``older_than_seconds``, and of runs
    claimed longer ago than ``CONTEXTOPS_COMPACTION_STALE_SECONDS``; return how many.

    A run stays queued when the broker was down as it was created; a job sent twice is
    harmless, because only one delivery can claim the run.
    """
    # tasks imports this module: send the job without a cycle
    from .tasks import compaction_run

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    # A run waiting for a retry has its own job due at retry_at; send it only if that is overdue.
    stuck = Q(retry_at__isnull=True, created_at__lt=cutoff) | Q(retry_at__lt=cutoff)
    # A run claimed by a worker that died, or whose job ended when the database went away,
    # is claimable again once stale (compaction_claim): its job may be gone, send one.
    stale = timezone.now() - timedelta(
        seconds=getattr(settings, "CONTEXTOPS_COMPACTION_STALE_SECONDS", 900)
    )
    abandoned = Q(status=CompactionRun.Status.RUNNING, started_at__lt=stale)
    sent = 0
    for run_id in CompactionRun.objects.filter(
        (stuck & Q(status=CompactionRun.Status.QUEUED)) | abandoned
    ).values_list("pk", flat=True)[:500]:
        sent += job_send(compaction_run, str(run_id))
    return sent


def compaction_failed_notify(run: CompactionRun) -> None:
    """``compaction.failed`` to the organization's destinations that want it."""
    notify(
        organization=run.session.organization_id,
        event="compaction.failed",
        key=str(run.pk),
        data={
            "compaction": {
                "id": str(run.pk),
                "strategy": run.strategy,
                "error": run.error,
                "warning": run.warning,
            },
            "session": {"id": str(run.session_id), "title": run.session.title},
            "detail": f"Compaction {run.pk} of {run.session.title or run.session_id} failed.",
            "link": public_url(f"/sessions/{run.session_id}/"),
        },
    )
