"""Summaries of conversations: the only module that imports ``anthropic``, and only when an
``AnthropicSummarizer`` is made (the SDK takes about 2 s to import, which every web
process, worker and command would pay otherwise).

One interface, ``Summarizer.summarize(turns) -> SummaryOutcome``, two providers:

- ``AnthropicSummarizer``: the official SDK, model and prompt from settings
  (CONTEXTOPS_SUMMARY_MODEL, CONTEXTOPS_SUMMARY_PROMPT; the default is the continuation
  prompt, docs/concepts.md#summaries), at most 1,024 output tokens, three attempts after
  0 / 1 / 2 s.
  Only what may pass is tried again (a rate limit, an overload, a 5xx, a lost
  connection or a timeout, an answer without text), waiting at least as long as the
  provider's ``retry-after`` asks (capped); a refusal that will not change (400, 401,
  403, 404, 413, 422) ends the attempts at once. When no attempt succeeds it returns the
  generic continuation message with ``failed=True``, the last error and whether trying
  later may help (``retryable``), so the run records a failure and the conversation can
  still go on.
- ``ExtractiveSummarizer``: no network; picks the goal, the files changed, the errors
  and the latest state out of the turns. The default when ANTHROPIC_API_KEY is unset.

``summarizer_default()`` picks one from settings. Tests point the real SDK at a local
server (``tests/fakes/anthropic_server.py``) through ``base_url``.
"""

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = """You are helping continue a conversation that has grown too long.

Create a concise continuation summary that captures:
1. The main topic/goal of the conversation
2. Key decisions made
3. Files changed or modified
4. Important context needed to continue
5. Current state/progress
6. Any blockers or issues

Format as a natural continuation message that allows the conversation to resume smoothly.
Keep it under 400 words and ensure the summary is under 1024 tokens."""

CONTINUATION_MESSAGE = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The earlier part could not be summarized, so only the most recent turns are kept below; "
    "ask the user for any earlier detail that is needed to continue."
)

MAX_OUTPUT_TOKENS = 1024
RETRY_DELAYS_SECONDS = (0.0, 1.0, 2.0)
MAX_TRANSCRIPT_CHARS = 400_000
MAX_RETRY_AFTER_SECONDS = 30.0


@dataclass(frozen=True)
class TurnText:
    """One turn as a summarizer sees it."""

    index: int
    user_message: str = ""
    assistant_response: str = ""
    tool_calls: Sequence[dict[str, Any]] = ()  # {name, input}
    tool_results: Sequence[dict[str, Any]] = ()  # {output, is_error}
    anchor: str = ""


@dataclass
class SummaryOutcome:
    text: str
    provider: str
    model: str = ""
    failed: bool = False
    attempts: int = 0
    error: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    # For a failure: whether the same request may succeed later (see ``is_retryable``).
    retryable: bool = True


class Summarizer(Protocol):
    name: str

    def summarize(self, turns: Sequence[TurnText]) -> SummaryOutcome: ...


def render_transcript(turns: Sequence[TurnText], limit: int = MAX_TRANSCRIPT_CHARS) -> str:
    """The turns as plain text for a model, newest kept when it exceeds ``limit`` characters."""
    parts: list[str] = []
    for turn in turns:
        lines = [f"## Turn {turn.index}" + (f" ({turn.anchor})" if turn.anchor else "")]
        if turn.user_message:
            lines.append(f"User: {turn.user_message}")
        for call in turn.tool_calls:
            lines.append(
                f"Tool call {call.get('name', '')}: {json.dumps(call.get('input', {}), ensure_ascii=False)[:2000]}"
            )
        for result in turn.tool_results:
            label = "Tool error" if result.get("is_error") else "Tool result"
            lines.append(f"{label}: {str(result.get('output', ''))[:2000]}")
        if turn.assistant_response:
            lines.append(f"Assistant: {turn.assistant_response}")
        parts.append("\n".join(lines))
    text = "\n\n".join(parts)
    return text if len(text) <= limit else "[earlier turns cut]\n" + text[-limit:]


RETRYABLE_STATUSES = frozenset({408, 409, 429})


def is_retryable(exc: Exception) -> bool:
    """Whether the same request may succeed later: a rate limit, an overload (529), a server
    error, a lost connection or a timeout, or an answer we could not read. A refusal of the
    request itself (bad request, authentication, permission, not found, too large) is not."""
    # Loaded already when the error came from a summarizer (which imports it).
    import anthropic

    if isinstance(exc, anthropic.APIConnectionError):  # timeouts included
        return True
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code >= 500 or exc.status_code in RETRYABLE_STATUSES
    return True  # a malformed or empty answer: another attempt may read


def retry_after_seconds(exc: Exception) -> float:
    """How long the provider asked us to wait (``retry-after`` in seconds, or
    ``retry-after-ms``), capped at ``MAX_RETRY_AFTER_SECONDS``; 0 when it did not say."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            seconds = float(headers["retry-after-ms"]) / 1000
        elif headers.get("retry-after"):
            seconds = float(headers["retry-after"])
        else:
            return 0.0
    except (TypeError, ValueError):
        return 0.0  # an HTTP date or garbage: keep our own backoff
    return max(0.0, min(seconds, MAX_RETRY_AFTER_SECONDS))


class AnthropicSummarizer:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        prompt: str = SUMMARY_PROMPT,
        base_url: str | None = None,
        max_tokens: int = MAX_OUTPUT_TOKENS,
        retry_delays: Sequence[float] = RETRY_DELAYS_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = 60.0,
    ) -> None:
        self.model = model
        self.prompt = prompt
        self.max_tokens = min(max_tokens, MAX_OUTPUT_TOKENS)
        self.retry_delays = tuple(retry_delays)
        self.sleep = sleep
        # Imported here, by the one process that summarizes with it (see the module's note).
        import anthropic

        self.errors = (anthropic.APIError, ValueError, TypeError, AttributeError)
        # Our own three attempts are the retry policy; the SDK's would multiply them.
        self.client: anthropic.Anthropic = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout
        )

    def _call(self, transcript: str) -> tuple[str, dict[str, Any]]:
        message = self.client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            messages=[
                {
                    "role": "user",
                    "content": f"{self.prompt}\n\nConversation to summarize:\n\n{transcript}",
                }
            ],
        )
        text = "".join(
            getattr(block, "text", "")
            for block in (getattr(message, "content", None) or [])
            if getattr(block, "type", "") == "text"
        ).strip()
        if not text:
            raise ValueError("the response has no text content")
        usage = getattr(message, "usage", None)
        figures = {}
        if usage is not None:
            for name in (
                "input_tokens",
                "output_tokens",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
            ):
                figures[name] = int(getattr(usage, name, 0) or 0)
        return text, figures

    def summarize(self, turns: Sequence[TurnText]) -> SummaryOutcome:
        """A summary from the model, or the continuation message with ``failed=True``."""
        transcript = render_transcript(turns)
        last_error = ""
        retryable = True
        wait_at_least = 0.0
        attempt = 0
        for attempt, delay in enumerate(self.retry_delays, start=1):
            if delay > 0:
                self.sleep(delay)
            if wait_at_least > delay:
                self.sleep(wait_at_least - delay)
            try:
                text, usage = self._call(transcript)
            except self.errors as exc:
                last_error = f"{type(exc).__name__}: {exc}"[:1000]
                retryable = is_retryable(exc)
                logger.warning(
                    "summary attempt %s of %s failed (%s): %s",
                    attempt,
                    len(self.retry_delays),
                    "retryable" if retryable else "final",
                    last_error,
                )
                if not retryable:
                    break
                wait_at_least = retry_after_seconds(exc)
                continue
            return SummaryOutcome(
                text=text, provider=self.name, model=self.model, attempts=attempt, usage=usage
            )
        return SummaryOutcome(
            text=CONTINUATION_MESSAGE,
            provider=self.name,
            model=self.model,
            failed=True,
            attempts=attempt,
            error=last_error,
            retryable=retryable,
        )


class ExtractiveSummarizer:
    """A summary built from the turns themselves: no model, no network."""

    name = "extractive"
    model = ""

    def __init__(self, max_chars: int = 2400) -> None:
        self.max_chars = max_chars

    def summarize(self, turns: Sequence[TurnText]) -> SummaryOutcome:
        if not turns:
            return SummaryOutcome(text="", provider=self.name, attempts=1)
        goal = next((t.user_message for t in turns if t.user_message.strip()), "")
        files: list[str] = []
        for turn in turns:
            for call in turn.tool_calls:
                data = call.get("input")
                data = data if isinstance(data, dict) else {}
                path = data.get("file_path") or data.get("path") or data.get("notebook_path")
                if path and str(path) not in files:
                    files.append(str(path))
        errors = sum(1 for t in turns for r in t.tool_results if r.get("is_error"))
        anchors = [f"turn {t.index}: {t.anchor}" for t in turns if t.anchor]
        latest = next(
            (t.assistant_response for t in reversed(turns) if t.assistant_response.strip()), ""
        )
        lines = [
            f"Summary of turns {turns[0].index}–{turns[-1].index} ({len(turns)} turns), made without a model."
        ]
        if goal:
            lines.append(f"Goal: {_clip(goal, 500)}")
        if files:
            lines.append(
                "Files touched: "
                + ", ".join(files[:20])
                + (f" and {len(files) - 20} more" if len(files) > 20 else "")
            )
        tools = sum(len(t.tool_calls) for t in turns)
        if tools:
            lines.append(f"Tool calls: {tools}, of which {errors} failed.")
        if anchors:
            lines.append("Milestones: " + "; ".join(anchors[-5:]))
        if latest:
            lines.append(f"Latest state: {_clip(latest, 800)}")
        text = "\n".join(lines)
        return SummaryOutcome(text=_clip(text, self.max_chars), provider=self.name, attempts=1)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def summarizer_default() -> Summarizer:
    """Anthropic when ANTHROPIC_API_KEY is set (or CONTEXTOPS_SUMMARIZER="anthropic"), else extractive."""
    choice = getattr(settings, "CONTEXTOPS_SUMMARIZER", "") or (
        "anthropic" if settings.ANTHROPIC_API_KEY else "extractive"
    )
    if choice == "anthropic":
        return AnthropicSummarizer(
            api_key=settings.ANTHROPIC_API_KEY or "unset",
            model=settings.CONTEXTOPS_SUMMARY_MODEL,
            prompt=getattr(settings, "CONTEXTOPS_SUMMARY_PROMPT", "") or SUMMARY_PROMPT,
            base_url=settings.ANTHROPIC_BASE_URL,
            retry_delays=tuple(
                getattr(settings, "CONTEXTOPS_SUMMARY_RETRY_DELAYS", RETRY_DELAYS_SECONDS)
            ),
        )
    return ExtractiveSummarizer()
