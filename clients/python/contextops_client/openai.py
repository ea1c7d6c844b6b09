"""A drop-in wrapper around the OpenAI SDK that keeps a contextops session up to date.

    import openai
    from contextops_client import Client
    from contextops_client.openai import wrap

    ops = Client()
    session = ops.session(model="gpt-5")
    gpt = wrap(openai.OpenAI(), ops, session)
    with ops.frame(session, goal="Answer", budget=20_000):
        completion = gpt.chat.completions.create(model=..., messages=history)
        response = gpt.responses.create(model=..., input=items)

Every way the SDK sends a model call takes and returns exactly what the SDK's does:
``chat.completions`` (also as ``beta.chat.completions``) and ``responses``, each with
``create`` (``stream=True`` too), ``parse``, the ``stream()`` helper, and ``create`` /
``parse`` under ``with_raw_response`` and ``with_streaming_response``, sync and async
(docs/agents.md has the table). Everything else (``responses.retrieve``, ``models``,
``beta.responses``, ``responses.stream(response_id=...)``, which reads a response again)
is the SDK client's own, unrecorded. Each call also:

1. **refuse what the frame cannot pay**: before sending, the call is estimated at its
   output cap (``max_completion_tokens`` or ``max_tokens``; Responses:
   ``max_output_tokens``) plus a quarter of the JSON text of ``messages`` (Responses:
   ``[input, instructions]``); when the paying frame (``wrap(..., frame=)`` if given,
   else the innermost ``ops.frame`` block of the session in this thread or task, else
   the session's top frame) has fewer available, :class:`InsufficientTokens` is raised
   (:class:`FrameNotActive` when it is neither active nor waiting) and nothing is sent;
2. **record the call on that same frame**: the messages new since the last call and the
   model's reply go to ``POST /sessions/{id}/messages`` in the Anthropic Messages shape
   that endpoint takes (``system`` / ``developer`` messages and ``instructions`` are not
   recorded; an assistant's ``tool_calls`` and Responses ``function_call`` items become
   ``tool_use`` blocks with their JSON arguments parsed; ``tool`` messages and
   ``function_call_output`` items become ``tool_result`` blocks of their
   ``tool_call_id`` / ``call_id``, ``is_error`` when the output starts with "error", as
   ``import_transcript`` reads OpenAI transcripts), with ``frame_id`` and the usage:
   OpenAI's ``prompt_tokens`` (Responses: ``input_tokens``) include the cached tokens, so
   ``input_tokens = prompt_tokens - cached_tokens``, ``cache_read_input_tokens =
   prompt_tokens_details.cached_tokens`` (``input_tokens_details.cached_tokens``),
   ``output_tokens = completion_tokens`` (``output_tokens``), the model, and the
   completion's or response's id as ``message_id`` (so a record sent again after a lost
   answer is charged once). Only the first choice of a Chat Completion is recorded.

   Chat Completions: the agent passes its whole history each call; what is new is what
   follows the messages recorded so far. Responses: likewise, unless the call continues
   a stored response or conversation (``previous_response_id`` / ``conversation``),
   whose ``input`` is all new.
3. **streams**: ``create(stream=True)`` returns the SDK's stream; the call is recorded
   once it has been read to the end (Responses: at its ``response.completed`` or
   ``response.incomplete`` event). A Chat Completions stream is always sent with
   ``stream_options={"include_usage": True}``, so its usage is known; the final
   usage-only chunk reaches the agent only when it asked for it (``create``,
   ``with_raw_response``), and always through the ``stream()`` helper's events and a
   ``with_streaming_response`` body, which are passed on as the API sent them. A
   ``stream()`` helper or a ``with_streaming_response`` block is recorded when the block
   ends without an exception (what the agent did not read is read then); an async one
   is checked on ``async with``, when it sends.

The integration checklist's two optional steps (docs/concepts.md#integration-checklist) work as in the Anthropic
wrapper (``contextops_client.anthropic``, steps 4 and 5, where the pack's layout is
shown), each off unless its flag is given::

    gpt = wrap(openai.OpenAI(), ops, session, context_pack=4_000, record_tool_results=True)

4. ``context_pack=N``: before each call, a context pack of budget N for the paying frame
   (``query``: the last user text), rendered between ``<contextops_context>`` tags, goes
   into the call's instructions, **after** the caller's own: Chat Completions gets it as
   a ``system`` message (``developer`` when the caller's leading instructions are
   ``developer`` messages) right after the caller's leading ``system`` / ``developer``
   messages (first when there are none); Responses gets it at the end of
   ``instructions`` after a blank line (alone when there are none). It counts in the
   estimate; a pack the server refuses raises its error and nothing is sent; it is not
   recorded as a turn. ``gpt.contextops.last_pack`` is the last pack sent.
5. ``record_tool_results=True``: each ``tool`` message (Responses:
   ``function_call_output`` / ``custom_tool_call_output`` item) sent whose call id this
   wrapped client has not added yet becomes a ``tool_result`` handle of the paying frame
   (its output as text, ``tool_call_id``, ``priority: "medium"``, ``category`` the
   function's name when the call is known), once the checks passed and before the call
   is sent. Tool outputs the call sends (or, continuing a stored response, that it
   continues) are left out of the pack (``exclude_handles``): the model has them.

Only ``httpx`` and the standard library are used: the SDK client is duck-typed, so this
module loads without the ``openai`` package.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from . import _recording
from ._recording import given, jsonable, usage_figures
from .aio import AsyncClient
from .errors import ContextopsError, FrameNotActive, InsufficientTokens

logger = logging.getLogger("contextops_client")

# Responses events that end a response and carry it whole.
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete"})


# -- OpenAI shapes into the Anthropic Messages shape (pure) ------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    """Message content (a string or a list of Chat / Responses parts) as content blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, str):
            part = {"type": "text", "text": part}
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            if part.get("text"):
                blocks.append({"type": "text", "text": str(part["text"])})
        elif kind == "refusal":
            if part.get("refusal"):
                blocks.append({"type": "text", "text": str(part["refusal"])})
        elif kind == "image_url":  # Chat: {"image_url": {"url": ...}}
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            blocks.append({"type": "image", "source": {"type": "url", "url": str(url or "")}})
        elif kind == "input_image":  # Responses: {"image_url": ...} or {"file_id": ...}
            source = (
                {"type": "url", "url": str(part["image_url"])}
                if part.get("image_url")
                else {"type": "file", "file_id": str(part.get("file_id") or "")}
            )
            blocks.append({"type": "image", "source": source})
        elif isinstance(kind, str) and kind:
            blocks.append(part)  # audio, files: kept as they are
    return blocks


def _arguments(raw: Any) -> dict[str, Any]:
    """A tool call's JSON arguments as the ``input`` object of a ``tool_use`` block."""
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {"arguments": raw}
    if parsed is None:
        return {}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def _tool_use(call_id: Any, name: Any, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": str(call_id or ""),
        "name": str(name or ""),
        "input": tool_input,
    }


def _tool_result(call_id: Any, output: Any) -> dict[str, Any]:
    content: Any = output if isinstance(output, str) else _blocks(output)
    text = (
        content
        if isinstance(content, str)
        else "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    )
    return {
        "type": "tool_result",
        "tool_use_id": str(call_id or ""),
        "content": content,
        # OpenAI has no error flag: read as import_transcript reads OpenAI transcripts.
        "is_error": text.strip().lower().startswith("error"),
    }


def _chat_tool_use(call: dict[str, Any]) -> dict[str, Any]:
    if call.get("type") == "custom" or "custom" in call:
        custom = call.get("custom") or {}
        return _tool_use(call.get("id"), custom.get("name"), {"input": custom.get("input", "")})
    function = call.get("function") or {}
    return _tool_use(call.get("id"), function.get("name"), _arguments(function.get("arguments")))


def chat_message(message: Any) -> dict[str, Any] | None:
    """One Chat Completions message in the Anthropic shape; None for what is not recorded
    (``system`` and ``developer`` messages, as Anthropic's ``system`` parameter is not;
    the legacy ``function`` role)."""
    data = jsonable(message)
    if not isinstance(data, dict):
        return None
    role = data.get("role")
    if role == "user":
        return {"role": "user", "content": _blocks(data.get("content"))}
    if role == "assistant":
        blocks = _blocks(data.get("content"))
        if data.get("refusal"):
            blocks.append({"type": "text", "text": str(data["refusal"])})
        blocks += [_chat_tool_use(c) for c in data.get("tool_calls") or [] if isinstance(c, dict)]
        return {"role": "assistant", "content": blocks}
    if role == "tool":
        return {
            "role": "user",
            "content": [_tool_result(data.get("tool_call_id"), data.get("content"))],
        }
    return None


def chat_messages(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """A Chat Completions history in the Anthropic shape, one message for each recorded one."""
    return [m for m in (chat_message(m) for m in messages) if m is not None]


def _item(item: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str] | None:
    """A Responses item as (role, blocks, group): consecutive items of a group ("assistant"
    or "tool_output") make one message; "" never groups."""
    kind = item.get("type")
    if "role" in item and kind in (None, "message"):
        role = item.get("role")
        if role == "user":
            return "user", _blocks(item.get("content")), ""
        if role == "assistant":
            return "assistant", _blocks(item.get("content")), "assistant"
        return None  # system, developer
    if kind == "function_call":
        block = _tool_use(item.get("call_id"), item.get("name"), _arguments(item.get("arguments")))
        return "assistant", [block], "assistant"
    if kind == "custom_tool_call":
        block = _tool_use(item.get("call_id"), item.get("name"), {"input": item.get("input", "")})
        return "assistant", [block], "assistant"
    if kind in ("function_call_output", "custom_tool_call_output"):
        return "user", [_tool_result(item.get("call_id"), item.get("output"))], "tool_output"
    if kind == "reasoning":
        text = "\n".join(
            str(s.get("text", "")) for s in item.get("summary") or [] if isinstance(s, dict)
        ).strip()
        return (
            ("assistant", [{"type": "thinking", "thinking": text}], "assistant") if text else None
        )
    return None  # built-in tool calls and item references: not recorded


def response_messages(items: Any) -> list[dict[str, Any]]:
    """A Responses ``input`` (a string or a list of items) or ``output`` in the Anthropic
    shape: an assistant's consecutive items (text, reasoning, tool calls) make one
    message, so do consecutive tool outputs."""
    if isinstance(items, str):
        return [{"role": "user", "content": _blocks(items)}]
    out: list[dict[str, Any]] = []
    last_group = ""
    for item in jsonable(list(items or [])):
        converted = _item(item) if isinstance(item, dict) else None
        if converted is None:
            continue
        role, blocks, group = converted
        if group and group == last_group:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
        last_group = group
    return out


def _reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's output as one assistant message."""
    blocks = [b for m in messages if m["role"] == "assistant" for b in m["content"]]
    return {"role": "assistant", "content": blocks}


def completion_usage(usage: Any, *, model: Any, message_id: Any) -> dict[str, Any]:
    """A Chat Completion's ``usage``: ``prompt_tokens`` include the cached ones."""
    data = jsonable(usage) or {}
    cached = int((data.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return usage_figures(
        input_tokens=int(data.get("prompt_tokens") or 0) - cached,
        output_tokens=data.get("completion_tokens"),
        cache_read_input_tokens=cached,
        model=model,
        message_id=message_id,
    )


def response_usage(usage: Any, *, model: Any, message_id: Any) -> dict[str, Any]:
    """A Response's ``usage``: ``input_tokens`` include the cached ones."""
    data = jsonable(usage) or {}
    cached = int((data.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    return usage_figures(
        input_tokens=int(data.get("input_tokens") or 0) - cached,
        output_tokens=data.get("output_tokens"),
        cache_read_input_tokens=cached,
        model=model,
        message_id=message_id,
    )


def estimate_tokens(kwargs: dict[str, Any]) -> int:
    """What a call may spend: its output cap plus a quarter of its prompt's JSON text
    (``messages`` for Chat Completions, ``[input, instructions]`` for Responses)."""
    if given(kwargs, "input") is not None or given(kwargs, "messages") is None:
        return _recording.estimate(
            given(kwargs, "max_output_tokens"),
            [given(kwargs, "input") or [], given(kwargs, "instructions") or ""],
        )
    cap = given(kwargs, "max_completion_tokens") or given(kwargs, "max_tokens")
    return _recording.estimate(cap, list(given(kwargs, "messages") or []))


# -- one call ------------------------------------------------------------------------------


@dataclass
class _Call:
    """A call about to be sent: its arguments, its conversation in the Anthropic shape,
    whether that continues the recorded one (all new) or restates it, the paying frame,
    and how a context pack's text goes into it."""

    sent: dict[str, Any]
    canon: list[dict[str, Any]]
    continues: bool
    frame_id: str | None = None
    hide_usage_chunk: bool = False
    responses: bool = False

    def add_pack(self, text: str) -> int:
        """Put a context pack's text into the call's instructions; answer its estimate.

        Chat Completions: a ``system`` message (``developer`` when the caller's own
        instructions are ``developer`` messages) right after the caller's leading
        ``system`` / ``developer`` messages, first when there are none. Responses:
        ``instructions`` followed by the text after a blank line, the text alone when
        there are none."""
        if self.responses:
            instructions = given(self.sent, "instructions")
            self.sent["instructions"] = f"{instructions}\n\n{text}" if instructions else text
        else:
            messages = list(given(self.sent, "messages") or [])
            at, role = 0, "system"
            while at < len(messages):
                lead = jsonable(messages[at])
                if not isinstance(lead, dict) or lead.get("role") not in ("system", "developer"):
                    break
                role = str(lead["role"])
                at += 1
            messages.insert(at, {"role": role, "content": text})
            self.sent["messages"] = messages
        return estimate_tokens(self.sent)

    def window(self, history: _recording.History) -> list[dict[str, Any]]:
        """What the model reads of the conversation: the call's messages, and the stored
        ones before them when it continues a stored response or conversation."""
        return [*history.recorded, *self.canon] if self.continues else self.canon


def _chat_call(kwargs: dict[str, Any], *, streams: bool | None = None) -> _Call:
    """A Chat Completions call; ``streams`` for the ``stream()`` helper, which streams
    without a ``stream`` argument."""
    sent = dict(kwargs)
    hide = False
    if given(kwargs, "stream") if streams is None else streams:
        options = dict(given(kwargs, "stream_options") or {})
        hide = options.get("include_usage") is not True
        sent["stream_options"] = {**options, "include_usage": True}
    messages = given(kwargs, "messages")
    if messages is not None and not isinstance(messages, list):
        sent["messages"] = messages = list(messages)  # read once here, sent as read
    return _Call(sent, chat_messages(messages or []), continues=False, hide_usage_chunk=hide)


def _responses_call(kwargs: dict[str, Any], *, streams: bool | None = None) -> _Call:
    sent = dict(kwargs)
    items = given(kwargs, "input")
    if items is not None and not isinstance(items, str | list):
        sent["input"] = items = list(items)  # read once here, sent as read
    continues = bool(given(kwargs, "previous_response_id") or given(kwargs, "conversation"))
    return _Call(sent, response_messages(items), continues, responses=True)


def _new_part(
    history: _recording.History, call: _Call, reply: dict[str, Any]
) -> tuple[int, list[dict[str, Any]]]:
    """How many recorded messages the call keeps, and what follows them (ending with the
    reply)."""
    if call.continues:
        return len(history.recorded), [*call.canon, reply]
    common = history.common_prefix(call.canon)
    return common, [*call.canon[common:], reply]


@dataclass
class _Outcome:
    """What a finished call records: the reply and its usage."""

    reply: dict[str, Any]
    usage: dict[str, Any]


def _completion_outcome(completion: Any) -> _Outcome:
    """A whole Chat Completion (the SDK's object, or its JSON) as what the call records."""
    data = jsonable(completion) or {}
    choices = data.get("choices") or []
    message = (choices[0].get("message") if choices else None) or {"role": "assistant"}
    return _Outcome(
        chat_message(message) or {"role": "assistant", "content": []},
        completion_usage(data.get("usage"), model=data.get("model"), message_id=data.get("id")),
    )


def _response_outcome(response: Any) -> _Outcome:
    """A whole Response (the SDK's object, or its JSON) as what the call records."""
    data = jsonable(response) or {}
    return _Outcome(
        _reply(response_messages(data.get("output") or [])),
        response_usage(data.get("usage"), model=data.get("model"), message_id=data.get("id")),
    )


def _chat_events_outcome(chunks: list[Any]) -> _Outcome:
    """A Chat Completions event stream's chunks (JSON) as what the call records."""
    gathered = _ChunkAccumulator()
    for chunk in chunks:
        if isinstance(chunk, dict):
            gathered.add(chunk)
    return gathered.outcome()


def _response_events_outcome(events: list[Any]) -> _Outcome:
    """A Responses event stream (JSON) as what the call records: its final response."""
    for event in reversed(events):
        if isinstance(event, dict) and event.get("type") in _FINAL_EVENTS:
            return _response_outcome(event.get("response"))
    logger.warning("a response stream ended without its final event; recorded without tokens")
    return _Outcome(
        {"role": "assistant", "content": []}, response_usage(None, model="", message_id="")
    )


class _ChunkAccumulator:
    """A Chat Completions stream's chunks, gathered into the completion they make up."""

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls: dict[int, dict[str, str]] = {}
        self.usage: Any = None

    def add(self, chunk: Any) -> None:
        data = jsonable(chunk)
        self.id = self.id or str(data.get("id") or "")
        self.model = self.model or str(data.get("model") or "")
        if data.get("usage"):
            self.usage = data["usage"]
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(str(delta["content"]))
            if delta.get("refusal"):
                self.refusal.append(str(delta["refusal"]))
            for call in delta.get("tool_calls") or []:
                slot = self.tool_calls.setdefault(
                    int(call.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                )
                function = call.get("function") or {}
                slot["id"] = slot["id"] or str(call.get("id") or "")
                slot["name"] = slot["name"] or str(function.get("name") or "")
                slot["arguments"] += str(function.get("arguments") or "")

    def outcome(self) -> _Outcome:
        if self.usage is None:
            logger.warning(
                "chat completion stream %s reported no usage; recorded without tokens", self.id
            )
        message = {
            "role": "assistant",
            "content": "".join(self.text) or None,
            "refusal": "".join(self.refusal) or None,
            "tool_calls": [
                {
                    "id": slot["id"],
                    "type": "function",
                    "function": {"name": slot["name"], "arguments": slot["arguments"]},
                }
                for _, slot in sorted(self.tool_calls.items())
            ],
        }
        return _Outcome(
            chat_message(message) or {"role": "assistant", "content": []},
            completion_usage(self.usage, model=self.model, message_id=self.id),
        )


def _hidden(chunk: Any, call: _Call) -> bool:
    """The usage-only last chunk the agent did not ask for."""
    return (
        call.hide_usage_chunk
        and not getattr(chunk, "choices", None)
        and getattr(chunk, "usage", None) is not None
    )


def _observe_chat_stream(stream: Any, call: _Call, on_done: Callable[[_Outcome], None]) -> Any:
    """Let ``stream`` (the SDK's ``Stream``) record the call once it has been read to the end."""
    inner = stream._iterator
    chunks = _ChunkAccumulator()

    def observed() -> Iterator[Any]:
        for chunk in inner:
            chunks.add(chunk)
            if not _hidden(chunk, call):
                yield chunk
        on_done(chunks.outcome())

    stream._iterator = observed()
    return stream


def _observe_response_stream(stream: Any, on_done: Callable[[_Outcome], None]) -> Any:
    inner = stream._iterator

    def observed() -> Iterator[Any]:
        for event in inner:
            if getattr(event, "type", "") in _FINAL_EVENTS:
                on_done(_response_outcome(event.response))
            yield event

    stream._iterator = observed()
    return stream


def _observe_async_chat_stream(
    stream: Any, call: _Call, on_done: Callable[[_Outcome], Awaitable[None]]
) -> Any:
    inner = stream._iterator
    chunks = _ChunkAccumulator()

    async def observed() -> AsyncIterator[Any]:
        async for chunk in inner:
            chunks.add(chunk)
            if not _hidden(chunk, call):
                yield chunk
        await on_done(chunks.outcome())

    stream._iterator = observed()
    return stream


def _observe_async_response_stream(
    stream: Any, on_done: Callable[[_Outcome], Awaitable[None]]
) -> Any:
    inner = stream._iterator

    async def observed() -> AsyncIterator[Any]:
        async for event in inner:
            if getattr(event, "type", "") in _FINAL_EVENTS:
                await on_done(_response_outcome(event.response))
            yield event

    stream._iterator = observed()
    return stream


@dataclass(frozen=True)
class _Api:
    """What the wrapper needs to know of one API (Chat Completions, Responses): how a call
    is read, how its answer (whole, as events, or from a stream helper) becomes a record."""

    call: Callable[..., _Call]
    outcome: Callable[[Any], _Outcome]
    events_outcome: Callable[[list[Any]], _Outcome]
    observe: Callable[[Any, _Call, Callable[[_Outcome], None]], Any]
    aobserve: Callable[[Any, _Call, Callable[[_Outcome], Awaitable[None]]], Any]
    final: str  # the stream helper's method that answers the whole result

    def from_body(self, body: bytes, *, streamed: bool) -> _Outcome:
        """A ``with_streaming_response`` body as what the call records."""
        if streamed:
            return self.events_outcome(_recording.sse_data(body))
        try:
            return self.outcome(json.loads(body or b"{}"))
        except ValueError:
            return self.outcome({})


CHAT = _Api(
    _chat_call,
    _completion_outcome,
    _chat_events_outcome,
    _observe_chat_stream,
    _observe_async_chat_stream,
    "get_final_completion",
)
RESPONSES = _Api(
    _responses_call,
    _response_outcome,
    _response_events_outcome,
    lambda stream, call, on_done: _observe_response_stream(stream, on_done),
    lambda stream, call, on_done: _observe_async_response_stream(stream, on_done),
    "get_final_response",
)


# -- the wrapped resources -------------------------------------------------------------------


class _Passthrough:
    """An SDK resource whose other attributes are its own."""

    def __init__(self, inner: Any, recorder: _recording.Recorder, api: _Api) -> None:
        self._inner = inner
        self._recorder = recorder
        self._api = api

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Resource(_Passthrough):
    """``chat.completions`` or ``responses`` of a sync SDK client: every way of sending a
    call (``create``, ``parse``, ``stream``, and the same under ``with_raw_response`` and
    ``with_streaming_response``) is checked before and recorded after."""

    def _check(self, call: _Call) -> _Call:
        recorder = self._recorder
        call.frame_id = recorder.prepare(
            estimate_tokens(call.sent), call.canon, call.add_pack, call.window(recorder.history)
        )
        return call

    def _record(self, call: _Call, outcome: _Outcome) -> None:
        common, new = _new_part(self._recorder.history, call, outcome.reply)
        self._recorder.record(common, new, new, outcome.usage, call.frame_id)

    def _answered(self, call: _Call, result: Any, *, streamed: bool) -> Any:
        if streamed:
            return self._api.observe(result, call, lambda o: self._record(call, o))
        self._record(call, self._api.outcome(result))
        return result

    def _send(self, method: str, kwargs: dict[str, Any]) -> Any:
        call = self._check(self._api.call(kwargs))
        result = getattr(self._inner, method)(**call.sent)
        return self._answered(call, result, streamed=bool(given(kwargs, "stream")))

    def create(self, **kwargs: Any) -> Any:
        return self._send("create", kwargs)

    def parse(self, **kwargs: Any) -> Any:
        return self._send("parse", kwargs)

    def stream(self, **kwargs: Any) -> Any:
        """The SDK's stream helper (a context manager), recorded when its block ends
        cleanly; ``response_id=`` (reading a background response again) is the SDK's own."""
        if given(kwargs, "response_id"):
            return self._inner.stream(**kwargs)
        call = self._check(self._api.call(kwargs, streams=True))
        api = self._api
        return _RecordingStreamManager(
            self._inner.stream(**call.sent),
            lambda stream: self._record(call, api.outcome(getattr(stream, api.final)())),
        )

    @property
    def with_raw_response(self) -> _RawResponses:
        return _RawResponses(self)

    @property
    def with_streaming_response(self) -> _StreamingResponses:
        return _StreamingResponses(self)


class _RawResponses:
    """``with_raw_response``: the SDK's raw answer, whose parsed result is recorded (a
    stream once read to the end)."""

    def __init__(self, resource: _Resource) -> None:
        self._resource = resource
        self._inner = resource._inner.with_raw_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _send(self, method: str, kwargs: dict[str, Any]) -> Any:
        resource = self._resource
        call = resource._check(resource._api.call(kwargs))
        raw = getattr(self._inner, method)(**call.sent)
        resource._answered(call, raw.parse(), streamed=bool(given(kwargs, "stream")))
        return raw  # its parse() answers the same (observed) object again

    def create(self, **kwargs: Any) -> Any:
        return self._send("create", kwargs)

    def parse(self, **kwargs: Any) -> Any:
        return self._send("parse", kwargs)


class _StreamingResponses:
    """``with_streaming_response``: the SDK's context manager over the undecoded answer;
    the body, however the agent reads it, is recorded when the block ends cleanly (what
    the agent did not read is read then)."""

    def __init__(self, resource: _Resource) -> None:
        self._resource = resource
        self._inner = resource._inner.with_streaming_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _send(self, method: str, kwargs: dict[str, Any]) -> Any:
        resource = self._resource
        call = resource._check(resource._api.call(kwargs))
        streamed = bool(given(kwargs, "stream"))
        return _recording.TappedResponse(
            getattr(self._inner, method)(**call.sent),
            lambda body: resource._record(call, resource._api.from_body(body, streamed=streamed)),
        )

    def create(self, **kwargs: Any) -> Any:
        return self._send("create", kwargs)

    def parse(self, **kwargs: Any) -> Any:
        return self._send("parse", kwargs)


class _RecordingStreamManager:
    """The SDK's stream manager; ``on_done(stream)`` when its block ends cleanly."""

    def __init__(self, inner: Any, on_done: Callable[[Any], None]) -> None:
        self._inner = inner
        self._on_done = on_done
        self._stream: Any = None

    def __enter__(self) -> Any:
        self._stream = self._inner.__enter__()
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            if exc_type is None and self._stream is not None:
                self._on_done(self._stream)
        finally:
            self._inner.__exit__(exc_type, exc, tb)


class _AsyncResource(_Passthrough):
    """The same for an async SDK client."""

    _recorder: _recording.AsyncRecorder

    async def _check(self, call: _Call) -> _Call:
        recorder = self._recorder
        call.frame_id = await recorder.prepare(
            estimate_tokens(call.sent), call.canon, call.add_pack, call.window(recorder.history)
        )
        return call

    async def _record(self, call: _Call, outcome: _Outcome) -> None:
        common, new = _new_part(self._recorder.history, call, outcome.reply)
        await self._recorder.record(common, new, new, outcome.usage, call.frame_id)

    async def _answered(self, call: _Call, result: Any, *, streamed: bool) -> Any:
        if streamed:
            return self._api.aobserve(result, call, lambda o: self._record(call, o))
        await self._record(call, self._api.outcome(result))
        return result

    async def _send(self, method: str, kwargs: dict[str, Any]) -> Any:
        call = await self._check(self._api.call(kwargs))
        result = await getattr(self._inner, method)(**call.sent)
        return await self._answered(call, result, streamed=bool(given(kwargs, "stream")))

    async def create(self, **kwargs: Any) -> Any:
        return await self._send("create", kwargs)

    async def parse(self, **kwargs: Any) -> Any:
        return await self._send("parse", kwargs)

    def stream(self, **kwargs: Any) -> Any:
        """Like the SDK's: returns the manager at once; the checks run on ``async with``."""
        if given(kwargs, "response_id"):
            return self._inner.stream(**kwargs)
        api = self._api

        async def opened() -> tuple[Any, Callable[[Any], Awaitable[None]]]:
            call = await self._check(api.call(kwargs, streams=True))

            async def done(stream: Any) -> None:
                await self._record(call, api.outcome(await getattr(stream, api.final)()))

            return self._inner.stream(**call.sent), done

        return _recording.DeferredManager(opened, tapped=False)

    @property
    def with_raw_response(self) -> _AsyncRawResponses:
        return _AsyncRawResponses(self)

    @property
    def with_streaming_response(self) -> _AsyncStreamingResponses:
        return _AsyncStreamingResponses(self)


class _AsyncRawResponses:
    def __init__(self, resource: _AsyncResource) -> None:
        self._resource = resource
        self._inner = resource._inner.with_raw_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _send(self, method: str, kwargs: dict[str, Any]) -> Any:
        resource = self._resource
        call = await resource._check(resource._api.call(kwargs))
        raw = await getattr(self._inner, method)(**call.sent)
        parsed = raw.parse()
        if inspect.isawaitable(parsed):
            parsed = await parsed
        await resource._answered(call, parsed, streamed=bool(given(kwargs, "stream")))
        return raw

    async def create(self, **kwargs: Any) -> Any:
        return await self._send("create", kwargs)

    async def parse(self, **kwargs: Any) -> Any:
        return await self._send("parse", kwargs)


class _AsyncStreamingResponses:
    def __init__(self, resource: _AsyncResource) -> None:
        self._resource = resource
        self._inner = resource._inner.with_streaming_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _send(self, method: str, kwargs: dict[str, Any]) -> Any:
        resource = self._resource
        streamed = bool(given(kwargs, "stream"))

        async def opened() -> tuple[Any, Callable[[bytes], Awaitable[None]]]:
            call = await resource._check(resource._api.call(kwargs))

            async def done(body: bytes) -> None:
                await resource._record(call, resource._api.from_body(body, streamed=streamed))

            return getattr(self._inner, method)(**call.sent), done

        return _recording.DeferredManager(opened, tapped=True)

    def create(self, **kwargs: Any) -> Any:
        return self._send("create", kwargs)

    def parse(self, **kwargs: Any) -> Any:
        return self._send("parse", kwargs)


class _Chat:
    """``client.chat`` (and ``client.beta.chat``) with ``completions`` wrapped."""

    def __init__(self, inner: Any, completions: Any) -> None:
        self._inner = inner
        self.completions = completions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Beta:
    """``client.beta`` with ``chat.completions`` wrapped (``beta.chat.completions.parse``
    and ``.stream``, the SDK's older home of the helpers)."""

    def __init__(self, inner: Any, chat: _Chat) -> None:
        self._inner = inner
        self.chat = chat

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class WrappedOpenAI:
    """The SDK client with ``chat.completions``, ``beta.chat.completions`` and
    ``responses`` wrapped; any other attribute is the SDK's own. ``contextops`` is the
    recorder (its ``history`` and ``last_estimate``)."""

    def __init__(
        self,
        inner: Any,
        recorder: _recording.Recorder,
        chat: _Chat,
        responses: Any,
        beta: _Beta | None = None,
    ) -> None:
        self._inner = inner
        self.contextops = recorder
        self.chat = chat
        self.responses = responses
        if beta is not None:
            self.beta = beta

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"<contextops wrap of {self._inner!r} for session {self.contextops.session_id}>"


def wrap(
    openai_client: Any,
    ops: Any,
    session: Any,
    *,
    frame: Any = None,
    context_pack: int | None = None,
    record_tool_results: bool = False,
) -> WrappedOpenAI:
    """Wrap ``openai.OpenAI`` (with a :class:`Client`) or ``openai.AsyncOpenAI`` (with an
    :class:`AsyncClient`) so each Chat Completions and Responses call is checked against,
    and recorded in, ``session``. ``frame`` pins the paying frame; by default it is the
    innermost ``ops.frame`` block of the session, else the session's top frame.

    ``context_pack=N`` adds a context pack of N tokens (at least the server's 500) to
    each call's instructions; ``record_tool_results=True`` adds each tool output sent as
    a ``tool_result`` handle of the paying frame (see the module's documentation)."""
    checklist = _recording.Checklist(
        context_pack=context_pack, record_tool_results=record_tool_results
    )
    is_async = isinstance(ops, AsyncClient)
    if is_async != _is_async_sdk(openai_client):
        raise TypeError(
            "Pair openai.OpenAI with contextops Client, and openai.AsyncOpenAI with AsyncClient."
        )
    if is_async:
        recorder: _recording.Recorder = _recording.AsyncRecorder(ops, session, frame, checklist)
        resource: type[_Passthrough] = _AsyncResource
    else:
        recorder = _recording.Recorder(ops, session, frame, checklist)
        resource = _Resource
    chat = openai_client.chat
    # beta.chat.completions is the SDK's other handle on the same endpoint: one recorder.
    beta_chat = getattr(getattr(openai_client, "beta", None), "chat", None)
    beta = (
        _Beta(
            openai_client.beta,
            _Chat(beta_chat, resource(beta_chat.completions, recorder, CHAT)),
        )
        if beta_chat is not None
        else None
    )
    return WrappedOpenAI(
        openai_client,
        recorder,
        _Chat(chat, resource(chat.completions, recorder, CHAT)),
        resource(openai_client.responses, recorder, RESPONSES),
        beta,
    )


def _is_async_sdk(client: Any) -> bool:
    """``openai.AsyncOpenAI`` (``AsyncAzureOpenAI``, a subclass), or a client whose
    ``chat.completions.create`` is a coroutine function."""
    if any(cls.__name__.startswith("Async") for cls in type(client).__mro__):
        return True
    create = getattr(getattr(getattr(client, "chat", None), "completions", None), "create", None)
    return inspect.iscoroutinefunction(create)


__all__ = [
    "ContextopsError",
    "FrameNotActive",
    "InsufficientTokens",
    "WrappedOpenAI",
    "chat_messages",
    "estimate_tokens",
    "response_messages",
    "wrap",
]
