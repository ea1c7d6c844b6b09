"""Writes of the conversation: messages into turns, usage and the trigger, compaction runs.

Turns (seed 002 §5.B): a user message with text starts a turn; the assistant's text,
thinking and tool calls join the current turn; a tool result joins the turn that holds
its ``tool_use`` id, even when it arrives in a later request. ``previous_error`` is true
when the turn before had a failed tool result. Anchors are recomputed for every turn a
request touched and for the turn after it.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from contextops.errors import Conflict, Invalid, NotFound
from contextops.jobs import job_send, job_send_on_commit
from contextops.tokens import count_tokens
from frames.events import event_append
from frames.models import Event, Frame, Session, Usage
from frames.services import frame_require_open, session_require_not_ended

from . import selection as sel
from .anchors import AnchorPatterns, ToolCall, ToolResult, TurnView, detect_anchor
from .grouping import ROLES, block_text, blocks_of, result_text
from .models import MAIN_BRANCH, CompactionRun, Message, Summary, ToolUse, Turn

logger = logging.getLogger(__name__)

MAX_MESSAGES_PER_REQUEST = 500


@dataclass
class UsageFigures:
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    model: str = ""
    message_id: str = ""

    @property
    def occupancy_tokens(self) -> int:
        """Everything the call put in the window: full input (cached or not) plus output."""
        return (
            self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
        )

    @property
    def seed_effective_tokens(self) -> float:
        """Seed 002's ``calculateEffectiveTokens``: input minus 90 % of the cache reads.

        A cost figure (cache reads are billed at a tenth); shown for comparison, never
        used for the trigger, since it can even go negative while the window is full.
        """
        return self.input_tokens - 0.9 * self.cache_read_input_tokens


@dataclass
class AppendResult:
    turns: list[Turn]
    messages: int
    occupancy_tokens: int | None = None
    compaction: CompactionRun | None = None


@dataclass
class _Ingest:
    """The state of one ingest pass over a session's branch."""

    session: Session
    branch: str
    frame: Frame | None
    patterns: AnchorPatterns
    current: Turn | None = None
    next_index: int = 0
    next_seq: int = 0
    touched: dict[int, Turn] = field(default_factory=dict)
    tool_turns: dict[str, Turn] = field(default_factory=dict)  # tool_use id -> turn, this pass
    created: list[Turn] = field(default_factory=list)
    messages: int = 0


def _ingest_start(session: Session, branch: str, frame: Frame | None) -> _Ingest:
    state = _Ingest(
        session=session, branch=branch, frame=frame, patterns=AnchorPatterns.from_settings()
    )
    state.current = Turn.objects.filter(session=session, branch=branch).order_by("-index").first()
    state.next_index = state.current.index + 1 if state.current else 0
    last_seq = Message.objects.filter(session=session).aggregate(m=Max("seq"))["m"]
    state.next_seq = (last_seq or 0) + 1
    return state


def _new_turn(state: _Ingest, user_message: str = "") -> Turn:
    now = timezone.now()
    turn = Turn.objects.create(
        session=state.session,
        frame=state.frame,
        branch=state.branch,
        index=state.next_index,
        user_message=user_message,
        created_at=now,
        updated_at=now,
    )
    state.next_index += 1
    state.current = turn
    state.touched[turn.pk] = turn
    state.created.append(turn)
    return turn


def _turn_for_tool_use(state: _Ingest, tool_use_id: str) -> Turn | None:
    """The turn holding ``tool_use_id`` in this branch: seen in this pass, else stored."""
    turn = state.tool_turns.get(tool_use_id)
    if turn is not None:
        return turn
    link = (
        ToolUse.objects.filter(session=state.session, tool_use_id=tool_use_id)
        .select_related("turn")
        .first()
    )
    if link is None or link.turn.branch != state.branch:
        return None
    return state.touched.setdefault(link.turn.pk, link.turn)


def _touch(state: _Ingest, turn: Turn) -> Turn:
    return state.touched.setdefault(turn.pk, turn)


def _ingest_message(state: _Ingest, role: str, content: Any, loc: list) -> None:
    """Group one message into the branch's turns; checks everything before writing anything."""
    if role not in ROLES:
        raise Invalid("role must be user or assistant.", loc=[*loc, "role"])
    blocks = blocks_of(content, [*loc, "content"])
    tokens = [count_tokens(block_text(b)) for b in blocks]
    owner: Turn | None = None
    if role == "user":
        results = [
            (b, t) for b, t in zip(blocks, tokens, strict=True) if b["type"] == "tool_result"
        ]
        others = [(b, t) for b, t in zip(blocks, tokens, strict=True) if b["type"] != "tool_result"]
        for block, count in results:
            turn = (
                _turn_for_tool_use(state, block["tool_use_id"]) or state.current or _new_turn(state)
            )
            turn = _touch(state, turn)
            turn.tool_results = [
                *turn.tool_results,
                {
                    "tool_use_id": block["tool_use_id"],
                    "output": result_text(block.get("content", "")),
                    "is_error": bool(block.get("is_error", False)),
                },
            ]
            turn.tokens += count
            owner = owner or turn
        text = "\n".join(b["text"] for b, _ in others if b["type"] == "text" and b["text"].strip())
        if text or (others and not results):
            turn = _new_turn(state, user_message=text)
            turn.tokens += sum(t for _, t in others)
            owner = turn
    else:
        turn = _touch(state, state.current) if state.current else _new_turn(state)
        for block, count in zip(blocks, tokens, strict=True):
            kind = block["type"]
            if kind == "text" and block["text"]:
                turn.assistant_response = (
                    f"{turn.assistant_response}\n{block['text']}"
                    if turn.assistant_response
                    else block["text"]
                )
            elif kind == "thinking":
                turn.thinking = (
                    f"{turn.thinking}\n{block['thinking']}" if turn.thinking else block["thinking"]
                )
            elif kind == "tool_use":
                turn.tool_calls = [
                    *turn.tool_calls,
                    {"id": block["id"], "name": block["name"], "input": block.get("input", {})},
                ]
                state.tool_turns[block["id"]] = turn
                ToolUse.objects.get_or_create(
                    session=state.session, tool_use_id=block["id"], defaults={"turn": turn}
                )
            turn.tokens += count
        owner = turn
    if owner is None:  # an empty user message: nothing to group
        owner = state.current or _new_turn(state)
    Message.objects.create(
        session=state.session,
        turn=owner,
        seq=state.next_seq,
        role=role,
        content=blocks,
        tokens=sum(tokens),
    )
    state.next_seq += 1
    state.messages += 1


def _turn_view(turn: Turn) -> TurnView:
    return TurnView(
        tool_calls=[
            ToolCall(c.get("id", ""), c.get("name", ""), c.get("input") or {})
            for c in turn.tool_calls
        ],
        tool_results=[
            ToolResult(r.get("tool_use_id", ""), r.get("output", ""), bool(r.get("is_error")))
            for r in turn.tool_results
        ],
        previous_error=turn.previous_error,
    )


def _ingest_finish(state: _Ingest) -> list[Turn]:
    """Recompute error flags and anchors of the touched turns and their successors; save them."""
    touched = sorted(state.touched.values(), key=lambda t: t.index)
    if not touched:
        return []
    wanted = (
        {t.index for t in touched} | {t.index - 1 for t in touched} | {t.index + 1 for t in touched}
    )
    known = {t.index: t for t in touched}
    missing = [i for i in wanted if i >= 0 and i not in known]
    for turn in Turn.objects.filter(session=state.session, branch=state.branch, index__in=missing):
        known[turn.index] = turn
    changed = []
    for index in sorted(known):
        turn = known[index]
        before = (turn.has_error, turn.previous_error, turn.anchor_type)
        turn.has_error = any(r.get("is_error") for r in turn.tool_results)
        previous = known.get(index - 1)
        if previous is not None:
            turn.previous_error = previous.has_error
        anchor = detect_anchor(_turn_view(turn), state.patterns)
        turn.anchor_type = anchor.type if anchor else ""
        turn.anchor_weight = anchor.weight if anchor else None
        turn.anchor_confidence = anchor.confidence if anchor else None
        turn.anchor_description = anchor.description[:500] if anchor else ""
        if turn.pk in state.touched or before != (
            turn.has_error,
            turn.previous_error,
            turn.anchor_type,
        ):
            changed.append(turn)
    now = timezone.now()
    for turn in changed:
        turn.updated_at = now
    Turn.objects.bulk_update(
        changed,
        [
            "user_message",
            "tool_calls",
            "tool_results",
            "assistant_response",
            "thinking",
            "tokens",
            "previous_error",
            "has_error",
            "anchor_type",
            "anchor_weight",
            "anchor_confidence",
            "anchor_description",
            "occupancy_tokens",
            "updated_at",
        ],
        batch_size=500,
    )
    return sorted(changed, key=lambda t: t.index)


def _usage_check(usage: dict | UsageFigures | None) -> UsageFigures | None:
    if usage is None:
        return None
    if isinstance(usage, UsageFigures):
        return usage
    return UsageFigures(**usage)


def _frame_of_call(session: Session, frame_id: Any) -> Frame:
    frame = Frame.objects.filter(pk=frame_id, session=session).first()
    if frame is None:
        raise NotFound("No such frame in this session.")
    frame_require_open(frame, action="record a call on")
    return frame


def messages_append(
    *,
    session: Session,
    messages: Sequence[dict],
    usage: dict | UsageFigures | None = None,
    frame_id: Any = None,
    actor: str = "",
) -> AppendResult:
    """Group ``messages`` into the session's turns and record the call's ``usage``.

    The call belongs to, and is charged to, frame ``frame_id`` (an active or waiting
    frame of the session: NotFound otherwise, 409 ``frame_not_active``) or else the top
    of the session's stack.

    Returns the turns created or extended, oldest first. When the call's window
    occupancy passes ``compaction_threshold`` of the window, no compaction is open and
    more than the always-kept turns are in the window, a run is created and its job
    queued once the transaction commits.

    Idempotent by the usage's ``message_id``: the same call appended again (a retry after
    a lost answer) appends nothing, charges nothing and answers as the first time did.
    """
    if not messages:
        raise Invalid("Send at least one message.", field="messages")
    if len(messages) > MAX_MESSAGES_PER_REQUEST:
        raise Invalid(f"At most {MAX_MESSAGES_PER_REQUEST} messages per request.", field="messages")
    figures = _usage_check(usage)
    from frames.selectors import session_top_frame

    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session.pk)
        if figures is not None and figures.message_id:
            replayed = _append_replayed(session, figures.message_id)
            if replayed is not None:
                return replayed
        session_require_not_ended(session)
        frame = _frame_of_call(session, frame_id) if frame_id else session_top_frame(session)
        state = _ingest_start(session, MAIN_BRANCH, frame)
        for i, message in enumerate(messages):
            _ingest_message(state, message["role"], message["content"], ["body", "messages", i])
        occupancy = None
        if figures is not None:
            usage_record_for(session=session, frame=frame, usage=figures, actor=actor)
            occupancy = figures.occupancy_tokens
            if state.current is not None:
                _touch(state, state.current).occupancy_tokens = occupancy
        turns = _ingest_finish(state)
        event_append(
            session=session,
            type="conversation.messages_appended",
            frame=frame,
            actor=actor,
            payload={
                "messages": state.messages,
                "turns": [t.index for t in turns],
                "occupancy_tokens": occupancy,
                "message_id": figures.message_id if figures is not None else "",
            },
        )
        run = None
        if occupancy_over_threshold(session, occupancy) and _has_turns_to_compact(session):
            run = _compaction_queue(
                session=session,
                strategy=sel.ANCHOR_POINT,
                trigger=CompactionRun.Trigger.THRESHOLD,
                occupancy_tokens=occupancy,
                actor=actor,
                if_none_open=True,
            )
    return AppendResult(
        turns=turns, messages=state.messages, occupancy_tokens=occupancy, compaction=run
    )


def _append_replayed(session: Session, message_id: str) -> AppendResult | None:
    """The answer of the append already made for model call ``message_id``, or None.

    None too when the call was recorded through the usage endpoint alone: its messages
    were never appended, and the usage record will not charge it twice.
    """
    if not Usage.objects.filter(session=session, message_id=message_id).exists():
        return None
    appended = (
        Event.objects.filter(
            session=session,
            type="conversation.messages_appended",
            payload__message_id=message_id,
        )
        .order_by("seq")
        .first()
    )
    if appended is None:
        return None
    # A compaction the call triggered was queued right after it, under the same lock.
    queued = Event.objects.filter(
        session=session, seq=appended.seq + 1, type="compaction.queued"
    ).first()
    run_id = queued.payload.get("compaction_id") if queued is not None else None
    return AppendResult(
        turns=list(
            Turn.objects.filter(
                session=session, branch=MAIN_BRANCH, index__in=appended.payload["turns"]
            ).order_by("index")
        ),
        messages=appended.payload["messages"],
        occupancy_tokens=appended.payload["occupancy_tokens"],
        compaction=CompactionRun.objects.filter(pk=run_id).first() if run_id else None,
    )


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


def usage_record_for(
    *, session: Session, frame: Frame | None, usage: UsageFigures, actor: str = ""
):
    """Store one model call's four usage fields through the frames service."""
    from frames.services import usage_record

    return usage_record(
        session=session,
        frame=frame,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_creation_input_tokens=usage.cache_creation_input_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens,
        model=usage.model,
        message_id=usage.message_id,
        actor=actor,
    )


# -- compaction ---------------------------------------------------------------------------


def _compaction_queue(
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
    """Create a queued run and queue its job after commit; the caller holds the session lock."""
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
    event_append(
        session=session,
        type="compaction.queued",
        actor=actor,
        payload={
            "compaction_id": str(run.pk),
            "strategy": strategy,
            "trigger": trigger,
            "occupancy_tokens": occupancy_tokens,
        },
    )
    job_send_on_commit(compaction_run, str(run.pk))
    return run


def compaction_request(
    *,
    session: Session,
    strategy: str = sel.ANCHOR_POINT,
    target_tokens: int | None = None,
    keep_turns: int | None = None,
    actor: str = "",
) -> CompactionRun:
    """Queue a compaction of ``session``; 409 ``compaction_in_progress`` while one is open."""
    if strategy not in sel.STRATEGIES:
        raise Invalid(f"strategy must be one of {', '.join(sel.STRATEGIES)}.", field="strategy")
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
        session = Session.objects.select_for_update().get(pk=session.pk)
        session_require_not_ended(session)
        return _compaction_queue(
            session=session,
            strategy=strategy,
            trigger=CompactionRun.Trigger.MANUAL,
            target_tokens=target_tokens,
            keep_turns=keep_turns,
            actor=actor,
        )


def _select(run: CompactionRun, turns: list[Turn]) -> sel.Selection:
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


def _turn_text(turn: Turn):
    from contextops.llm import TurnText

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


class CompactionRetry(Exception):
    """The summary provider failed every attempt and the run went back to the queue.

    The job that raised it sends itself again after ``countdown`` seconds.
    """

    def __init__(self, *, run_id, retry: int, countdown: float, error: str) -> None:
        super().__init__(f"compaction {run_id}: retry {retry} in {countdown:g} s after {error}")
        self.run_id = run_id
        self.retry = retry
        self.countdown = countdown
        self.error = error


def compaction_retry_countdown(retries: int) -> float:
    """Seconds before retry number ``retries + 1``: the base doubled for each earlier retry."""
    base = float(getattr(settings, "CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN", 30))
    return base * 2**retries


def compaction_claim(*, run_id) -> bool:
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
    *, run_id, summarizer=None, retry_provider_errors: bool = False
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
    try:
        return _compaction_apply(run, summarizer, retry_provider_errors)
    except CompactionRetry:
        raise
    except Exception as exc:  # the run must not stay "running" forever
        logger.exception("compaction %s failed", run_id)
        CompactionRun.objects.filter(pk=run_id, status=CompactionRun.Status.RUNNING).update(
            status=CompactionRun.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now(),
        )
        run.refresh_from_db()
        return run


def _compaction_retry_later(run: CompactionRun, outcome) -> CompactionRetry | None:
    """Hand a run whose summary failed back to the queue; None when someone else holds it.

    The run counts its own retries, so a job sent again by the sweep or redelivered by
    the broker does not start a fresh count.
    """
    countdown = compaction_retry_countdown(run.retries)
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=run.session_id)
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
        event_append(
            session=session,
            type="compaction.retrying",
            actor="worker",
            payload={
                "compaction_id": str(run.pk),
                "retry": run.retries + 1,
                "countdown_seconds": countdown,
                "error": outcome.error[:500],
            },
        )
    return CompactionRetry(
        run_id=run.pk, retry=run.retries + 1, countdown=countdown, error=outcome.error
    )


def _compaction_apply(
    run: CompactionRun, summarizer, retry_provider_errors: bool = False
) -> CompactionRun:
    from contextops.llm import summarizer_default

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
        texts = [_turn_text(t) for t in to_summarize]
        if previous:
            from contextops.llm import TurnText

            earlier = "\n\n".join(s.content for s in previous)
            texts.insert(
                0,
                TurnText(
                    index=to_summarize[0].index,
                    user_message=f"Summary of the earlier conversation: {earlier}",
                ),
            )
        outcome = (summarizer or summarizer_default()).summarize(texts)
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
        session = Session.objects.select_for_update().get(pk=session.pk)
        run = CompactionRun.objects.select_for_update().get(pk=run.pk)
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
        warning = sel.quality_warning(ratio)
        failed = bool(outcome and outcome.failed)
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
        run.error = outcome.error if failed else ""
        run.retry_at = None
        run.finished_at = timezone.now()
        run.save()
        if frame is not None and (to_summarize or to_remove):
            event_append(
                session=session,
                type="frame.compacted",
                frame=frame,
                actor="worker",
                payload={
                    "compaction_id": str(run.pk),
                    "strategy": run.strategy,
                    "compaction_level": run.level,
                    "original_tokens": original,
                    "final_tokens": final,
                    "items_removed": run.items_removed,
                    "items_summarized": run.items_summarized,
                    "summary_id": str(summary.pk) if summary else None,
                    "handle_id": str(summary.handle_id) if summary and summary.handle_id else None,
                },
            )
        event_append(
            session=session,
            type="compaction.completed" if not failed else "compaction.failed",
            actor="worker",
            payload={
                "compaction_id": str(run.pk),
                "strategy": run.strategy,
                "original_tokens": original,
                "final_tokens": final,
                "items_summarized": run.items_summarized,
                "items_removed": run.items_removed,
                "summary_id": str(summary.pk) if summary else None,
            },
        )
    return run


def _compacted_frame(*, session: Session, turns: list[Turn]) -> Frame | None:
    """The frame whose context a compaction changes: the session's top open frame, where
    the summary handle goes; when none is open, the frame of the newest turn in the window."""
    from frames.selectors import session_top_frame

    frame = session_top_frame(session)
    if frame is None and turns and turns[-1].frame_id is not None:
        frame = Frame.objects.filter(pk=turns[-1].frame_id).first()
    return frame


def _summary_handle(*, frame: Frame | None, summary: Summary) -> None:
    """Put the summary in ``frame`` as a ``summary`` handle, when the frame is still open."""
    from frames.services import handle_add

    if frame is None or frame.status not in Frame.OPEN_STATUSES:
        return
    handle = handle_add(
        frame=frame,
        kind="summary",
        priority="high",
        content=summary.content,
        category="conversation",
        actor="worker",
    )
    Summary.objects.filter(pk=summary.pk).update(handle_id=handle.pk)
    summary.handle_id = handle.pk


def compaction_revert(*, run: CompactionRun, actor: str = "") -> CompactionRun:
    """Bring the turns a completed run took out of the window back in; 409 for other runs.

    The summary and its handle stay stored (nothing is deleted); the turns simply stop
    pointing at it.
    """
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=run.session_id)
        run = CompactionRun.objects.select_for_update().get(pk=run.pk)
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
        event_append(
            session=session,
            type="compaction.reverted",
            actor=actor,
            payload={"compaction_id": str(run.pk)},
        )
        # With its summary: the answer is read here, before the commit.
        return CompactionRun.objects.select_related("summary").get(pk=run.pk)


# -- imports ------------------------------------------------------------------------------


@dataclass
class ImportReport:
    session: Session
    frames: int
    turns: int
    api_calls: int
    tool_calls: int
    tool_errors: int
    compactions: int
    usage_totals: dict
    skipped: list[tuple[int, str]]

    def as_dict(self) -> dict:
        return {
            "session_id": str(self.session.pk),
            "frames": self.frames,
            "turns": self.turns,
            "api_calls": self.api_calls,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "compactions": self.compactions,
            "usage_totals": self.usage_totals,
            "skipped_lines": len(self.skipped),
            "skipped": [{"line": line, "reason": reason} for line, reason in self.skipped],
        }


IMPORT_BUDGET_MARGIN = 1_000_000


def transcript_import(
    *,
    organization,
    transcript,
    agent=None,
    title: str = "",
    context_window_tokens: int = 200_000,
    progress=None,
    actor: str = "import",
) -> ImportReport:
    """Write a read transcript as one new session, all in one transaction.

    The main conversation goes to a root frame; every subagent to a child frame with its
    own turns (branch = the agent id) and usage. Entries that are not valid messages are
    skipped and reported with their line number; nothing is written when anything else
    fails. ``progress(done, total)`` is called as entries are written.
    """
    from frames.services import frame_pop, frame_push, session_create

    spent: dict[str, int] = {}
    for entry in transcript.entries:
        if entry.kind == "usage":
            figures = UsageFigures(**entry.usage)
            spent[entry.branch] = spent.get(entry.branch, 0) + figures.occupancy_tokens
    child_budgets = {b: spent.get(b, 0) + IMPORT_BUDGET_MARGIN for b in transcript.branches}
    skipped = list(transcript.skipped)
    total = len(transcript.entries)
    with transaction.atomic():
        session = session_create(
            organization=organization,
            agent=agent,
            identity={"user_name": "transcript import"} if agent is None else {},
            context_window_tokens=context_window_tokens,
            model=transcript.model,
            title=(title or transcript.title or f"Imported {transcript.format} transcript")[:300],
            actor=actor,
        )
        root = frame_push(
            session=session,
            goal=(transcript.title or f"Imported {transcript.format} transcript")[:2000],
            budget_total=spent.get("", 0) + sum(child_budgets.values()) + IMPORT_BUDGET_MARGIN,
            actor=actor,
        )
        frames = {"": root}
        for branch, description in transcript.branches.items():
            frames[branch] = frame_push(
                session=session,
                parent=root,
                goal=f"{branch}: {description}"[:2000],
                budget_total=child_budgets[branch],
                actor=actor,
            )
        states: dict[str, _Ingest] = {}
        seq = 1
        for done, entry in enumerate(transcript.entries, start=1):
            state = states.get(entry.branch)
            if state is None:
                state = states[entry.branch] = _ingest_start(
                    session, entry.branch, frames.get(entry.branch, root)
                )
            if entry.kind == "message":
                state.next_seq = seq
                try:
                    _ingest_message(state, entry.role, entry.content, ["line", entry.line])
                except Invalid as exc:
                    skipped.append((entry.line, f"line {entry.line}: {exc.detail}"))
                seq = state.next_seq
            else:
                figures = UsageFigures(**entry.usage)
                usage_record_for(
                    session=session,
                    frame=frames.get(entry.branch, root),
                    usage=figures,
                    actor=actor,
                )
                if state.current is not None:
                    _touch(state, state.current).occupancy_tokens = figures.occupancy_tokens
            if progress is not None and (done % 200 == 0 or done == total):
                progress(done, total)
        for state in states.values():
            _ingest_finish(state)
        for branch in transcript.branches:
            frame_pop(frame=frames[branch], status=Frame.Status.COMPLETED, actor=actor)
        event_append(
            session=session,
            type="conversation.imported",
            frame=root,
            actor=actor,
            payload={
                "format": transcript.format,
                "entries": total,
                "skipped": len(skipped),
                "compactions": transcript.compactions,
            },
        )
        session.refresh_from_db()
    return ImportReport(
        session=session,
        frames=len(frames),
        turns=Turn.objects.filter(session=session).count(),
        api_calls=session.api_calls_total,
        tool_calls=transcript.count_blocks("tool_use"),
        tool_errors=transcript.count_blocks("tool_result", error=True),
        compactions=transcript.compactions,
        usage_totals=session.usage_totals,
        skipped=sorted(skipped),
    )


def compactions_requeue(*, older_than_seconds: int = 30) -> int:
    """Send again the jobs of runs still queued after ``older_than_seconds``; return how many.

    A run stays queued when the broker was down as it was created; a job sent twice is
    harmless, because only one delivery can claim the run.
    """
    from .tasks import compaction_run

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    # A run waiting for a retry has its own job due at retry_at; send it only if that is overdue.
    stuck = Q(retry_at__isnull=True, created_at__lt=cutoff) | Q(retry_at__lt=cutoff)
    sent = 0
    for run_id in CompactionRun.objects.filter(
        stuck, status=CompactionRun.Status.QUEUED
    ).values_list("pk", flat=True)[:500]:
        sent += job_send(compaction_run, str(run_id))
    return sent
