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
"""

from __future__ import annotations

import json
import logging
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
        return (await self.ops.session_get(self.session_id)).top_frame_id

    async def check(self, estimate: int) -> str | None:  # type: ignore[override]
        self.last_estimate = estimate
        frame_id = await self.frame_id()
        if frame_id is not None:
            refuse_unpayable(await self.ops.frame_get(frame_id), self.session_id, estimate)
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
