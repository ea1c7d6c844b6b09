"""A drop-in wrapper around the Anthropic SDK that keeps a contextops session up to date.

    import anthropic
    from contextops_client import Client
    from contextops_client.anthropic import wrap

    ops = Client()
    session = ops.session(model="claude-sonnet-4-6")
    claude = wrap(anthropic.Anthropic(), ops, session)
    with ops.frame(session, goal="Answer", budget=20_000):
        reply = claude.messages.create(model=..., max_tokens=1024, messages=history)

``claude.messages.create`` (``stream=True`` too), ``.parse``, ``.stream``, and ``create``
under ``with_raw_response`` and ``with_streaming_response``, sync and async, take and
return exactly what the SDK's do; everything else is the SDK client's own, unrecorded:
``messages.count_tokens`` (free, no model call) and ``messages.batches`` (answered later,
outside any frame: not recorded). Each call also:

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

Two more steps of the integration checklist (docs/concepts.md#integration-checklist,
docs/agents.md), each off
unless its flag is given::

    claude = wrap(anthropic.Anthropic(), ops, session, context_pack=4_000, record_tool_results=True)

4. **a context pack before each call** (``context_pack=N``, N ≥ 500 tokens): the
   wrapper asks ``POST /sessions/{id}/context-pack`` for a pack of budget N for the
   paying frame (``frame_id``), with the text of the last user message as ``query``
   (facts and working set are ranked by it) and, when tool results are recorded too,
   the handles of the tool results the call still sends in ``exclude_handles`` (the
   model reads those in the messages already; once a compaction takes them out of the
   window, the pack brings them back by priority). What the pack holds goes into the
   call's ``system``, **after** the caller's own system prompt (which stays as it was,
   first, so a cached prefix stays cached): after a blank line when ``system`` is a
   string, as one more text block when it is a list of blocks, alone when there is
   none. The text reads::

       <contextops_context>
       Working context from contextops for this call (1234 of 4000 tokens).

       ## Brief                        the session's identity and environment
       ## Frames (root first; ...)     the frame stack, one "- goal (status)" a line
       ## Facts                        "- key: value" ("- constraint: ..." for constraints)
       ## Working set                  "- key: value"
       ## Context                      each segment: "### kind · priority", its content
       </contextops_context>

   (empty sections are left out; see ``_recording.render_pack``). The pack's text is
   part of the prompt, so it counts in the estimate of step 1: a frame that can pay for
   the call but not for the call with its pack refuses it. A pack the server refuses
   raises the client's error for its answer (409 ``critical_exceeds_budget``, critical
   handles alone exceed N: :class:`Conflict` with that ``code``; N under 500:
   :class:`BudgetTooSmall`) and nothing is sent. ``claude.contextops.last_pack`` is the
   last pack sent, as the API answered it. The system prompt is not recorded as a turn.
5. **tool results as handles** (``record_tool_results=True``): each ``tool_result`` block
   of the messages sent whose ``tool_use_id`` this wrapped client has not added yet is
   added to the paying frame with ``POST /frames/{id}/handles`` (``kind: "tool_result"``,
   its content as text, ``tool_call_id``, ``priority: "medium"``, ``category`` the tool's
   name from its ``tool_use`` block when known), once the checks passed and before the
   call is sent; so once per tool call, not again on the next call that resends it.
   ``claude.contextops.tool_handles`` maps each tool_use id to its handle's id. Without
   a frame (a session with none) nothing is added.

Only ``httpx``, ``anthropic`` and the standard library are used.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anthropic
from anthropic._models import construct_type
from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent

from . import _recording
from ._recording import SUMMARY_PREFIX as SUMMARY_PREFIX  # its home before _recording
from ._recording import Checklist, History, given, jsonable, usage_figures
from .aio import AsyncClient
from .errors import ContextopsError, InsufficientTokens

# -- pure helpers (no I/O) -----------------------------------------------------------------


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
    return _recording.estimate(
        given(kwargs, "max_tokens"),
        [given(kwargs, "messages") or [], given(kwargs, "system") or ""],
    )


def system_with(system: Any, text: str) -> Any:
    """The caller's ``system`` followed by ``text`` (a context pack's): after a blank line
    when it is a string, as one more text block when it is a list of blocks (so their
    ``cache_control`` markers keep caching the caller's own prompt); ``text`` alone when
    there is none."""
    if not system:
        return text
    if isinstance(system, str):
        return f"{system}\n\n{text}"
    return [*system, {"type": "text", "text": text}]


def _pack_into(sent: dict[str, Any]) -> _recording.AddPack:
    """Put a pack's text into ``sent``'s system prompt; answer the call's new estimate."""
    system = given(sent, "system")

    def add(text: str) -> int:
        sent["system"] = system_with(system, text)
        return estimate_tokens(sent)

    return add


def _prepared(
    kwargs: dict[str, Any], history: History
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The call's arguments to send (the compacted history), its messages in canonical
    form, and the messages it sends in canonical form."""
    messages = list(kwargs.get("messages") or [])
    canon = [canonical(m) for m in messages]
    sent = dict(kwargs)
    sent["messages"] = history.compacted(messages, canon)
    sent_canon = canon if sent["messages"] is messages else [canonical(m) for m in sent["messages"]]
    return sent, canon, sent_canon


def usage_of(message: Any) -> dict[str, Any]:
    usage = getattr(message, "usage", None)
    return usage_figures(
        input_tokens=getattr(usage, "input_tokens", 0),
        output_tokens=getattr(usage, "output_tokens", 0),
        cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", 0),
        cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", 0),
        model=getattr(message, "model", ""),
        message_id=getattr(message, "id", ""),
    )


def reply_message(message: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": jsonable(list(getattr(message, "content", []) or []))}


# -- the wrapper ---------------------------------------------------------------------------


class Recorder(_recording.Recorder):
    """The contextops side of a wrapped ``anthropic.Anthropic`` (see ``_recording.Recorder``:
    paying frame, refusal, recording), plus the compacted history it sends."""

    def check_budget(self, kwargs: dict[str, Any]) -> str | None:
        """The id of the frame that pays for the call (None when the session has no frame),
        after making sure it can (see ``_recording.Recorder.check``)."""
        return self.check(estimate_tokens(kwargs))

    def before(
        self, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str | None]:
        """The call's arguments to send, its messages in canonical form and the id of the
        frame that pays (hand it to :meth:`after`), after the checks and the checklist's
        steps (``_recording.Recorder.prepare``)."""
        self.refresh_compaction()
        sent, canon, sent_canon = _prepared(kwargs, self.history)
        frame_id = self.prepare(estimate_tokens(sent), sent_canon, _pack_into(sent))
        return sent, canon, frame_id

    def after(
        self,
        canon: list[dict[str, Any]],
        messages: list[Any],
        message: Any,
        frame_id: str | None,
    ) -> None:
        self.record(*_new_part(self.history, canon, messages, message), frame_id)


class AsyncRecorder(_recording.AsyncRecorder):
    """The same for an :class:`AsyncClient` and ``anthropic.AsyncAnthropic``."""

    async def check_budget(self, kwargs: dict[str, Any]) -> str | None:
        return await self.check(estimate_tokens(kwargs))

    async def before(
        self, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str | None]:
        await self.refresh_compaction()
        sent, canon, sent_canon = _prepared(kwargs, self.history)
        frame_id = await self.prepare(estimate_tokens(sent), sent_canon, _pack_into(sent))
        return sent, canon, frame_id

    async def after(
        self,
        canon: list[dict[str, Any]],
        messages: list[Any],
        message: Any,
        frame_id: str | None,
    ) -> None:
        await self.record(*_new_part(self.history, canon, messages, message), frame_id)


def _new_part(
    history: History, canon: list[dict[str, Any]], messages: list[Any], message: Any
) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """What to record of a call: how many of its messages are recorded already, the rest
    with the reply (as the agent sent them, and canonical), and its usage."""
    common = history.common_prefix(canon)
    reply = reply_message(message)
    new = [jsonable(m) for m in messages[common:]] + [reply]
    return common, new, [*canon[common:], canonical(reply)], usage_of(message)


def _accumulate(events: list[Any]) -> Any:
    """The final message of a raw event stream (``create(stream=True)``)."""
    snapshot = None
    bufs: dict[int, bytes] = {}
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    return snapshot


def message_from_body(body: bytes, *, streamed: bool) -> Any:
    """The final message of a ``with_streaming_response`` body: the event stream's
    accumulated message, or the JSON message."""
    if streamed:
        events = [
            construct_type(type_=RawMessageStreamEvent, value=data)
            for data in _recording.sse_data(body)
            if isinstance(data, dict) and data.get("type") != "ping"
        ]
        return _accumulate(events)
    return construct_type(type_=Message, value=json.loads(body or b"{}"))


def _observe_stream(stream: Any, on_done: Callable[[Any], None]) -> Any:
    """Let ``stream`` (the SDK's ``Stream``) record the call once its last event is read."""
    inner = stream._iterator
    events: list[Any] = []

    def observed() -> Iterator[Any]:
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

    async def observed() -> AsyncIterator[Any]:
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

    def __enter__(self) -> Any:  # the SDK's MessageStream
        self._stream = self._inner.__enter__()
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
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

    async def __aenter__(self) -> Any:  # the SDK's AsyncMessageStream
        self._stream = await self._inner.__aenter__()
        return self._stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
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

    def _answered(self, kwargs: dict[str, Any], result: Any, canon: Any, frame_id: Any) -> Any:
        original = list(kwargs.get("messages") or [])
        if kwargs.get("stream"):
            return _observe_stream(
                result, lambda message: self._recorder.after(canon, original, message, frame_id)
            )
        self._recorder.after(canon, original, result, frame_id)
        return result

    def create(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = self._recorder.before(kwargs)
        return self._answered(kwargs, self._inner.create(**sent), canon, frame_id)

    def parse(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = self._recorder.before(kwargs)
        return self._answered(kwargs, self._inner.parse(**sent), canon, frame_id)

    def stream(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = self._recorder.before(kwargs)
        original = list(kwargs.get("messages") or [])
        return _RecordingStreamManager(
            self._inner.stream(**sent),
            lambda message: self._recorder.after(canon, original, message, frame_id),
        )

    @property
    def with_raw_response(self) -> _RawMessages:
        return _RawMessages(self)

    @property
    def with_streaming_response(self) -> _StreamingMessages:
        return _StreamingMessages(self)


class _RawMessages:
    """``messages.with_raw_response``: the SDK's raw answer, whose parsed message (a
    stream once read to the end) is recorded."""

    def __init__(self, messages: _Messages) -> None:
        self._messages = messages
        self._inner = messages._inner.with_raw_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = self._messages._recorder.before(kwargs)
        raw = self._inner.create(**sent)
        self._messages._answered(kwargs, raw.parse(), canon, frame_id)
        return raw  # its parse() answers the same (observed) object again


class _StreamingMessages:
    """``messages.with_streaming_response``: the body, however the agent reads it, is
    recorded when the block ends cleanly."""

    def __init__(self, messages: _Messages) -> None:
        self._messages = messages
        self._inner = messages._inner.with_streaming_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create(self, **kwargs: Any) -> Any:
        recorder = self._messages._recorder
        sent, canon, frame_id = recorder.before(kwargs)
        original = list(kwargs.get("messages") or [])
        streamed = bool(kwargs.get("stream"))
        return _recording.TappedResponse(
            self._inner.create(**sent),
            lambda body: recorder.after(
                canon, original, message_from_body(body, streamed=streamed), frame_id
            ),
        )


class _AsyncMessages:
    def __init__(self, inner: Any, recorder: AsyncRecorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _answered(
        self, kwargs: dict[str, Any], result: Any, canon: Any, frame_id: Any
    ) -> Any:
        original = list(kwargs.get("messages") or [])
        if kwargs.get("stream"):
            return _observe_async_stream(
                result, lambda message: self._recorder.after(canon, original, message, frame_id)
            )
        await self._recorder.after(canon, original, result, frame_id)
        return result

    async def create(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = await self._recorder.before(kwargs)
        return await self._answered(kwargs, await self._inner.create(**sent), canon, frame_id)

    async def parse(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = await self._recorder.before(kwargs)
        return await self._answered(kwargs, await self._inner.parse(**sent), canon, frame_id)

    @property
    def with_raw_response(self) -> _AsyncRawMessages:
        return _AsyncRawMessages(self)

    @property
    def with_streaming_response(self) -> _AsyncStreamingMessages:
        return _AsyncStreamingMessages(self)

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

            async def __aenter__(self) -> Any:
                sent, self._canon, self._frame_id = await recorder.before(kwargs)
                self._inner = inner_messages.stream(**sent)
                return await super().__aenter__()

        return Deferred()


class _AsyncRawMessages:
    def __init__(self, messages: _AsyncMessages) -> None:
        self._messages = messages
        self._inner = messages._inner.with_raw_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create(self, **kwargs: Any) -> Any:
        sent, canon, frame_id = await self._messages._recorder.before(kwargs)
        raw = await self._inner.create(**sent)
        parsed = raw.parse()
        if inspect.isawaitable(parsed):
            parsed = await parsed
        await self._messages._answered(kwargs, parsed, canon, frame_id)
        return raw


class _AsyncStreamingMessages:
    def __init__(self, messages: _AsyncMessages) -> None:
        self._messages = messages
        self._inner = messages._inner.with_streaming_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create(self, **kwargs: Any) -> Any:
        """Returns the manager at once; the checks run on ``async with``."""
        recorder = self._messages._recorder
        original = list(kwargs.get("messages") or [])
        streamed = bool(kwargs.get("stream"))

        async def opened() -> tuple[Any, Any]:
            sent, canon, frame_id = await recorder.before(kwargs)

            async def done(body: bytes) -> None:
                message = message_from_body(body, streamed=streamed)
                await recorder.after(canon, original, message, frame_id)

            return self._inner.create(**sent), done

        return _recording.DeferredManager(opened, tapped=True)


class WrappedAnthropic:
    """The SDK client with ``messages`` wrapped; any other attribute is the SDK's own.

    ``contextops`` is the :class:`Recorder` (its ``history`` and ``last_estimate``)."""

    def __init__(self, inner: Any, recorder: _recording.Recorder, messages: Any) -> None:
        self._inner = inner
        self.contextops = recorder
        self.messages = messages

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"<contextops wrap of {self._inner!r} for session {self.contextops.session_id}>"


def wrap(
    anthropic_client: Any,
    ops: Any,
    session: Any,
    *,
    frame: Any = None,
    context_pack: int | None = None,
    record_tool_results: bool = False,
) -> WrappedAnthropic:
    """Wrap ``anthropic.Anthropic`` (with a :class:`Client`) or ``anthropic.AsyncAnthropic``
    (with an :class:`AsyncClient`) so each call is checked against, and recorded in,
    ``session``. ``frame`` pins the paying frame; by default it is the innermost
    ``ops.frame`` block of the session, else the session's top frame.

    ``context_pack=N`` adds a context pack of N tokens (at least the server's 500) to
    each call's ``system``; ``record_tool_results=True`` adds each tool result sent as a
    ``tool_result`` handle of the paying frame (see the module's documentation)."""
    checklist = Checklist(context_pack=context_pack, record_tool_results=record_tool_results)
    is_async = isinstance(ops, AsyncClient)
    sdk_async = _is_async_sdk(anthropic_client)
    if is_async != sdk_async:
        raise TypeError(
            "Pair anthropic.Anthropic with contextops Client, and anthropic.AsyncAnthropic "
            "with AsyncClient."
        )
    recorder: _recording.Recorder
    if is_async:
        recorder = AsyncRecorder(ops, session, frame, checklist)
        messages: Any = _AsyncMessages(anthropic_client.messages, recorder)
    else:
        recorder = Recorder(ops, session, frame, checklist)
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
