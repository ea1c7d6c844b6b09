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

``gpt.chat.completions.create`` / ``.parse`` and ``gpt.responses.create`` / ``.parse``
take and return exactly what the SDK's do (everything else, ``with_raw_response`` and the
``stream()`` helpers included, passes straight through to the SDK client, unrecorded),
and also:

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
   usage-only chunk reaches the agent only when it asked for it.

The integration checklist's two optional steps (seed 000 §7) work as in the Anthropic
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
from collections.abc import Awaitable, Callable, Iterable
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


def _chat_call(kwargs: dict[str, Any]) -> _Call:
    sent = dict(kwargs)
    hide = False
    if given(kwargs, "stream"):
        options = dict(given(kwargs, "stream_options") or {})
        hide = options.get("include_usage") is not True
        sent["stream_options"] = {**options, "include_usage": True}
    messages = given(kwargs, "messages")
    if messages is not None and not isinstance(messages, list):
        sent["messages"] = messages = list(messages)  # read once here, sent as read
    return _Call(sent, chat_messages(messages or []), continues=False, hide_usage_chunk=hide)


def _responses_call(kwargs: dict[str, Any]) -> _Call:
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
    choices = getattr(completion, "choices", None) or []
    message = choices[0].message if choices else {"role": "assistant", "content": None}
    return _Outcome(
        chat_message(message) or {"role": "assistant", "content": []},
        completion_usage(
            getattr(completion, "usage", None),
            model=getattr(completion, "model", ""),
            message_id=getattr(completion, "id", ""),
        ),
    )


def _response_outcome(response: Any) -> _Outcome:
    return _Outcome(
        _reply(response_messages(getattr(response, "output", None) or [])),
        response_usage(
            getattr(response, "usage", None),
            model=getattr(response, "model", ""),
            message_id=getattr(response, "id", ""),
        ),
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

    def observed():
        for chunk in inner:
            chunks.add(chunk)
            if not _hidden(chunk, call):
                yield chunk
        on_done(chunks.outcome())

    stream._iterator = observed()
    return stream


def _observe_response_stream(stream: Any, on_done: Callable[[_Outcome], None]) -> Any:
    inner = stream._iterator

    def observed():
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

    async def observed():
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

    async def observed():
        async for event in inner:
            if getattr(event, "type", "") in _FINAL_EVENTS:
                await on_done(_response_outcome(event.response))
            yield event

    stream._iterator = observed()
    return stream


# -- the wrapped resources -------------------------------------------------------------------


class _Passthrough:
    """An SDK resource whose other attributes are its own."""

    def __init__(self, inner: Any, recorder: _recording.Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _check(self, call: _Call) -> _Call:
        recorder = self._recorder
        call.frame_id = recorder.prepare(
            estimate_tokens(call.sent), call.canon, call.add_pack, call.window(recorder.history)
        )
        return call

    def _record(self, call: _Call, outcome: _Outcome) -> None:
        common, new = _new_part(self._recorder.history, call, outcome.reply)
        self._recorder.record(common, new, new, outcome.usage, call.frame_id)


class _ChatCompletions(_Passthrough):
    def create(self, **kwargs: Any) -> Any:
        call = self._check(_chat_call(kwargs))
        result = self._inner.create(**call.sent)
        if given(kwargs, "stream"):
            return _observe_chat_stream(result, call, lambda o: self._record(call, o))
        self._record(call, _completion_outcome(result))
        return result

    def parse(self, **kwargs: Any) -> Any:
        call = self._check(_chat_call(kwargs))
        result = self._inner.parse(**call.sent)
        self._record(call, _completion_outcome(result))
        return result


class _Responses(_Passthrough):
    def create(self, **kwargs: Any) -> Any:
        call = self._check(_responses_call(kwargs))
        result = self._inner.create(**call.sent)
        if given(kwargs, "stream"):
            return _observe_response_stream(result, lambda o: self._record(call, o))
        self._record(call, _response_outcome(result))
        return result

    def parse(self, **kwargs: Any) -> Any:
        call = self._check(_responses_call(kwargs))
        result = self._inner.parse(**call.sent)
        self._record(call, _response_outcome(result))
        return result


class _AsyncPassthrough(_Passthrough):
    _recorder: _recording.AsyncRecorder

    async def _check(self, call: _Call) -> _Call:  # type: ignore[override]
        recorder = self._recorder
        call.frame_id = await recorder.prepare(
            estimate_tokens(call.sent), call.canon, call.add_pack, call.window(recorder.history)
        )
        return call

    async def _record(self, call: _Call, outcome: _Outcome) -> None:  # type: ignore[override]
        common, new = _new_part(self._recorder.history, call, outcome.reply)
        await self._recorder.record(common, new, new, outcome.usage, call.frame_id)


class _AsyncChatCompletions(_AsyncPassthrough):
    async def create(self, **kwargs: Any) -> Any:
        call = await self._check(_chat_call(kwargs))
        result = await self._inner.create(**call.sent)
        if given(kwargs, "stream"):
            return _observe_async_chat_stream(result, call, lambda o: self._record(call, o))
        await self._record(call, _completion_outcome(result))
        return result

    async def parse(self, **kwargs: Any) -> Any:
        call = await self._check(_chat_call(kwargs))
        result = await self._inner.parse(**call.sent)
        await self._record(call, _completion_outcome(result))
        return result


class _AsyncResponses(_AsyncPassthrough):
    async def create(self, **kwargs: Any) -> Any:
        call = await self._check(_responses_call(kwargs))
        result = await self._inner.create(**call.sent)
        if given(kwargs, "stream"):
            return _observe_async_response_stream(result, lambda o: self._record(call, o))
        await self._record(call, _response_outcome(result))
        return result

    async def parse(self, **kwargs: Any) -> Any:
        call = await self._check(_responses_call(kwargs))
        result = await self._inner.parse(**call.sent)
        await self._record(call, _response_outcome(result))
        return result


class _Chat:
    """``client.chat`` with ``completions`` wrapped."""

    def __init__(self, inner: Any, completions: Any) -> None:
        self._inner = inner
        self.completions = completions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class WrappedOpenAI:
    """The SDK client with ``chat.completions`` and ``responses`` wrapped; any other
    attribute is the SDK's own. ``contextops`` is the recorder (its ``history`` and
    ``last_estimate``)."""

    def __init__(
        self, inner: Any, recorder: _recording.Recorder, chat: _Chat, responses: Any
    ) -> None:
        self._inner = inner
        self.contextops = recorder
        self.chat = chat
        self.responses = responses

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
    chat = openai_client.chat
    if is_async:
        recorder: _recording.Recorder = _recording.AsyncRecorder(ops, session, frame, checklist)
        completions: Any = _AsyncChatCompletions(chat.completions, recorder)
        responses: Any = _AsyncResponses(openai_client.responses, recorder)
    else:
        recorder = _recording.Recorder(ops, session, frame, checklist)
        completions = _ChatCompletions(chat.completions, recorder)
        responses = _Responses(openai_client.responses, recorder)
    return WrappedOpenAI(openai_client, recorder, _Chat(chat, completions), responses)


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
