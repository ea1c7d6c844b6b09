"""A compaction strategy registered by the tests, the one docs/compaction.md shows."""

from collections.abc import Sequence

from frames.strategies import Ask, Item, Selection


def tool_output_first(items: Sequence[Item], ask: Ask) -> Selection:
    """Take tool output out of the window first, oldest first, until it fits the target:
    a frame's tool calls and results are removed, a conversation's turns that ran a
    failing tool are summarized. Everything else stays."""
    window = ask.fixed_tokens + sum(i.tokens for i in items)
    target = ask.target_tokens if ask.target_tokens is not None else 0
    out: list[int] = []
    for item in items:
        if window <= target:
            break
        if item.kind in ("tool_call", "tool_result") or item.error:
            out.append(item.position)
            window -= item.tokens - (item.summary_tokens if ask.operation == "conversation" else 0)
    keep = [i.position for i in items if i.position not in out]
    if ask.operation == "conversation":
        return Selection(keep=keep, summarize=out)
    return Selection(keep=keep, summarize=[], remove=out)


def everything(items: Sequence[Item], ask: Ask) -> Selection:
    """A careless strategy: it removes every item, critical ones included."""
    return Selection(keep=[], summarize=[], remove=[i.position for i in items])


def broken(items: Sequence[Item], ask: Ask) -> Selection:
    raise ValueError("this strategy always fails")
