"""What one model call's input was made of: its anatomy.

A call's full input (uncached + cache written + cache read) is split into the
conversation it carried, read from the stored messages that came before the call in its
branch: user text, assistant text, thinking, tool calls, tool results and summaries
(compaction summaries, and a transcript's "continued from a previous conversation"
message). After one of our compactions a call read the summary in effect then and the
turns still in the window, not the turns the compaction took out; a transcript's own
compaction restarts the window at its summary message. What the messages do not
account for is ``system_and_tools``: the system prompt and tool definitions, which no
transcript stores. A call that read no stored message at all (recorded by its usage
alone) has no anatomy: nothing says what its input held, so no category claims it. Our counts come from our own tokenizer, not the model's; when they
exceed the reported input, the categories are scaled down to it and each category's
parts with it, so the categories always add up to ``full_input_tokens`` and each one's
parts to its tokens.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from contextops.tokens import count_tokens
from frames.models import Session, Usage

from .models import MAIN_BRANCH, CompactionRun, Message, Summary, Turn

CATEGORIES = (
    "system_and_tools",
    "user_text",
    "assistant_text",
    "thinking",
    "tool_calls",
    "tool_results",
    "summaries",
)
LARGEST = 5
SUMMARY_OPENINGS = ("This session is being continued from a previous conversation",)
# A call reads the messages stored before it; past this many, the oldest are left out.
MESSAGES_READ = 5000


@dataclass
class Part:
    what: str
    tokens: int
    ref: str


@dataclass
class Anatomy:
    full_input_tokens: int
    output_tokens: int
    window_tokens: int
    threshold_tokens: int
    parts: dict[str, list[Part]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    # False when the call read no stored message nor summary: every category is then 0.
    from_messages: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "full_input_tokens": self.full_input_tokens,
            "output_tokens": self.output_tokens,
            "window_tokens": self.window_tokens,
            "threshold_tokens": self.threshold_tokens,
            "from_messages": self.from_messages,
            "categories": [
                {
                    "category": name,
                    "tokens": self.totals.get(name, 0),
                    "largest": [
                        vars(p)
                        for p in sorted(
                            self.parts.get(name, []), key=lambda p: p.tokens, reverse=True
                        )[:LARGEST]
                    ],
                }
                for name in CATEGORIES
            ],
        }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(block) for block in content)
    if isinstance(content, dict):
        if content.get("type") == "text":
            return str(content.get("text", ""))
        return _text_of(content.get("content", ""))
    return ""


def _blocks(message: Message) -> list[tuple[str, str, str]]:
    """The message's parts as (category, what, text)."""
    content = message.content
    text_category = "user_text" if message.role == "user" else "assistant_text"
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text", ""))
            if message.role == "user" and text.startswith(SUMMARY_OPENINGS):
                parts.append(("summaries", "Summary of the earlier conversation", text))
            else:
                parts.append((text_category, f"{message.role} text", text))
        elif kind in ("thinking", "redacted_thinking"):
            parts.append(("thinking", "thinking", str(block.get("thinking") or "")))
        elif kind == "tool_use":
            name = str(block.get("name") or "tool")
            parts.append(("tool_calls", f"{name} call", json.dumps(block.get("input") or {})))
        elif kind == "tool_result":
            parts.append(
                ("tool_results", f"result of {block.get('tool_use_id', '')}", _text_of(block))
            )
    return parts


@dataclass
class Window:
    """What a call read from the conversation: the stored messages still in its window,
    oldest first, and the summary standing in for the turns our compactions had taken
    out by then (None when none had). ``read``: how many messages it read in all, more
    than ``messages`` holds when only the last of them are kept."""

    messages: list[Message]
    summary: Summary | None
    read: int


def call_exchange(call: Usage, *, shown: int = 30) -> tuple[Window, list[Message]]:
    """What the call's page shows as its request (the summary it read, if any, and the
    last ``shown`` messages) and its response (the assistant messages recorded with it)."""
    reply = []
    for message in reversed(_branch_messages(call, _branch(call))):
        if message.role != "assistant":
            break
        reply.append(message)
    window = call_window(call)
    return Window(window.messages[-shown:], window.summary, window.read), list(reversed(reply))


def _branch(call: Usage) -> str:
    """The branch of the conversation the call was made in ("" for the main one)."""
    if not call.frame_id:
        return MAIN_BRANCH
    return (
        Turn.objects.filter(session_id=call.session_id, frame_id=call.frame_id)
        .values_list("branch", flat=True)
        .first()
    ) or MAIN_BRANCH


TURN_BULK_FIELDS = (
    "user_message",
    "tool_calls",
    "tool_results",
    "assistant_response",
    "thinking",
)


def _branch_messages(call: Usage, branch: str) -> list[Message]:
    """The stored messages of ``branch`` up to the call, oldest first."""
    rows = list(
        Message.objects.filter(
            session_id=call.session_id, turn__branch=branch, created_at__lte=call.created_at
        )
        .select_related("turn")
        # Of its turn a message needs the index alone: the turn's tool calls and results
        # are the transcript's largest JSON, and decoding them was most of a call page.
        .defer(*(f"turn__{field}" for field in TURN_BULK_FIELDS))
        .order_by("-seq")[:MESSAGES_READ]
    )
    rows.reverse()
    return rows


def _compacted_before(call: Usage, branch: str) -> tuple[set[int], Summary | None]:
    """The turns (ids) our compactions had taken out of the window when the call was made,
    and the summary in effect then: the newest of those runs' summaries, since a run's
    summary folds the earlier ones in and a truncating run leaves the earlier one be.
    Our runs compact the main branch only; a reverted run counts as never run."""
    if branch != MAIN_BRANCH:
        return set(), None
    runs = list(
        CompactionRun.objects.filter(
            session_id=call.session_id,
            status__in=[CompactionRun.Status.COMPLETED, CompactionRun.Status.FAILED],
            finished_at__lte=call.created_at,
        )
        .select_related("summary")
        .order_by("finished_at")
    )
    if not runs:
        return set(), None
    taken = set(Turn.objects.filter(compaction_run__in=runs).values_list("pk", flat=True))
    return taken, next((r.summary for r in reversed(runs) if r.summary is not None), None)


def call_window(call: Usage) -> Window:
    """What the call read: the stored messages of its branch up to it, without its own
    reply (the assistant messages at the end, recorded with or just before the call) and
    without the turns a compaction had taken out by then, with the summary in effect."""
    branch = _branch(call)
    rows = _branch_messages(call, branch)
    while rows and rows[-1].role == "assistant":
        rows.pop()
    taken, summary = _compacted_before(call, branch)
    if taken:
        rows = [m for m in rows if m.turn_id not in taken]
    # A transcript's compaction restarts the window at its summary message.
    for index in range(len(rows) - 1, -1, -1):
        if rows[index].role == "user" and _text_of(rows[index].content).startswith(
            SUMMARY_OPENINGS
        ):
            rows = rows[index:]
            break
    return Window(rows, summary, len(rows))


def scaled_to(counts: list[int], total: int) -> list[int]:
    """``counts`` scaled in proportion to add up to ``total`` exactly: each rounded down,
    then the tokens left over given one each to the largest remainders (ties to the larger
    count, then to the earlier one). All zeros when ``counts`` add up to 0."""
    counted = sum(counts)
    if not counted:
        return [0] * len(counts)
    scaled = [count * total // counted for count in counts]
    leftover = total - sum(scaled)
    by_remainder = sorted(
        range(len(counts)), key=lambda i: (-(counts[i] * total % counted), -counts[i], i)
    )
    for i in by_remainder[:leftover]:
        scaled[i] += 1
    return scaled


def call_anatomy(*, session: Session, call: Usage) -> Anatomy:
    """The call's input by category, each with its largest parts; the categories' tokens
    add up to the call's full input (see the module docstring). For a call that read no
    stored message nor summary, ``from_messages`` is False and every category is 0."""
    full = call.window_input_tokens
    names: dict[str, str] = {}
    parts: dict[str, list[Part]] = {name: [] for name in CATEGORIES}
    window = call_window(call)
    anatomy = Anatomy(
        full_input_tokens=full,
        output_tokens=call.output_tokens,
        window_tokens=session.context_window_tokens,
        threshold_tokens=int(session.context_window_tokens * session.compaction_threshold),
        parts=parts,
        totals=dict.fromkeys(CATEGORIES, 0),
    )
    if not window.messages and window.summary is None:
        anatomy.from_messages = False
        return anatomy
    for message in window.messages:
        for category, what, text in _blocks(message):
            if category == "tool_calls":
                for block in message.content if isinstance(message.content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        names[str(block.get("id"))] = str(block.get("name") or "tool")
            if category == "tool_results":
                tool_id = what.removeprefix("result of ")
                what = f"{names.get(tool_id, 'tool')} result"
            tokens = count_tokens(text) if text else 0
            if tokens:
                ref = f"turn {message.turn.index} · message {message.number}"
                parts[category].append(Part(what=what, tokens=tokens, ref=ref))
    if window.summary is not None:
        summary = window.summary
        parts["summaries"].append(
            Part(what=str(summary), tokens=summary.tokens, ref=f"summary {summary.pk}")
        )
    counted = {name: sum(p.tokens for p in items) for name, items in parts.items()}
    totals = dict(counted)
    if sum(counted.values()) > full:
        # Our tokenizer counted more than the model read: scale to the reported input,
        # each category's parts with it so that they still add up to its total.
        totals = dict(zip(counted, scaled_to(list(counted.values()), full), strict=True))
        for name, items in parts.items():
            for part, tokens in zip(
                items, scaled_to([p.tokens for p in items], totals[name]), strict=True
            ):
                part.tokens = tokens
            parts[name] = [p for p in items if p.tokens]
    totals["system_and_tools"] = full - sum(v for k, v in totals.items() if k != "system_and_tools")
    if totals["system_and_tools"]:
        parts["system_and_tools"] = [
            Part(
                what="System prompt and tool definitions (what the messages do not account for)",
                tokens=totals["system_and_tools"],
                ref="",
            )
        ]
    anatomy.totals = totals
    return anatomy
