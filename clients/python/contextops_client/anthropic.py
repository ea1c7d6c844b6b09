"""A drop-in wrapper around the Anthropic SDK that keeps a contextops session up to date.

    import anthropic
    from contextops_client import Client
    from contextops_client.anthropic import wrap

    ops = Client()
    session = ops.session(model="claude-sonnet-4-5")
    claude = wrap(anthropic.Anthropic(), ops, session)
    with ops.frame(session, goal="Answer", budget=20_000):
        reply = claude.messages.create(model=..., max_tokens=1024, messages=history)

``claude.messages.create`` and ``claude.messages.stream`` take and return exactly what
the SDK's do (everything else passes straight through to the SDK client), and also:

1. **refuse what the frame cannot pay**: before sending, the call is estimated at
   ``max_tokens + len(json.dumps(messages + system)) // 4`` tokens; when the paying
   frame (``wrap(..., frame=)`` if given, else the innermost ``ops.frame`` block of the
   session in this thread or task, else the session's top frame) has fewer available,
   :class:`InsufficientTokens` is raised (:class:`FrameNotActive` when it is neither
   active nor waiting) and nothing is sent;
2. **record the call on that same frame**: the messages new since the last call and the
   model's reply go to ``POST /sessions/{id}/messages`` with the usage (all four token
   fields, the model and the message id) and ``frame_id``, the frame that was checked,
   which pays; on a server without that endpoint the usage goes to
   ``POST /frames/{id}/usage`` of that frame instead;
3. **use the compacted history**: when a compaction of the session has finished (the
   one the threshold queued, whose id the messages endpoint returned, or any other
   listed by ``GET /sessions/{id}/compactions``), the next call sends the summary
   followed by the turns ``GET /sessions/{id}/turns`` still has in the window
   (``summarized`` and ``truncated`` false) instead of the full history. The agent
   keeps passing its full history; the wrapper does the replacement each time.

Only ``httpx``, ``anthropic`` and the standard library are used.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from typing import Any

import anthropic
from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager
from anthropic.lib.streaming._messages import accumulate_event

from ._core import Frame, _id, current_frame
from .aio import AsyncClient
from .errors import ContextopsError, FrameNotActive, InsufficientTokens, NotFound

logger = logging.getLogger("contextops_client")

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
FINISHED = frozenset({"completed", "failed", "reverted"})
# The frame statuses the server charges a call to (``_frame_of_call`` in
# frames/conversation/ingest.py).
CHARGEABLE = frozenset({"active", "waiting"})


# -- pure helpers (no I/O) -----------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """SDK objects (pydantic models) and plain data alike, as JSON-ready data."""
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(exclude_none=True, mode="json"))
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


_BLOCK_FIELDS = {
    "text": ("type", "text"),
    "tool_use": ("type", "id", "name", "input"),
    "tool_result": ("type", "tool_use_id", "content", "is_error"),
    "thinking": ("type", "thinking"),
    "redacted_thinking": ("type", "data"),
}


def _canonical_block(block: Any) -> Any:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, dict):
        return block
    fields = _BLOCK_FIELDS.get(block.get("type", ""))
    if fields is None:
        return block
    out = {k: block[k] for k in fields if k in block}
    if out.get("type") == "tool_result":
        out.setdefault("is_error", False)
        content = out.get("content", "")
        out["content"] = (
            [_canonical_block(b) for b in content] if isinstance(content, list) else content
        )
    return out


def canonical(message: Any) -> dict[str, Any]:
    """A message reduced to what identifies it, so the SDK's reply objects an agent appends
    to its history compare equal to the recorded JSON."""
    data = jsonable(message)
    content = data.get("content", "")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return {"role": data.get("role"), "content": [_canonical_block(b) for b in blocks or []]}


def estimate_tokens(kwargs: dict[str, Any]) -> int:
    """What a call may spend: its ``max_tokens`` plus a quarter of its JSON text."""
    text = json.dumps(
        [jsonable(kwargs.get("messages") or []), jsonable(kwargs.get("system") or "")],
        ensure_ascii=False,
    )
    return int(kwargs.get("max_tokens") or 0) + len(text) // 4


def usage_of(message: Any) -> dict[str, Any]:
    usage = getattr(message, "usage", None)

    def count(name: str) -> int:
        return int(getattr(usage, name, 0) or 0)

    return {
        "input_tokens": count("input_tokens"),
        "output_tokens": count("output_tokens"),
        "cache_creation_input_tokens": count("cache_creation_input_tokens"),
        "cache_read_input_tokens": count("cache_read_input_tokens"),
        "model": str(getattr(message, "model", "") or "")[:120],
        "message_id": str(getattr(message, "id", "") or "")[:200],
    }


def reply_message(message: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": jsonable(list(getattr(message, "content", []) or []))}


class History:
    """What the wrapper knows of the session's conversation, in the agent's own messages.

    ``recorded`` are the messages sent to contextops so far (canonical form), ``turn_of``
    the turn index each one went into, replaying the server's grouping: a user message
    with text opens a turn, a tool result joins the turn of its ``tool_use``, the
    assistant joins the current turn.
    """

    def __init__(self) -> None:
        self.recorded: list[dict[str, Any]] = []
        self.turn_of: list[int] = []
        self.next_turn: int | None = None
        self.tool_turn: dict[str, int] = {}
        self.removed_turns: frozenset[int] = frozenset()
        self.summary: str = ""
        self.seen_compactions: dict[str, str] = {}
        self.pending_compactions: list[str] = []

    def common_prefix(self, messages: list[dict[str, Any]]) -> int:
        n = 0
        for mine, theirs in zip(self.recorded, messages, strict=False):
            if mine != theirs:
                break
            n += 1
        return n

    def _turn_for(self, message: dict[str, Any]) -> int:
        assert self.next_turn is not None
        current = self.next_turn - 1
        blocks = message["content"]
        if message["role"] == "user":
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            others = [
                b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")
            ]
            text = "".join(
                b.get("text", "") for b in others if isinstance(b, dict) and b.get("type") == "text"
            ).strip()
            if text or (others and not results):
                self.next_turn += 1
                return self.next_turn - 1
            for block in results:
                owner = self.tool_turn.get(block.get("tool_use_id", ""))
                if owner is not None:
                    return owner
        if current < 0:
            self.next_turn += 1
            current = self.next_turn - 1
        if message["role"] == "assistant":
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.tool_turn[str(block.get("id"))] = current
        return current

    def extend(self, common: int, new: list[dict[str, Any]]) -> None:
        del self.recorded[common:]
        del self.turn_of[common:]
        for message in new:
            self.recorded.append(message)
            self.turn_of.append(self._turn_for(message))

    def compacted(self, messages: list[Any], canon: list[dict[str, Any]]) -> list[Any]:
        """``messages`` with the recorded turns the compaction took out of the window
        replaced by its summary; ``messages`` unchanged when there is nothing to replace."""
        if not self.removed_turns:
            return messages
        common = self.common_prefix(canon)
        kept = [
            m for i, m in enumerate(messages[:common]) if self.turn_of[i] not in self.removed_turns
        ]
        if len(kept) == common:
            return messages
        out = kept + list(messages[common:])
        summary = SUMMARY_PREFIX + (self.summary or "(the summary is not available)")
        if out and jsonable(out[0]).get("role") == "user":
            first = jsonable(out[0])
            content = first.get("content", "")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            out[0] = {**first, "content": [{"type": "text", "text": summary}, *blocks]}
        else:
            out.insert(0, {"role": "user", "content": summary})
        return out


# -- the wrapper ---------------------------------------------------------------------------


def _refuse_unpayable(frame: Frame, session_id: str, estimate: int) -> None:
    """Raise, before anything is sent, when ``frame`` cannot be charged ``estimate`` tokens
    for a call of session ``session_id``."""
    if frame.session_id != session_id:
        # The server would answer 404, which the recording would take for a server
        # without the messages endpoint and charge this frame of another session.
        raise NotFound(
            f"Frame {frame.id} is not a frame of session {session_id}. Nothing was sent."
        )
    if frame.status not in CHARGEABLE:
        raise FrameNotActive(
            f"Frame {frame.id} is {frame.status}; only an active or waiting frame can pay "
            "for a call. Nothing was sent.",
            status=409,
            body={"error": FrameNotActive.code, "status": frame.status},
        )
    if estimate > frame.available:
        raise InsufficientTokens(
            f"This call may use about {estimate} tokens; frame {frame.id} has "
            f"{frame.available} available. Nothing was sent.",
            requested=estimate,
            available=frame.available,
            status=409,
        )


class Recorder:
    """The contextops side of a wrapped client (sync): budget check, recording, compaction.

    One wrapped client follows one conversation of one session; calls of that
    conversation are sequential (each sends the history the previous one extended).

    The frame a call is checked against is the frame it is charged to: ``before`` returns
    its id and ``after`` names it as ``frame_id`` when it posts the call (messages and
    usage, one request) to ``POST /sessions/{id}/messages``; without it the server would
    charge the session's top frame, which need not be the checked one (a pinned
    ``frame=``, or sibling frames open in concurrent tasks).
    """

    def __init__(self, ops: Any, session: Any, frame: Any = None) -> None:
        self.ops = ops
        self.session = session
        self.session_id = _id(session)
        self.fixed_frame = frame
        self.history = History()
        self.last_estimate = 0
        self._list_endpoint = True

    # which frame pays
    def frame_id(self) -> str | None:
        """The pinned frame, else the innermost ``ops.frame`` block of the session in this
        thread or task, else the session's top frame; None when the session has none."""
        if self.fixed_frame is not None:
            return _id(self.fixed_frame)
        block = current_frame(self.session_id)
        if block is not None:
            return block.id
        return self.ops.session_get(self.session_id).top_frame_id

    def check_budget(self, kwargs: dict[str, Any]) -> str | None:
        """The id of the frame that pays for the call (None when the session has no frame),
        after making sure it can: :class:`NotFound` when it is not a frame of the session,
        :class:`FrameNotActive` or :class:`InsufficientTokens` when it cannot pay."""
        self.last_estimate = estimate = estimate_tokens(kwargs)
        frame_id = self.frame_id()
        if frame_id is not None:
            _refuse_unpayable(self.ops.frame_get(frame_id), self.session_id, estimate)
        return frame_id

    # compaction
    def _finished_compactions(self) -> list[dict[str, Any]]:
        runs: dict[str, dict[str, Any]] = {}
        if self._list_endpoint:
            try:
                for run in self.ops.compactions(self.session_id):
                    runs[str(run["id"])] = run
            except NotFound:
                self._list_endpoint = False
        for run_id in list(self.history.pending_compactions):
            if run_id not in runs:
                runs[run_id] = self.ops.compaction_get(run_id)
        return [r for r in runs.values() if r.get("status") in FINISHED]

    def refresh_compaction(self) -> None:
        if not self.history.recorded:
            return
        finished = self._finished_compactions()
        changed = {str(r["id"]): str(r.get("status")) for r in finished}
        if all(self.history.seen_compactions.get(k) == v for k, v in changed.items()):
            return
        turns = self.ops.turns(self.session_id)
        self._apply(turns, finished)
        self.history.seen_compactions.update(changed)
        self.history.pending_compactions = [
            c for c in self.history.pending_compactions if c not in changed
        ]

    def _apply(self, turns: list[dict[str, Any]], runs: list[dict[str, Any]]) -> None:
        removed = {
            int(t["index"])
            for t in turns
            if (t.get("summarized") or t.get("truncated")) and not t.get("branch")
        }
        summary_ids = {t.get("summary_id") for t in turns if t.get("summarized")} - {None}
        summaries = {r.get("summary_id"): r.get("summary") for r in runs if r.get("summary_id")}
        texts = [summaries[s] for s in summary_ids if summaries.get(s)]
        for summary_id in summary_ids - set(summaries):
            logger.info(
                "summary %s of session %s is not in a listed compaction",
                summary_id,
                self.session_id,
            )
        self.history.removed_turns = frozenset(removed)
        self.history.summary = "\n\n".join(texts)

    def _ensure_turn_base(self) -> None:
        if self.history.next_turn is None:
            turns = self.ops.turns(self.session_id)
            self.history.next_turn = max((int(t["index"]) for t in turns), default=-1) + 1

    # before and after a call
    def before(
        self, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str | None]:
        """The call's arguments to send, its messages in canonical form and the id of the
        frame that pays (hand it to :meth:`after`)."""
        messages = list(kwargs.get("messages") or [])
        canon = [canonical(m) for m in messages]
        self.refresh_compaction()
        sent = dict(kwargs)
        sent["messages"] = self.history.compacted(messages, canon)
        frame_id = self.check_budget(sent)
        return sent, canon, frame_id

    def after(
        self,
        canon: list[dict[str, Any]],
        messages: list[Any],
        message: Any,
        frame_id: str | None,
    ) -> None:
        common = self.history.common_prefix(canon)
        reply = reply_message(message)
        new = [jsonable(m) for m in messages[common:]] + [reply]
        usage = usage_of(message)
        self._ensure_turn_base()
        try:
            answer = self.ops.messages_append(self.session_id, new, usage=usage, frame=frame_id)
        except NotFound:  # a server from before the conversation endpoints
            if frame_id is None:
                raise
            self.ops.usage_record(frame_id, **usage)
            answer = {}
        self.history.extend(common, [*canon[common:], canonical(reply)])
        compaction_id = (answer or {}).get("compaction_id")
        if compaction_id:
            self.history.pending_compactions.append(str(compaction_id))


class AsyncRecorder(Recorder):
    """The same for an :class:`AsyncClient` and ``anthropic.AsyncAnthropic``."""

    async def frame_id(self) -> str | None:  # type: ignore[override]
        if self.fixed_frame is not None:
            return _id(self.fixed_frame)
        block = current_frame(self.session_id)
        if block is not None:
            return block.id
        return (await self.ops.session_get(self.session_id)).top_frame_id

    async def check_budget(self, kwargs: dict[str, Any]) -> str | None:  # type: ignore[override]
        self.last_estimate = estimate = estimate_tokens(kwargs)
        frame_id = await self.frame_id()
        if frame_id is not None:
            _refuse_unpayable(await self.ops.frame_get(frame_id), self.session_id, estimate)
        return frame_id

    async def refresh_compaction(self) -> None:  # type: ignore[override]
        if not self.history.recorded:
            return
        runs: dict[str, dict[str, Any]] = {}
        if self._list_endpoint:
            try:
                for run in await self.ops.compactions(self.session_id):
                    runs[str(run["id"])] = run
            except NotFound:
                self._list_endpoint = False
        for run_id in list(self.history.pending_compactions):
            if run_id not in runs:
                runs[run_id] = await self.ops.compaction_get(run_id)
        finished = [r for r in runs.values() if r.get("status") in FINISHED]
        changed = {str(r["id"]): str(r.get("status")) for r in finished}
        if all(self.history.seen_compactions.get(k) == v for k, v in changed.items()):
            return
        turns = await self.ops.turns(self.session_id)
        self._apply(turns, finished)
        self.history.seen_compactions.update(changed)
        self.history.pending_compactions = [
            c for c in self.history.pending_compactions if c not in changed
        ]

    async def before(self, kwargs: dict[str, Any]):  # type: ignore[override]
        messages = list(kwargs.get("messages") or [])
        canon = [canonical(m) for m in messages]
        await self.refresh_compaction()
        sent = dict(kwargs)
        sent["messages"] = self.history.compacted(messages, canon)
        frame_id = await self.check_budget(sent)
        return sent, canon, frame_id

    async def after(self, canon, messages, message, frame_id) -> None:  # type: ignore[override]
        common = self.history.common_prefix(canon)
        reply = reply_message(message)
        new = [jsonable(m) for m in messages[common:]] + [reply]
        usage = usage_of(message)
        if self.history.next_turn is None:
            turns = await self.ops.turns(self.session_id)
            self.history.next_turn = max((int(t["index"]) for t in turns), default=-1) + 1
        try:
            answer = await self.ops.messages_append(
                self.session_id, new, usage=usage, frame=frame_id
            )
        except NotFound:  # a server from before the conversation endpoints
            if frame_id is None:
                raise
            await self.ops.usage_record(frame_id, **usage)
            answer = {}
        self.history.extend(common, [*canon[common:], canonical(reply)])
        compaction_id = (answer or {}).get("compaction_id")
        if compaction_id:
            self.history.pending_compactions.append(str(compaction_id))


def _accumulate(events: list[Any]) -> Any:
    """The final message of a raw event stream (``create(stream=True)``)."""
    snapshot = None
    bufs: dict[int, bytes] = {}
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    return snapshot


def _observe_stream(stream: Any, on_done: Callable[[Any], None]) -> Any:
    """Let ``stream`` (the SDK's ``Stream``) record the call once its last event is read."""
    inner = stream._iterator
    events: list[Any] = []

    def observed():
        for event in inner:
            events.append(event)
            yield event
            if getattr(event, "type", "") == "message_stop":
                on_done(_accumulate(events))

    stream._iterator = observed()
    return stream


def _observe_async_stream(stream: Any, on_done: Callable[[Any], Any]) -> Any:
    inner = stream._iterator
    events: list[Any] = []

    async def observed():
        async for event in inner:
            events.append(event)
            yield event
            if getattr(event, "type", "") == "message_stop":
                await on_done(_accumulate(events))

    stream._iterator = observed()
    return stream


class _RecordingStreamManager(MessageStreamManager):
    """The SDK's manager type; records the final message when the block ends cleanly."""

    def __init__(self, inner: Any, on_done: Callable[[Any], None]) -> None:  # noqa: D107
        self._inner = inner
        self._on_done = on_done
        self._stream: Any = None

    def __enter__(self):
        self._stream = self._inner.__enter__()
        return self._stream

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None and self._stream is not None:
                self._on_done(self._stream.get_final_message())
        finally:
            self._inner.__exit__(exc_type, exc, tb)


class _AsyncRecordingStreamManager(AsyncMessageStreamManager):
    def __init__(self, inner: Any, on_done: Callable[[Any], Any]) -> None:  # noqa: D107
        self._inner = inner
        self._on_done = on_done
        self._stream: Any = None

    async def __aenter__(self):
        self._stream = await self._inner.__aenter__()
        return self._stream

    async def __aexit__(self, exc_type, exc, tb):
        try:
            if exc_type is None and self._stream is not None:
                await self._on_done(await self._stream.get_final_message())
        finally:
            await self._inner.__aexit__(exc_type, exc, tb)


class _Messages:
    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = self._recorder.before(kwargs)
        original = list(kwargs.get("messages") or [])
        result = self._inner.create(**sent)
        if kwargs.get("stream"):
            return _observe_stream(
                result, lambda message: self._recorder.after(canon, original, message, frame_id)
            )
        self._recorder.after(canon, original, result, frame_id)
        return result

    def stream(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = self._recorder.before(kwargs)
        original = list(kwargs.get("messages") or [])
        return _RecordingStreamManager(
            self._inner.stream(**sent),
            lambda message: self._recorder.after(canon, original, message, frame_id),
        )


class _AsyncMessages:
    def __init__(self, inner: Any, recorder: AsyncRecorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = await self._recorder.before(kwargs)
        original = list(kwargs.get("messages") or [])
        result = await self._inner.create(**sent)
        if kwargs.get("stream"):
            return _observe_async_stream(
                result, lambda message: self._recorder.after(canon, original, message, frame_id)
            )
        await self._recorder.after(canon, original, result, frame_id)
        return result

    def stream(self, **kwargs: Any) -> Any:
        """Like the SDK's: returns the manager at once; the checks run on ``async with``."""
        recorder = self._recorder
        original = list(kwargs.get("messages") or [])
        inner_messages = self._inner

        class Deferred(_AsyncRecordingStreamManager):
            def __init__(self) -> None:  # noqa: D107
                super().__init__(None, self._done)
                self._canon: list[dict[str, Any]] = []
                self._frame_id: str | None = None

            async def _done(self, message: Any) -> None:
                await recorder.after(self._canon, original, message, self._frame_id)

            async def __aenter__(self):
                sent, self._canon, self._frame_id = await recorder.before(kwargs)
                self._inner = inner_messages.stream(**sent)
                return await super().__aenter__()

        return Deferred()


class WrappedAnthropic:
    """The SDK client with ``messages`` wrapped; any other attribute is the SDK's own.

    ``contextops`` is the :class:`Recorder` (its ``history`` and ``last_estimate``)."""

    def __init__(self, inner: Any, recorder: Recorder, messages: Any) -> None:
        self._inner = inner
        self.contextops = recorder
        self.messages = messages

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"<contextops wrap of {self._inner!r} for session {self.contextops.session_id}>"


def wrap(anthropic_client: Any, ops: Any, session: Any, *, frame: Any = None) -> WrappedAnthropic:
    """Wrap ``anthropic.Anthropic`` (with a :class:`Client`) or ``anthropic.AsyncAnthropic``
    (with an :class:`AsyncClient`) so each call is checked against, and recorded in,
    ``session``. ``frame`` pins the paying frame; by default it is the innermost
    ``ops.frame`` block of the session, else the session's top frame."""
    is_async = isinstance(ops, AsyncClient)
    sdk_async = _is_async_sdk(anthropic_client)
    if is_async != sdk_async:
        raise TypeError(
            "Pair anthropic.Anthropic with contextops Client, and anthropic.AsyncAnthropic "
            "with AsyncClient."
        )
    if is_async:
        recorder: Recorder = AsyncRecorder(ops, session, frame)
        messages: Any = _AsyncMessages(anthropic_client.messages, recorder)  # type: ignore[arg-type]
    else:
        recorder = Recorder(ops, session, frame)
        messages = _Messages(anthropic_client.messages, recorder)
    return WrappedAnthropic(anthropic_client, recorder, messages)


def _is_async_sdk(client: Any) -> bool:
    """``anthropic.AsyncAnthropic`` (or any client whose ``messages.create`` is a coroutine)."""
    return (
        isinstance(client, anthropic.AsyncAnthropic)
        or type(client).__name__.startswith("Async")
        or inspect.iscoroutinefunction(getattr(client.messages, "create", None))
    )


__all__ = [
    "ContextopsError",
    "History",
    "InsufficientTokens",
    "WrappedAnthropic",
    "estimate_tokens",
    "wrap",
]
