"""Compacting a frame's context to a token target (seed 000 §5.4).

The window of a frame is what its handles cost in a pack: an active (loaded or hot)
handle its full tokens, an indexed one its summary's, a cold or offline one nothing.
A strategy (``frames.strategies``: built-in or registered) picks which active handles
leave the window; nothing is deleted:

- a *summarized* handle is paged out on the spot: it becomes ``indexed`` with its
  stored summary (or an extractive one, made here) standing in for it;
- a *removed* handle becomes ``indexed`` without a summary, so packs leave it out;
- both come back whole with ``POST /handles/{id}/page-in?mode=full``.

Critical handles are never summarized or removed, whatever the strategy says.
"""

from dataclasses import dataclass, field
from uuid import UUID

from django.db import transaction

from contextops.errors import Conflict, Invalid
from contextops.tokens import count_tokens
from frames.events import event_append
from frames.locks import frame_lock, session_lock
from frames.models import ContextHandle, Frame
from frames.services.stack import frame_require_open
from frames.strategies import (
    FRAME,
    FRAME_BUILTINS,
    TRUNCATE_AT,
    Ask,
    Item,
    Strategy,
    compaction_level,
    selection_checked,
    strategy_custom,
    strategy_require,
)

from .paging import SUMMARY_MAX_TOKENS, extractive_summary
from .resources import ACTIVE_STATES, INDEXED

MAX_TARGET_TOKENS = 100_000_000
MAX_MESSAGE_COUNT = 1_000_000


@dataclass(frozen=True)
class FrameCompaction:
    """The answer of ``frame_compact``: the window before and after, in tokens, the level
    that names the reduction, and the handles that left the window."""

    frame_id: UUID
    strategy: str
    original_tokens: int
    final_tokens: int
    compaction_level: str
    removed: list[str] = field(default_factory=list)
    summarized: list[str] = field(default_factory=list)

    @property
    def items_removed(self) -> int:
        return len(self.removed)

    @property
    def items_summarized(self) -> int:
        return len(self.summarized)


def window_tokens(handle: ContextHandle) -> int:
    """What ``handle`` costs in the frame's window: full when active, its summary when
    indexed, nothing when cold or offline."""
    if handle.state in ACTIVE_STATES:
        return handle.estimated_tokens
    if handle.state == INDEXED:
        return handle.summary_tokens
    return 0


def _strategy(name: str) -> Strategy:
    builtin = FRAME_BUILTINS.get(name)
    if builtin is not None:
        return builtin
    custom = strategy_custom(name)
    assert custom is not None  # strategy_require has checked the name
    return custom


def _check(strategy: str, target_tokens: int, message_count: int | None) -> None:
    strategy_require(strategy, FRAME)
    if not 0 <= target_tokens <= MAX_TARGET_TOKENS:
        raise Invalid(
            f"target_tokens must be from 0 to {MAX_TARGET_TOKENS:,}.", field="target_tokens"
        )
    if message_count is not None and not 0 <= message_count <= MAX_MESSAGE_COUNT:
        raise Invalid(
            f"message_count must be from 0 to {MAX_MESSAGE_COUNT:,}.", field="message_count"
        )
    if strategy == TRUNCATE_AT and message_count is None:
        raise Invalid(
            "truncate_at needs message_count: how many recent handles stay.",
            field="message_count",
        )


def frame_compact(
    *,
    frame: Frame,
    target_tokens: int,
    strategy: str,
    message_count: int | None = None,
    actor: str = "",
) -> FrameCompaction:
    """Compact ``frame``'s handles toward ``target_tokens`` with ``strategy``.

    Raises Invalid (``strategy`` with the available names, ``target_tokens``,
    ``message_count``), Conflict ``frame_not_active`` for a closed frame and
    ``strategy_failed`` when a registered strategy raises. A window already within the
    target is left as it is (level ``none``). Appends ``frame.compacted`` in the same
    transaction as the changes.
    """
    _check(strategy, target_tokens, message_count)
    choose = _strategy(strategy)
    with transaction.atomic():
        session = session_lock(frame.session_id)
        frame = frame_lock(frame)
        frame_require_open(frame, action="compact")
        handles = list(
            ContextHandle.objects.select_for_update(no_key=True)
            .filter(frame_id=frame.pk)
            .order_by("created_at", "id")
        )
        original = sum(window_tokens(h) for h in handles)
        active = [h for h in handles if h.state in ACTIVE_STATES]
        items = [
            Item(
                position=i,
                id=str(h.pk),
                tokens=h.estimated_tokens,
                priority=h.priority,
                kind=h.kind,
                summary_tokens=min(
                    h.estimated_tokens, h.summary_tokens if h.summary else SUMMARY_MAX_TOKENS
                ),
            )
            for i, h in enumerate(active)
        ]
        removed: list[str] = []
        summarized: list[str] = []
        if original > target_tokens and items:
            ask = Ask(
                target_tokens=target_tokens,
                message_count=message_count,
                operation=FRAME,
                fixed_tokens=original - sum(i.tokens for i in items),
            )
            try:
                chosen = choose(items, ask)
            except Exception as exc:  # an operator's strategy: its failure is not a 500
                raise Conflict(
                    "strategy_failed",
                    f"The strategy {strategy!r} failed: {type(exc).__name__}: {exc}",
                    strategy=strategy,
                ) from exc
            selection = selection_checked(chosen, items)
            for position in selection.summarize:
                handle = active[position]
                if not handle.summary:
                    handle.summary = extractive_summary(handle.content or handle.ref)
                    handle.summary_tokens = count_tokens(handle.summary)
                handle.state = INDEXED
                handle.save(update_fields=["state", "summary", "summary_tokens"])
                summarized.append(str(handle.pk))
            for position in selection.remove:
                handle = active[position]
                handle.state, handle.summary, handle.summary_tokens = INDEXED, "", 0
                handle.save(update_fields=["state", "summary", "summary_tokens"])
                removed.append(str(handle.pk))
        final = sum(window_tokens(h) for h in handles)
        level = compaction_level(original, final)
        event_append(
            session=session,
            type="frame.compacted",
            frame=frame,
            actor=actor,
            payload={
                "strategy": strategy,
                "target_tokens": target_tokens,
                "message_count": message_count,
                "original_tokens": original,
                "final_tokens": final,
                "compaction_level": level,
                "removed": removed,
                "summarized": summarized,
            },
        )
    return FrameCompaction(
        frame_id=frame.pk,
        strategy=strategy,
        original_tokens=original,
        final_tokens=final,
        compaction_level=level,
        removed=removed,
        summarized=summarized,
    )
