"""What the SDK wrappers (``anthropic``, ``openai``) share: which frame pays for a model
call, the refusal of a call that frame cannot pay for, and the recording of the call.

A wrapper converts its SDK's messages to the Anthropic Messages shape that
``POST /sessions/{id}/messages`` takes and hands them here; nothing in this module knows
an SDK, and it imports none (``httpx`` and the standard library only, through the client).

- :func:`estimate` is the one estimate rule: the call's output cap plus a quarter of its
  prompt's JSON text.
- :class:`Recorder` (and :class:`AsyncRecorder`, for an :class:`AsyncClient`) picks the
  paying frame (the pinned one, else the innermost ``ops.frame`` block of the session in
  this thread or task, else the session's top frame), refuses before anything is sent
  (:func:`refuse_unpayable`), and records a call's new messages and usage on that frame
  in one request, keeping :class:`History` in step with the server's turns.
- The integration checklist (docs/concepts.md#integration-checklist), each step on by a flag of ``wrap``:
  ``context_pack=N`` assembles a context pack of N tokens for the paying frame before
  each call (:meth:`Recorder.prepare`), which the wrapper adds to the call's system
  prompt as :func:`render_pack` lays it out; ``record_tool_results=True`` adds each
  tool result the call sends as a ``tool_result`` handle of the paying frame, once per
  tool call id (:func:`tool_results`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ._core import FINISHED_COMPACTION, Frame, _id, current_frame
from .errors import FrameNotActive, InsufficientTokens, NotFound

logger = logging.getLogger("contextops_client")

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
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


def given(kwargs: dict[str, Any], name: str) -> Any:
    """``kwargs[name]``, or None when it is absent or the SDK's "not given" marker
    (``NOT_GIVEN`` / ``omit``, recognised by type name: no SDK is imported here)."""
    value = kwargs.get(name)
    if type(value).__name__ in ("NotGiven", "Omit"):
        return None
    return value


def estimate(max_tokens: Any, prompt: Any) -> int:
    """What a call may spend: its output cap plus a quarter of its prompt's JSON text."""
    text = json.dumps(jsonable(prompt), ensure_ascii=False)
    return int(max_tokens or 0) + len(text) // 4


def usage_figures(
    *,
    input_tokens: Any = 0,
    output_tokens: Any = 0,
    cache_creation_input_tokens: Any = 0,
    cache_read_input_tokens: Any = 0,
    model: Any = "",
    message_id: Any = "",
) -> dict[str, Any]:
    """The usage body ``POST /sessions/{id}/messages`` takes, within its limits."""
    return {
        "input_tokens": max(0, int(input_tokens or 0)),
        "output_tokens": max(0, int(output_tokens or 0)),
        "cache_creation_input_tokens": max(0, int(cache_creation_input_tokens or 0)),
        "cache_read_input_tokens": max(0, int(cache_read_input_tokens or 0)),
        "model": str(model or "")[:120],
        "message_id": str(message_id or "")[:200],
    }


class History:
    """What a wrapper knows of the session's conversation, in canonical (Anthropic) form.

    ``recorded`` are the messages sent to contextops so far, ``turn_of`` the turn index
    each one went into, replaying the server's grouping: a user message with text opens a
    turn, a tool result joins the turn of its ``tool_use``, the assistant joins the
    current turn.
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


def refuse_unpayable(frame: Frame, session_id: str, estimate: int) -> None:
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


# -- the integration checklist: context packs and tool results (pure) ------------------------

PACK_OPEN = "<contextops_context>"
PACK_CLOSE = "</contextops_context>"
# Limits of the API bodies these steps send (``ContextPackIn``, ``HandleIn``).
QUERY_MAX = 2000
EXCLUDE_MAX = 1000
HANDLE_CONTENT_MAX = 1_000_000
CATEGORY_MAX = 40
TOOL_CALL_ID_MAX = 200


def _blocks_of(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def content_text(content: Any) -> str:
    """Message or tool result content as plain text: its text blocks, one per line; any
    other block (an image, a document) as its type in brackets."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            parts.append(str(block.get("text", "")) if kind == "text" else f"[{kind or 'block'}]")
    return "\n".join(p for p in parts if p)


def last_user_text(messages: Iterable[dict[str, Any]]) -> str:
    """The text of the last user message that has any (tool results are not text): the
    ``query`` a context pack ranks facts and working set by; its last ``QUERY_MAX``
    characters, where a long message usually asks its question."""
    for message in reversed(list(messages)):
        if message.get("role") != "user":
            continue
        text = "\n".join(
            str(b.get("text", ""))
            for b in _blocks_of(message)
            if isinstance(b, dict) and b.get("type") == "text"
        ).strip()
        if text:
            return text[-QUERY_MAX:]
    return ""


@dataclass(frozen=True)
class ToolResult:
    """A ``tool_result`` block of a conversation, as a handle records it."""

    tool_use_id: str
    text: str
    name: str
    is_error: bool


def tool_names(messages: Iterable[dict[str, Any]]) -> dict[str, str]:
    """The tool name of each ``tool_use`` id in ``messages``."""
    return {
        str(b.get("id")): str(b.get("name") or "")
        for m in messages
        if m.get("role") == "assistant"
        for b in _blocks_of(m)
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }


def tool_results(messages: Iterable[dict[str, Any]], names: dict[str, str]) -> list[ToolResult]:
    """The ``tool_result`` blocks of ``messages`` (canonical form) in order, with their
    tool's name from ``names`` ("" when the ``tool_use`` is not known)."""
    out = []
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in _blocks_of(message):
            if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                continue
            tool_use_id = str(block.get("tool_use_id") or "")
            out.append(
                ToolResult(
                    tool_use_id=tool_use_id,
                    text=content_text(block.get("content")),
                    name=names.get(tool_use_id, ""),
                    is_error=bool(block.get("is_error")),
                )
            )
    return out


def render_pack(pack: dict[str, Any]) -> str:
    """A context pack as the text a wrapper adds to a call's system prompt: between
    ``<contextops_context>`` tags, one Markdown section per part the pack holds, in the
    pack's order, empty parts left out::

        <contextops_context>
        Working context from contextops for this call (1234 of 4000 tokens).

        ## Brief
        User: Ada (u-1); authority: employee
        Now: 2025-06-01 09:30 (Europe/Paris)

        ## Frames (root first; the last is the current one)
        - Research TLS (waiting)
          - Compare cipher suites (active)

        ## Facts
        - constraint: export_policy: no keys leave the EU
        - tls.min_version: 1.2

        ## Working set
        - draft: Section 2 is done

        ## Context
        ### tool_result · medium
        ...the handle's content (or its summary, as the pack chose)...
        </contextops_context>
    """
    summary = pack.get("token_summary") or {}
    sections = [
        "Working context from contextops for this call "
        f"({summary.get('used', 0)} of {summary.get('budget', 0)} tokens)."
    ]
    brief = str(pack.get("brief_context") or "").strip()
    if brief:
        sections.append("## Brief\n" + brief)
    crumbs = list(pack.get("breadcrumbs") or [])
    if crumbs:
        top = min(int(c.get("depth") or 0) for c in crumbs)
        lines = [
            "  " * (int(c.get("depth") or 0) - top)
            + f"- {c.get('goal', '')} ({c.get('status', '')})"
            for c in crumbs
        ]
        sections.append("## Frames (root first; the last is the current one)\n" + "\n".join(lines))
    facts = [
        "- " + ("constraint: " if f.get("is_constraint") else "") + str(f.get("text", ""))
        for f in pack.get("facts") or []
    ]
    if facts:
        sections.append("## Facts\n" + "\n".join(facts))
    working = ["- " + str(w.get("text", "")) for w in pack.get("working_set") or []]
    if working:
        sections.append("## Working set\n" + "\n".join(working))
    segments = [
        f"### {s.get('kind', '')} · {s.get('priority', '')}"
        + (f" ({s['form']})" if s.get("form") not in (None, "", "full") else "")
        + "\n"
        + str(s.get("content", ""))
        for s in pack.get("segments") or []
    ]
    if segments:
        sections.append("## Context\n" + "\n\n".join(segments))
    return PACK_OPEN + "\n" + "\n\n".join(sections) + "\n" + PACK_CLOSE


def _handle_body(result: ToolResult) -> dict[str, Any]:
    """``POST /frames/{id}/handles`` for a tool result, within the body's limits."""
    return {
        "kind": "tool_result",
        "content": result.text[:HANDLE_CONTENT_MAX],
        "priority": "medium",
        "category": result.name[:CATEGORY_MAX],
        "tool_call_id": result.tool_use_id[:TOOL_CALL_ID_MAX],
    }


# A wrapper's hook that puts a pack's text into the call's arguments (its system prompt)
# and answers the call's estimate with it.
AddPack = Callable[[str], int]


@dataclass
class Checklist:
    """The steps of the integration checklist (docs/concepts.md#integration-checklist) a
    wrapper takes for each call, off unless asked for."""

    context_pack: int | None = None
    record_tool_results: bool = False

    def __post_init__(self) -> None:
        budget = self.context_pack
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise TypeError("context_pack is a budget in tokens (an int), or None for no pack.")
        if budget is not None and budget <= 0:
            raise ValueError("context_pack must be a positive number of tokens.")


# -- bodies read through ``with_streaming_response`` ----------------------------------------


def sse_data(body: bytes) -> list[Any]:
    """The JSON ``data`` of each server-sent event in ``body`` (``[DONE]`` left out)."""
    out = []
    for block in body.decode("utf-8", errors="replace").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")
        )
        if data and data != "[DONE]":
            try:
                out.append(json.loads(data))
            except ValueError:
                continue
    return out


class BodyTap:
    """Keeps a copy of the decoded body an SDK's ``with_streaming_response`` reads, however
    the agent reads it (``parse()``, ``read()``, ``iter_lines()``, an event stream), so the
    call can be recorded from it. It taps ``http_response.iter_bytes`` (``aiter_bytes``),
    the one method every way of reading goes through, of the httpx response."""

    def __init__(self, http_response: Any, *, is_async: bool) -> None:
        self.parts: list[bytes] = []
        self.done = False
        self._live: Any = None
        if is_async:
            self._inner = http_response.aiter_bytes
            http_response.aiter_bytes = self._aiter_bytes
        else:
            self._inner = http_response.iter_bytes
            http_response.iter_bytes = self._iter_bytes

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)

    def _iter_bytes(self, chunk_size: int | None = None) -> Any:
        self._live = self._inner(chunk_size)
        for part in self._live:
            self.parts.append(part)
            yield part
        self.done = True

    async def _aiter_bytes(self, chunk_size: int | None = None) -> Any:
        self._live = self._inner(chunk_size)
        async for part in self._live:
            self.parts.append(part)
            yield part
        self.done = True

    def drain(self) -> bytes:
        """The whole body: what is left of it read now (the agent left the block early)."""
        if not self.done:
            if self._live is None:
                for _ in self._iter_bytes():
                    pass
            else:
                self.parts.extend(self._live)
                self.done = True
        return self.body

    async def adrain(self) -> bytes:
        if not self.done:
            if self._live is None:
                async for _ in self._aiter_bytes():
                    pass
            else:
                self.parts.extend([part async for part in self._live])
                self.done = True
        return self.body


class TappedResponse:
    """The SDK's ``with_streaming_response`` manager; ``on_done(body)`` with the whole
    decoded body when its block ends cleanly."""

    def __init__(self, inner: Any, on_done: Callable[[bytes], None]) -> None:
        self._inner = inner
        self._on_done = on_done
        self._tap: BodyTap | None = None

    def __enter__(self) -> Any:
        response = self._inner.__enter__()
        self._tap = BodyTap(response.http_response, is_async=False)
        return response

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            if exc_type is None and self._tap is not None:
                self._on_done(self._tap.drain())
        finally:
            self._inner.__exit__(exc_type, exc, tb)


class DeferredManager:
    """An async SDK manager opened on ``async with`` after the checks (``opened`` answers
    it and what to call with the stream, or with the body when ``tapped``, once the block
    ends cleanly)."""

    def __init__(self, opened: Callable[[], Awaitable[tuple[Any, Any]]], *, tapped: bool) -> None:
        self._opened = opened
        self._tapped = tapped
        self._inner: Any = None
        self._done: Any = None
        self._entered: Any = None
        self._tap: BodyTap | None = None

    async def __aenter__(self) -> Any:
        self._inner, self._done = await self._opened()
        self._entered = await self._inner.__aenter__()
        if self._tapped:
            self._tap = BodyTap(self._entered.http_response, is_async=True)
        return self._entered

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            if exc_type is None and self._entered is not None:
                await self._done(await self._tap.adrain() if self._tap else self._entered)
        finally:
            await self._inner.__aexit__(exc_type, exc, tb)


# -- the recorder ----------------------------------------------------------------------------


class Recorder:
    """The contextops side of a wrapped SDK client (sync): budget check, recording,
    compaction state.

    One wrapped client follows one conversation of one session; calls of that
    conversation are sequential (each sends the history the previous one extended).

    The frame a call is checked against is the frame it is charged to: :meth:`check`
    returns its id and :meth:`record` names it as ``frame_id`` when it posts the call
    (messages and usage, one request) to ``POST /sessions/{id}/messages``; without it the
    server would charge the session's top frame, which need not be the checked one (a
    pinned ``frame=``, or sibling frames open in concurrent tasks).
    """

    def __init__(
        self, ops: Any, session: Any, frame: Any = None, checklist: Checklist | None = None
    ) -> None:
        self.ops = ops
        self.session = session
        self.session_id = _id(session)
        self.fixed_frame = frame
        self.checklist = checklist or Checklist()
        self.history = History()
        self.last_estimate = 0
        # The last context pack a call carried (``context_pack=``), as the API answered it.
        self.last_pack: dict[str, Any] | None = None
        # The handle each tool result became (``record_tool_results=``), by tool_use id.
        self.tool_handles: dict[str, str] = {}
        self._list_endpoint = True
        self._sent_at: datetime | None = None
        self._sent_clock = 0.0

    # the call's timing
    def sent(self) -> None:
        """Note that the call leaves now: its ``started_at`` and the start of its latency."""
        self._sent_at = datetime.now(UTC)
        self._sent_clock = time.perf_counter()

    def timed(self, usage: dict[str, Any]) -> dict[str, Any]:
        """``usage`` with the call's ``started_at`` and ``latency_ms`` (from :meth:`sent`
        to now: the whole answer, a stream's included) unless it carries them already."""
        if self._sent_at is None:
            return usage
        latency = round((time.perf_counter() - self._sent_clock) * 1000)
        timed = {"started_at": self._sent_at.isoformat(), "latency_ms": max(0, latency), **usage}
        self._sent_at = None
        return timed

    # which frame pays
    def frame_id(self) -> str | None:
        """The pinned frame, else the innermost ``ops.frame`` block of the session in this
        thread or task, else the session's top frame; None when the session has none."""
        if self.fixed_frame is not None:
            return _id(self.fixed_frame)
        block = current_frame(self.session_id)
        if block is not None:
            return block.id
        top: str | None = self.ops.session_get(self.session_id).top_frame_id
        return top

    def check(self, estimate: int) -> str | None:
        """The id of the frame that pays for a call estimated at ``estimate`` tokens (None
        when the session has no frame), after making sure it can: :class:`NotFound` when it
        is not a frame of the session, :class:`FrameNotActive` or
        :class:`InsufficientTokens` when it cannot pay."""
        self.last_estimate = estimate
        frame_id = self.frame_id()
        if frame_id is not None:
            refuse_unpayable(self.ops.frame_get(frame_id), self.session_id, estimate)
        return frame_id

    def prepare(
        self,
        estimate: int,
        messages: list[dict[str, Any]],
        add_pack: AddPack,
        in_window: list[dict[str, Any]] | None = None,
    ) -> str | None:
        """Everything before a call is sent; answers the id of the frame that pays (None
        when the session has no frame).

        ``messages`` are the call's conversation as sent, in canonical form; ``estimate``
        the call's estimate without a pack. In order: the paying frame is checked as
        :meth:`check` does; with ``context_pack`` a pack of that budget is assembled for
        it (``query`` the last user text; tool results still in ``in_window``, by default
        ``messages``, excluded: the model has them already), ``add_pack`` puts its text
        into the call and answers the new estimate, which the frame is checked against
        again; with ``record_tool_results`` each tool result of ``messages`` not added
        yet becomes a handle of the frame. Any refusal (the frame's, or the server's
        answer to the pack) raises before the call is sent, and before any handle is
        added."""
        self.last_estimate = estimate
        frame_id = self.frame_id()
        frame = self.ops.frame_get(frame_id) if frame_id is not None else None
        if frame is not None:
            refuse_unpayable(frame, self.session_id, estimate)
        if self.checklist.context_pack is not None:
            pack = self.ops.context_pack(
                self.session_id, **self._pack_args(frame_id, messages, in_window)
            )
            self.last_estimate = estimate = add_pack(render_pack(pack))
            self.last_pack = pack
            if frame is not None:
                refuse_unpayable(frame, self.session_id, estimate)
        if self.checklist.record_tool_results and frame_id is not None:
            for result in self._new_tool_results(messages):
                handle = self.ops.handle_add(frame_id, **_handle_body(result))
                self.tool_handles[result.tool_use_id] = str(handle["id"])
        self.sent()
        return frame_id

    def _pack_args(
        self,
        frame_id: str | None,
        messages: list[dict[str, Any]],
        in_window: list[dict[str, Any]] | None,
    ) -> dict[str, Any]:
        window = messages if in_window is None else in_window
        exclude = [
            self.tool_handles[r.tool_use_id]
            for r in tool_results(window, {})
            if r.tool_use_id in self.tool_handles
        ]
        return {
            "budget_tokens": self.checklist.context_pack,
            "frame": frame_id,
            "query": last_user_text(messages) or None,
            "exclude_handles": exclude[-EXCLUDE_MAX:] or None,
        }

    def _new_tool_results(self, messages: list[dict[str, Any]]) -> list[ToolResult]:
        """The tool results of ``messages`` this recorder has not added as handles yet,
        each tool_use id once."""
        names = tool_names([*self.history.recorded, *messages])
        out: dict[str, ToolResult] = {}
        for result in tool_results(messages, names):
            if result.tool_use_id and result.tool_use_id not in self.tool_handles:
                out.setdefault(result.tool_use_id, result)
        return list(out.values())

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
        return [r for r in runs.values() if r.get("status") in FINISHED_COMPACTION]

    def refresh_compaction(self) -> None:
        """Learn which recorded turns a finished compaction took out of the window."""
        if not self.history.recorded:
            return
        finished = self._finished_compactions()
        changed = {str(r["id"]): str(r.get("status")) for r in finished}
        if all(self.history.seen_compactions.get(k) == v for k, v in changed.items()):
            return
        self._apply(self.ops.turns(self.session_id), finished, changed)

    def _apply(
        self, turns: list[dict[str, Any]], runs: list[dict[str, Any]], changed: dict[str, str]
    ) -> None:
        removed = {
            int(t["index"])
            for t in turns
            if (t.get("summarized") or t.get("truncated")) and not t.get("branch")
        }
        summary_ids = {t.get("summary_id") for t in turns if t.get("summarized")} - {None}
        summaries = {r.get("summary_id"): r.get("summary") for r in runs if r.get("summary_id")}
        texts = [str(summaries[s]) for s in summary_ids if summaries.get(s)]
        for summary_id in summary_ids - set(summaries):
            logger.info(
                "summary %s of session %s is not in a listed compaction",
                summary_id,
                self.session_id,
            )
        self.history.removed_turns = frozenset(removed)
        self.history.summary = "\n\n".join(texts)
        self.history.seen_compactions.update(changed)
        self.history.pending_compactions = [
            c for c in self.history.pending_compactions if c not in changed
        ]

    @staticmethod
    def _turn_base(turns: list[dict[str, Any]]) -> int:
        return max((int(t["index"]) for t in turns), default=-1) + 1

    def _ensure_turn_base(self) -> None:
        if self.history.next_turn is None:
            self.history.next_turn = self._turn_base(self.ops.turns(self.session_id))

    # after a call
    def record(
        self,
        common: int,
        new: list[dict[str, Any]],
        new_canon: list[dict[str, Any]],
        usage: dict[str, Any],
        frame_id: str | None,
    ) -> None:
        """Post a call's messages beyond the first ``common`` recorded ones (``new``, ending
        with the reply; ``new_canon`` the same in canonical form) and its ``usage`` to
        ``POST /sessions/{id}/messages`` on ``frame_id``; on a server without that
        endpoint, the usage alone to ``POST /frames/{id}/usage`` of that frame."""
        usage = self.timed(usage)
        self._ensure_turn_base()
        try:
            answer = self.ops.messages_append(self.session_id, new, usage=usage, frame=frame_id)
        except NotFound:  # a server from before the conversation endpoints
            if frame_id is None:
                raise
            self.ops.usage_record(frame_id, **usage)
            answer = {}
        self._recorded(common, new_canon, answer)

    def _recorded(self, common: int, new_canon: list[dict[str, Any]], answer: Any) -> None:
        self.history.extend(common, new_canon)
        compaction_id = (answer or {}).get("compaction_id")
        if compaction_id:
            self.history.pending_compactions.append(str(compaction_id))


class AsyncRecorder(Recorder):
    """The same for an :class:`AsyncClient`: the methods that reach the server, awaited."""

    async def frame_id(self) -> str | None:  # type: ignore[override]
        if self.fixed_frame is not None:
            return _id(self.fixed_frame)
        block = current_frame(self.session_id)
        if block is not None:
            return block.id
        top: str | None = (await self.ops.session_get(self.session_id)).top_frame_id
        return top

    async def check(self, estimate: int) -> str | None:  # type: ignore[override]
        self.last_estimate = estimate
        frame_id = await self.frame_id()
        if frame_id is not None:
            refuse_unpayable(await self.ops.frame_get(frame_id), self.session_id, estimate)
        return frame_id

    async def prepare(  # type: ignore[override]
        self,
        estimate: int,
        messages: list[dict[str, Any]],
        add_pack: AddPack,
        in_window: list[dict[str, Any]] | None = None,
    ) -> str | None:
        self.last_estimate = estimate
        frame_id = await self.frame_id()
        frame = await self.ops.frame_get(frame_id) if frame_id is not None else None
        if frame is not None:
            refuse_unpayable(frame, self.session_id, estimate)
        if self.checklist.context_pack is not None:
            pack = await self.ops.context_pack(
                self.session_id, **self._pack_args(frame_id, messages, in_window)
            )
            self.last_estimate = estimate = add_pack(render_pack(pack))
            self.last_pack = pack
            if frame is not None:
                refuse_unpayable(frame, self.session_id, estimate)
        if self.checklist.record_tool_results and frame_id is not None:
            for result in self._new_tool_results(messages):
                handle = await self.ops.handle_add(frame_id, **_handle_body(result))
                self.tool_handles[result.tool_use_id] = str(handle["id"])
        self.sent()
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
        finished = [r for r in runs.values() if r.get("status") in FINISHED_COMPACTION]
        changed = {str(r["id"]): str(r.get("status")) for r in finished}
        if all(self.history.seen_compactions.get(k) == v for k, v in changed.items()):
            return
        self._apply(await self.ops.turns(self.session_id), finished, changed)

    async def record(  # type: ignore[override]
        self,
        common: int,
        new: list[dict[str, Any]],
        new_canon: list[dict[str, Any]],
        usage: dict[str, Any],
        frame_id: str | None,
    ) -> None:
        usage = self.timed(usage)
        if self.history.next_turn is None:
            self.history.next_turn = self._turn_base(await self.ops.turns(self.session_id))
        try:
            answer = await self.ops.messages_append(
                self.session_id, new, usage=usage, frame=frame_id
            )
        except NotFound:  # a server from before the conversation endpoints
            if frame_id is None:
                raise
            await self.ops.usage_record(frame_id, **usage)
            answer = {}
        self._recorded(common, new_canon, answer)
