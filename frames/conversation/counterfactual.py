"""Counterfactual compaction: what each of our strategies would have done where the agent
really compacted, and what our own trigger would have done over the whole session.

Plain functions over dataclasses, no database and no model call (``selectors`` reads the
session into them). Figures are estimates, and the rules behind them are these:

- A real compaction (one the transcript recorded, or one of our runs) happened before
  turn ``before_turn``. A transcript's is measured on the whole window (``basis``
  "window"): it held ``pre_tokens`` (the agent's own figure, system prompt and tools
  included) and the history after it is the full input of the next model call. One of
  our runs is measured on the conversation history alone (``basis`` "history"): the
  tokens it found and left, as our tokenizer counts them, without the system prompt and
  tools; the strategies are sized on that same basis where it compacted.
- A strategy selects over the turns that were in the window at that moment, exactly as
  a compaction run would (``selection.select``). The turns' own token counts are scaled
  to the window's: by ``(pre_tokens - fixed) / their sum`` when that is below 1, where
  ``fixed`` (system prompt and tools) is the first call's input less its turn's tokens,
  and is 0 on the history basis.
- A summary is not written, only sized: ``summary_ratio`` times what it stands for. The
  ratio is the session's own (real summary tokens over what they replaced, averaged over
  its real compactions that have a summary), else ``DEFAULT_SUMMARY_RATIO``. What a
  summary replaced (``replaced_tokens``): a transcript's, the whole window
  (``pre_tokens``); one of our runs', the turns it summarized and the earlier summaries
  it folded in, not the turns it kept or truncated. A run whose summary failed (the
  generic continuation message stands in) has no ratio to give.
- Only a compaction that happened counts: one of our runs that crashed took nothing out
  (``selectors`` does not read it as a real compaction).
- The trigger fires after a call whose occupancy (full input plus output) passes
  ``threshold`` times the context window. A policy is simulated over the session's
  calls with the real compactions undone (each call's input plus what the real
  compactions before it took out: a transcript's ``pre_tokens`` less the next call's
  input, one of our runs' history before less after): whenever its window passes the threshold it compacts
  with its strategy, and every later call is that much smaller.
"""

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime

from . import selection as sel
from .anchors import AnchorPatterns, ToolCall, ToolResult, TurnView, detect_anchor
from .grouping import result_text

DEFAULT_SUMMARY_RATIO = 0.1
# The event an import appends for a compaction the agent did itself, as its transcript
# recorded it (payload: before_turn, pre_tokens, trigger, branch, line, at).
COMPACTED_EVENT = "conversation.compacted"
ACTUAL = "actual"
# What a real compaction's figures measure: the whole window as the model counted it
# (a transcript's), or the conversation history alone as our tokenizer counts it (ours).
WINDOW = "window"
HISTORY = "history"


@dataclass(frozen=True)
class TurnPoint:
    """One unit the strategies select over: a model call's turn (see ``steps``), or a
    conversation turn when the session reported no calls. ``turn``: the conversation
    turn it belongs to."""

    index: int
    tokens: int
    anchor: str = ""  # the anchor type, "" when none
    error: bool = False
    occupancy: int = 0  # the latest call's occupancy in this turn, 0 when none
    at: datetime | None = None
    turn: int = 0


@dataclass(frozen=True)
class MessagePoint:
    """A stored message: its conversation turn, role, content blocks, tokens and time."""

    turn: int
    role: str
    content: list
    tokens: int
    at: datetime


def steps(
    messages: Sequence[MessagePoint],
    call_times: Sequence[datetime],
    patterns: AnchorPatterns | None = None,
) -> list[TurnPoint]:
    """One turn per model call: what the call read new (the messages since the call
    before) and its response. An agent answers one prompt with hundreds of calls, so
    these are the units a compaction can cut between. A message belongs to the first
    call at or after its time; messages after the last call make one more turn.

    A turn's tool calls are paired with their results wherever those are, so anchors
    are detected as for a conversation turn (``anchors.detect_anchor``); a turn is an
    error when one of its tool calls failed.
    """
    count = len(call_times) + (
        1 if messages and (not call_times or messages[-1].at > call_times[-1]) else 0
    )
    groups: list[list[MessagePoint]] = [[] for _ in range(count)]
    for message in messages:
        groups[min(bisect.bisect_left(call_times, message.at), count - 1)].append(message)
    results: dict[str, ToolResult] = {}
    for message in messages:
        for block in message.content if isinstance(message.content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                key = str(block.get("tool_use_id", ""))
                results[key] = ToolResult(
                    key, result_text(block.get("content", "")), bool(block.get("is_error"))
                )
    units: list[TurnPoint] = []
    previous_error = False
    last_turn = 0
    for index, group in enumerate(groups):
        calls = [
            ToolCall(str(b.get("id", "")), str(b.get("name", "")), b.get("input") or {})
            for m in group
            if m.role == "assistant" and isinstance(m.content, list)
            for b in m.content
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        answered = [results[c.id] for c in calls if c.id in results]
        anchor = detect_anchor(
            TurnView(tool_calls=calls, tool_results=answered, previous_error=previous_error),
            patterns,
        )
        error = any(r.is_error for r in answered)
        last_turn = group[-1].turn if group else last_turn
        units.append(
            TurnPoint(
                index=index,
                tokens=sum(m.tokens for m in group),
                anchor=anchor.type if anchor else "",
                error=error,
                at=group[0].at
                if group
                else (call_times[index] if index < len(call_times) else None),
                turn=last_turn,
            )
        )
        previous_error = error
    return units


@dataclass(frozen=True)
class Call:
    """One model call: the turn it was made in, its full input and its output."""

    turn: int
    input_tokens: int
    output_tokens: int = 0
    at: datetime | None = None

    @property
    def occupancy(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class RealCompaction:
    """A compaction the agent really did. ``taken``: the turn indices it took out of the
    window (the ones before ``before_turn`` for a transcript's); ``removed``: those of
    them that left without a summary (a truncating run's); ``summary_tokens``: the size
    of its summary when known. ``pre_tokens`` and ``post_tokens`` (what it left, None
    when only the next call tells) are measured on ``basis``."""

    before_turn: int
    pre_tokens: int
    taken: frozenset[int]
    at: datetime | None = None
    origin: str = "transcript"  # "transcript" | "contextops"
    trigger: str = ""
    id: str = ""
    summary_tokens: int | None = None
    summary_turn: int | None = None  # the turn that holds the agent's summary, if any
    conversation_turn: int = 0  # the conversation turn it came before
    removed: frozenset[int] = frozenset()
    basis: str = WINDOW
    post_tokens: int | None = None
    strategy: str = ""  # one of our runs': the strategy it ran; "" for a transcript's
    # One of our runs': what its summary stands for, on the history basis (the turns it
    # summarized and the earlier summaries it folded in); None when it has no real summary.
    replaced_tokens: int | None = None


@dataclass(frozen=True)
class StrategyOutcome:
    strategy: str
    kept: list[list[int]]
    summarized: list[list[int]]
    removed: list[list[int]]
    tokens_after: int
    summary_tokens: int
    anchor: dict | None  # {turn, type} of the anchor it preserved, or None
    cut_at: int | None  # the first turn it kept after the ones it took out, or None


@dataclass(frozen=True)
class Actual:
    """What the real compaction did. ``kept``, ``summarized``, ``removed``: the turns of
    the window it kept, summarized and took out without a summary, as ranges; a
    transcript's compaction summarizes the whole window and keeps none.

    ``pre_tokens`` and ``tokens_after`` are on ``basis``, as the strategies' figures
    beside them are: for "window", the agent's figure and the next call's full input;
    for "history", what our run found and left. ``next_input_tokens``: the next call's
    full input (system prompt and tools included) either way, None without a later call.
    ``strategy``: the strategy one of our runs ran ("" for a transcript's compaction).
    ``replaced_tokens``: what its summary stood for, the figure the session's ratio
    divides ``summary_tokens`` by (``replaced``); None when it gives no ratio."""

    pre_tokens: int
    tokens_after: int | None
    summary_tokens: int | None
    trigger: str
    kept: list[list[int]] = field(default_factory=list)
    summarized: list[list[int]] = field(default_factory=list)
    removed: list[list[int]] = field(default_factory=list)
    basis: str = WINDOW
    next_input_tokens: int | None = None
    strategy: str = ""
    replaced_tokens: int | None = None


@dataclass(frozen=True)
class CompactionPoint:
    turn: int
    conversation_turn: int
    at: datetime | None
    origin: str
    id: str
    turns_in_window: list[list[int]]
    actual: Actual
    strategies: list[StrategyOutcome]


@dataclass(frozen=True)
class Fire:
    turn: int
    occupancy: int
    at: datetime | None = None


@dataclass(frozen=True)
class PolicyRun:
    """One policy over the whole session: ``actual`` (what the agent did) or a strategy
    under our trigger. ``tokens_sent``: the full input of every call, added up."""

    policy: str
    compactions: int
    tokens_sent: int
    fires: list[Fire] = field(default_factory=list)


@dataclass(frozen=True)
class Counterfactual:
    threshold: float
    window_tokens: int
    threshold_tokens: int
    summary_ratio: float
    summary_ratio_source: str  # "session" | "default"
    fixed_tokens: int
    compactions: list[CompactionPoint]
    trigger: Fire | None  # where our trigger first fires with no compaction at all
    policies: list[PolicyRun]
    curve: list[tuple[int, int]]  # (turn, occupancy) of every call, as it really was
    uncompacted_curve: list[tuple[int, int]]
    unit: str = "call"  # "call": one turn per model call; "turn": conversation turns
    # Per unit, the number the call pages give its call ("Model call N of M"), which
    # counts every call of the session, a subagent's too; empty when unit is "turn".
    call_numbers: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        """The API's answer: every dataclass as a dict, the curves as {turn, occupancy}."""
        answer = asdict(self)
        for name in ("curve", "uncompacted_curve"):
            answer[name] = [{"turn": t, "occupancy": o} for t, o in answer[name]]
        return answer


def ranges(indices: Iterable[int]) -> list[list[int]]:
    """Indices, in any order, as sorted inclusive ``[first, last]`` runs:
    [1, 2, 3, 7] -> [[1, 3], [7, 7]]."""
    runs: list[list[int]] = []
    for index in sorted(indices):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return runs


def replaced(r: RealCompaction) -> int | None:
    """What ``r``'s summary replaced, on its basis: the whole window (``pre_tokens``) for a
    transcript's; for one of our runs, what its summary stands for (``replaced_tokens``),
    not the history it found, which holds the turns it kept and truncated too. None
    without a summary to measure."""
    if not r.summary_tokens:
        return None
    return r.replaced_tokens if r.basis == HISTORY else r.pre_tokens


def summary_ratio(real: Sequence[RealCompaction]) -> tuple[float, str]:
    """The session's summary-to-input ratio and where it comes from ("session" or "default"):
    each real summary's tokens over what it replaced (``replaced``), averaged."""
    known = [
        r.summary_tokens / stood_for
        for r in real
        if r.summary_tokens and (stood_for := replaced(r) or 0) > 0
    ]
    if not known:
        return DEFAULT_SUMMARY_RATIO, "default"
    return min(1.0, sum(known) / len(known)), "session"


def fixed_tokens(turns: Sequence[TurnPoint], calls: Sequence[Call]) -> int:
    """What no compaction takes out (system prompt, tools): the first call's input less
    the tokens of the turn it was made in; 0 without calls."""
    if not calls:
        return 0
    first = calls[0]
    tokens = next((t.tokens for t in turns if t.index == first.turn), 0)
    return max(0, first.input_tokens - tokens)


def _facts(turns: Sequence[TurnPoint], weights: dict[int, int]) -> list[sel.TurnFacts]:
    return [
        sel.TurnFacts(weights.get(t.index, t.tokens), anchor=bool(t.anchor), error=t.error)
        for t in turns
    ]


def _outcome(
    strategy: str,
    window: Sequence[TurnPoint],
    weights: dict[int, int],
    *,
    pre_tokens: int,
    fixed: int,
    ratio: float,
) -> StrategyOutcome:
    """What ``strategy`` would have done to ``window`` (the turns in it, oldest first)
    when the window held ``pre_tokens``."""
    chosen = sel.select(strategy, _facts(window, weights))
    history = sum(weights.get(t.index, t.tokens) for t in window)
    scale = min(1.0, max(0, pre_tokens - fixed) / history) if history else 1.0
    summarized = sum(weights.get(window[i].index, window[i].tokens) for i in chosen.summarize)
    removed = sum(weights.get(window[i].index, window[i].tokens) for i in chosen.remove)
    summary = round(ratio * scale * summarized) if chosen.summarize else 0
    after = max(0, pre_tokens - round(scale * (summarized + removed)) + summary)
    anchor = None
    if chosen.preserved_anchor is not None:
        turn = window[chosen.preserved_anchor]
        anchor = {"turn": turn.index, "type": turn.anchor}
    left = set(chosen.summarize) | set(chosen.remove)
    kept_after = [window[i].index for i in chosen.keep if left and i > max(left)]
    return StrategyOutcome(
        strategy=strategy,
        kept=ranges([window[i].index for i in chosen.keep]),
        summarized=ranges([window[i].index for i in chosen.summarize]),
        removed=ranges([window[i].index for i in chosen.remove]),
        tokens_after=after,
        summary_tokens=summary,
        anchor=anchor,
        cut_at=min(kept_after) if kept_after else None,
    )


def _weights(turns: Sequence[TurnPoint], real: Sequence[RealCompaction]) -> dict[int, int]:
    """Each turn's tokens, less the agent's own summary in the turn that holds one: in a
    world without that compaction the summary was never written."""
    weights = {t.index: t.tokens for t in turns}
    for r in real:
        if r.summary_turn is not None and r.summary_turn in weights and r.summary_tokens:
            weights[r.summary_turn] = max(0, weights[r.summary_turn] - r.summary_tokens)
    return weights


def _drops(real: Sequence[RealCompaction], calls: Sequence[Call]) -> list[tuple[int, int]]:
    """(before_turn, tokens it took out of the window) per real compaction: its
    ``pre_tokens`` less the next call's input on the window basis; on the history basis,
    what it found less what it left (0 when it did not say)."""
    drops = []
    for r in real:
        if r.basis == HISTORY:
            after = r.post_tokens
        else:
            after = next((c.input_tokens for c in calls if c.turn >= r.before_turn), None)
        drops.append((r.before_turn, max(0, r.pre_tokens - after) if after is not None else 0))
    return drops


def _occupancy_before(r: RealCompaction, calls: Sequence[Call]) -> int:
    """The window a real compaction came after, as the curve shows it: the agent's figure
    on the window basis; else the occupancy of the last call before it (its
    ``pre_tokens`` when none was)."""
    if r.basis == WINDOW:
        return r.pre_tokens
    before = [c for c in calls if c.turn < r.before_turn]
    return before[-1].occupancy if before else r.pre_tokens


def _simulate(
    strategy: str,
    turns: Sequence[TurnPoint],
    calls: Sequence[Call],
    uncompacted: Sequence[int],
    weights: dict[int, int],
    *,
    threshold_tokens: int,
    fixed: int,
    ratio: float,
) -> PolicyRun:
    """``strategy`` under our trigger over every call, with the real compactions undone."""
    taken: set[int] = set()
    offset = 0  # what this policy's compactions took out of the window so far
    summary = 0  # the size of its current summary, which the next one folds in
    sent, fires = 0, []
    for call, full_input in zip(calls, uncompacted, strict=True):
        window_input = max(0, full_input - offset)
        sent += window_input
        occupancy = window_input + call.output_tokens
        if occupancy <= threshold_tokens:
            continue
        window = [t for t in turns if t.index <= call.turn and t.index not in taken]
        if len(window) <= sel.ALWAYS_KEEP_RECENT:
            continue
        outcome = _outcome(
            strategy, window, weights, pre_tokens=occupancy, fixed=fixed, ratio=ratio
        )
        out = {i for run in outcome.summarized + outcome.removed for i in range(run[0], run[1] + 1)}
        if not out:
            continue
        # The new summary stands for the old one too (a run folds earlier summaries in).
        new_summary = (
            round(ratio * summary) + outcome.summary_tokens if outcome.summarized else summary
        )
        taken_out = occupancy - outcome.tokens_after + outcome.summary_tokens
        offset += taken_out + summary - new_summary
        summary = new_summary
        taken |= out
        fires.append(Fire(turn=call.turn, occupancy=occupancy, at=call.at))
    return PolicyRun(policy=strategy, compactions=len(fires), tokens_sent=sent, fires=fires)


def counterfactual(
    *,
    turns: Sequence[TurnPoint],
    calls: Sequence[Call],
    real: Sequence[RealCompaction],
    window_tokens: int,
    threshold: float,
    strategies: Sequence[str],
    unit: str = "call",
    call_numbers: Sequence[int] = (),
) -> Counterfactual:
    """The counterfactual of a session's main conversation: ``turns`` and ``calls``
    oldest first, ``real`` compactions in the order they happened; ``call_numbers`` is
    passed through to the answer."""
    turns = sorted(turns, key=lambda t: t.index)
    real = sorted(real, key=lambda r: r.before_turn)
    ratio, ratio_source = summary_ratio(real)
    fixed = fixed_tokens(turns, calls)
    weights = _weights(turns, real)
    threshold_tokens = int(threshold * window_tokens)
    points = []
    taken: set[int] = set()
    for r in real:
        window = [t for t in turns if t.index < r.before_turn and t.index not in taken]
        in_window = {t.index for t in window}
        after = next((c.input_tokens for c in calls if c.turn >= r.before_turn), None)
        on_history = r.basis == HISTORY
        points.append(
            CompactionPoint(
                turn=r.before_turn,
                conversation_turn=r.conversation_turn,
                at=r.at,
                origin=r.origin,
                id=r.id,
                turns_in_window=ranges([t.index for t in window]),
                actual=Actual(
                    pre_tokens=r.pre_tokens,
                    tokens_after=r.post_tokens if on_history else after,
                    summary_tokens=r.summary_tokens,
                    trigger=r.trigger,
                    kept=ranges(in_window - r.taken),
                    summarized=ranges(in_window & (r.taken - r.removed)),
                    removed=ranges(in_window & r.removed),
                    basis=r.basis,
                    next_input_tokens=after,
                    strategy=r.strategy,
                    replaced_tokens=replaced(r),
                ),
                strategies=[
                    _outcome(
                        s,
                        window,
                        weights,
                        pre_tokens=r.pre_tokens,
                        fixed=0 if on_history else fixed,
                        ratio=ratio,
                    )
                    for s in strategies
                ],
            )
        )
        taken |= set(r.taken)
    drops = _drops(real, calls)
    uncompacted = [
        c.input_tokens + sum(d for before, d in drops if c.turn >= before) for c in calls
    ]
    first_fire = next(
        (
            Fire(turn=c.turn, occupancy=u + c.output_tokens, at=c.at)
            for c, u in zip(calls, uncompacted, strict=True)
            if u + c.output_tokens > threshold_tokens
        ),
        None,
    )
    policies = [
        PolicyRun(
            policy=ACTUAL,
            compactions=len(real),
            tokens_sent=sum(c.input_tokens for c in calls),
            # As a policy's fires do, each names the turn after which it compacted.
            fires=[
                Fire(
                    turn=max(0, r.before_turn - 1),
                    occupancy=_occupancy_before(r, calls),
                    at=r.at,
                )
                for r in real
            ],
        )
    ]
    policies += [
        _simulate(
            s,
            turns,
            calls,
            uncompacted,
            weights,
            threshold_tokens=threshold_tokens,
            fixed=fixed,
            ratio=ratio,
        )
        for s in strategies
    ]
    return Counterfactual(
        threshold=threshold,
        window_tokens=window_tokens,
        threshold_tokens=threshold_tokens,
        summary_ratio=round(ratio, 4),
        summary_ratio_source=ratio_source,
        fixed_tokens=fixed,
        compactions=points,
        trigger=first_fire,
        policies=policies,
        curve=[(c.turn, c.occupancy) for c in calls],
        uncompacted_curve=[
            (c.turn, u + c.output_tokens) for c, u in zip(calls, uncompacted, strict=True)
        ],
        unit=unit,
        call_numbers=list(call_numbers),
    )
