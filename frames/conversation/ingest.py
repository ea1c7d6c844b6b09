"""Messages into turns: the append of a model call's messages, its usage figures, the
grouping of messages into stored turns, and the replay of an append already made.

Turns (docs/concepts.md#turns): a user message with text starts a turn; the assistant's text,
thinking and tool calls join the current turn; a tool result joins the turn that holds
its ``tool_use`` id, even when it arrives in a later request. ``previous_error`` is true
when the turn before had a failed tool result. Anchors are recomputed for every turn a
request touched and for the turn after it.

An ingest pass (``ingest_start``, ``message_ingest`` for each message, ``ingest_finish``)
runs inside its caller's transaction: ``messages_append`` here, ``transcript_import`` in
``importing``.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from contextops.errors import Invalid
from contextops.tokens import count_tokens_many
from frames.budget import call_occupancy
from frames.events import event_append
from frames.locks import session_lock, session_require_not_ended
from frames.models import Event, Frame, Session, Usage
from frames.selectors import session_frame_get, session_top_frame
from frames.services.stack import frame_require_open
from frames.services.usage import UsageCall, usage_record

from .anchors import AnchorPatterns, ToolCall, ToolResult, TurnView, detect_anchor
from .compaction import compaction_due, compaction_queue
from .grouping import ROLES, block_text, blocks_of, result_text
from .models import MAIN_BRANCH, CompactionRun, Message, ToolUse, Turn
from .selection import ANCHOR_POINT

MAX_MESSAGES_PER_REQUEST = 500


@dataclass
class UsageFigures:
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    model: str = ""
    message_id: str = ""
    started_at: datetime | None = None
    latency_ms: int | None = None

    @property
    def occupancy_tokens(self) -> int:
        """Everything the call put in the window: full input (cached or not) plus output."""
        return call_occupancy(self)

    @property
    def seed_effective_tokens(self) -> float:
        """codelet's ``calculateEffectiveTokens`` (docs/compaction.md): input minus 90 % of the
        cache reads.

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
class IngestPass:
    """The state of one ingest pass over a session's branch."""

    session: Session
    branch: str
    frame: Frame | None
    patterns: AnchorPatterns
    current: Turn | None = None
    next_index: int = 0
    next_seq: int = 0
    touched: dict[Any, Turn] = field(default_factory=dict)  # by ``_key``
    tool_turns: dict[str, Turn] = field(default_factory=dict)  # tool_use id -> turn, this pass
    created: list[Turn] = field(default_factory=list)
    messages: int = 0
    # The source's own time of the latest message of each touched turn (an import's).
    times: dict[Any, datetime] = field(default_factory=dict)  # by ``_key``
    # Rows written together by ``ingest_finish``: messages in order, tool uses by id.
    pending_messages: list[Message] = field(default_factory=list)
    pending_tool_uses: dict[str, ToolUse] = field(default_factory=dict)


def ingest_start(*, session: Session, branch: str, frame: Frame | None) -> IngestPass:
    """A pass over ``branch`` that continues its newest turn and the session's message sequence."""
    state = IngestPass(
        session=session, branch=branch, frame=frame, patterns=AnchorPatterns.from_settings()
    )
    state.current = Turn.objects.filter(session=session, branch=branch).order_by("-index").first()
    state.next_index = state.current.index + 1 if state.current else 0
    last_seq = Message.objects.filter(session=session).aggregate(m=Max("seq"))["m"]
    state.next_seq = (last_seq or 0) + 1
    return state


def _key(turn: Turn) -> Any:
    """A turn's key in a pass: its id once stored; a new one is written by
    ``ingest_finish`` and known by its index until then."""
    return turn.pk if turn.pk is not None else ("new", turn.index)


def _new_turn(state: IngestPass, user_message: str = "", at: datetime | None = None) -> Turn:
    """A turn the pass starts; written, with the pass's others, by ``ingest_finish``."""
    now = at or timezone.now()
    turn = Turn(
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
    state.touched[_key(turn)] = turn
    state.created.append(turn)
    return turn


def _turn_for_tool_use(state: IngestPass, tool_use_id: str) -> Turn | None:
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


def turn_touch(state: IngestPass, turn: Turn) -> Turn:
    """``turn`` as this pass holds it, marked to be saved by ``ingest_finish``."""
    return state.touched.setdefault(_key(turn), turn)


def message_ingest(
    state: IngestPass,
    *,
    role: str,
    content: Any,
    field: Sequence[str | int] = (),
    at: datetime | None = None,
    tokens: list[int] | None = None,
) -> None:
    """Group one message into the branch's turns; checks everything before writing anything.

    ``at``: when the message was sent, as its source recorded it (an import); the message,
    a turn it starts and the turns it extends carry that time instead of now. ``tokens``:
    the count of each content block when the caller counted a batch at once.

    The message and the tool uses it names are written by ``ingest_finish``, all of the
    pass's together. Raises ``Invalid`` naming the bad part under ``field``
    (``("messages", 3)``).
    """
    if role not in ROLES:
        raise Invalid("role must be user or assistant.", field=(*field, "role"))
    blocks = blocks_of(content, (*field, "content"))
    if tokens is None:
        tokens = count_tokens_many([block_text(b) for b in blocks])
    owner: Turn | None = None
    if role == "user":
        results = [
            (b, t) for b, t in zip(blocks, tokens, strict=True) if b["type"] == "tool_result"
        ]
        others = [(b, t) for b, t in zip(blocks, tokens, strict=True) if b["type"] != "tool_result"]
        for block, count in results:
            turn = (
                _turn_for_tool_use(state, block["tool_use_id"])
                or state.current
                or _new_turn(state, at=at)
            )
            turn = turn_touch(state, turn)
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
            if at is not None:
                state.times[_key(turn)] = at
        text = "\n".join(b["text"] for b, _ in others if b["type"] == "text" and b["text"].strip())
        if text or (others and not results):
            turn = _new_turn(state, user_message=text, at=at)
            turn.tokens += sum(t for _, t in others)
            owner = turn
    else:
        turn = turn_touch(state, state.current) if state.current else _new_turn(state, at=at)
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
                state.pending_tool_uses.setdefault(
                    block["id"],
                    ToolUse(session=state.session, tool_use_id=block["id"], turn=turn),
                )
            turn.tokens += count
        owner = turn
    if owner is None:  # an empty user message: nothing to group
        owner = state.current or _new_turn(state, at=at)
    state.pending_messages.append(
        Message(
            session=state.session,
            turn=owner,
            seq=state.next_seq,
            role=role,
            content=blocks,
            tokens=sum(tokens),
            created_at=at or timezone.now(),
        )
    )
    if at is not None:
        state.times[_key(owner)] = at
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


TURN_FIELDS_SAVED = [
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
]


def ingest_finish(state: IngestPass) -> list[Turn]:
    """Recompute error flags and anchors of the touched turns and their neighbours, then
    write the pass: its new turns, messages and tool uses a statement each (per batch),
    and the stored turns that changed. Returns the turns saved, oldest first."""
    touched = sorted(state.touched.values(), key=lambda t: t.index)
    changed = _turns_recomputed(state, touched) if touched else []
    new = {id(turn) for turn in state.created}
    Turn.objects.bulk_create(state.created, batch_size=500)
    Message.objects.bulk_create(state.pending_messages, batch_size=500)
    # A tool use id the session already holds keeps its first turn, as before.
    ToolUse.objects.bulk_create(
        state.pending_tool_uses.values(), batch_size=500, ignore_conflicts=True
    )
    state.created, state.pending_messages, state.pending_tool_uses = [], [], {}
    Turn.objects.bulk_update(
        [turn for turn in changed if id(turn) not in new], TURN_FIELDS_SAVED, batch_size=500
    )
    return changed


def _turns_recomputed(state: IngestPass, touched: list[Turn]) -> list[Turn]:
    """Error flags and anchors of ``touched`` and their stored neighbours, recomputed;
    returns those to save (every touched turn, and a neighbour that changed), by index."""
    keys = {id(turn): key for key, turn in state.touched.items()}
    wanted = (
        {t.index for t in touched} | {t.index - 1 for t in touched} | {t.index + 1 for t in touched}
    )
    known = {t.index: t for t in touched}
    missing = [i for i in wanted if i >= 0 and i not in known]
    if missing:
        for turn in Turn.objects.filter(
            session=state.session, branch=state.branch, index__in=missing
        ):
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
        if id(turn) in keys or before != (
            turn.has_error,
            turn.previous_error,
            turn.anchor_type,
        ):
            changed.append(turn)
    now = timezone.now()
    for turn in changed:
        turn.updated_at = state.times.get(keys.get(id(turn)), now)
    return changed


def _counts_of(messages: Sequence[dict]) -> list[list[int] | None]:
    """The token count of every content block of every message, counted as one batch;
    None for a message whose content is malformed (``message_ingest`` names the fault)."""
    return contents_counted([message.get("content") for message in messages], {})


def contents_counted(contents: Sequence[Any], counted: dict[str, int]) -> list[list[int] | None]:
    """The token count of every block of each of ``contents`` (a message's content), None
    for one that is malformed (``message_ingest`` names the fault).

    ``counted`` maps a block's text to its count and is filled in: a text met before,
    here or in an earlier call with the same dict, is not counted again, and the new
    ones are counted as one batch.
    """
    texts: list[list[str] | None] = []
    for content in contents:
        try:
            blocks = blocks_of(content, ())
        except Invalid:
            texts.append(None)
            continue
        texts.append([block_text(b) for b in blocks])
    new = list({text: None for each in texts if each for text in each if text not in counted})
    counted.update(zip(new, count_tokens_many(new), strict=True))
    return [[counted[text] for text in each] if each is not None else None for each in texts]


def _usage_check(usage: dict | UsageFigures | None) -> UsageFigures | None:
    if usage is None:
        return None
    if isinstance(usage, UsageFigures):
        return usage
    return UsageFigures(**usage)


def _frame_of_call(session: Session, frame_id: Any) -> Frame:
    frame = session_frame_get(session=session, frame_id=frame_id)
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
    with transaction.atomic():
        # A replay answers even once the session has ended: check it before the end.
        session = session_lock(session, open_only=False)
        if figures is not None and figures.message_id:
            replayed = _append_replayed(session, figures.message_id)
            if replayed is not None:
                return replayed
        session_require_not_ended(session)
        frame = _frame_of_call(session, frame_id) if frame_id else session_top_frame(session)
        state = ingest_start(session=session, branch=MAIN_BRANCH, frame=frame)
        counts = _counts_of(messages)
        for i, message in enumerate(messages):
            message_ingest(
                state,
                role=message["role"],
                content=message["content"],
                field=("messages", i),
                tokens=counts[i],
            )
        occupancy = None
        if figures is not None:
            usage_record_for(session=session, frame=frame, usage=figures, actor=actor)
            occupancy = figures.occupancy_tokens
            if state.current is not None:
                turn_touch(state, state.current).occupancy_tokens = occupancy
        turns = ingest_finish(state)
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
        if compaction_due(session=session, occupancy=occupancy):
            run = compaction_queue(
                session=session,
                strategy=ANCHOR_POINT,
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


def usage_call(*, frame: Frame | None, usage: UsageFigures) -> UsageCall:
    """One model call's usage as ``usage_record_many`` records it."""
    return UsageCall(frame=frame, **vars(usage))


def usage_record_for(
    *, session: Session, frame: Frame | None, usage: UsageFigures, actor: str = ""
) -> Usage:
    """Store one model call's four usage fields through the frames service."""
    return usage_record(session=session, frame=frame, actor=actor, **vars(usage))
