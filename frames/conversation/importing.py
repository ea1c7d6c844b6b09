"""Transcript import: a transcript the ``readers`` read, written as one new session with
a frame per conversation (the main one and each subagent), its turns and its usage.

An entry that is not a valid message is skipped and reported by its line
(``TranscriptInvalid``); anything else that fails writes nothing.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import transaction

from contextops.errors import Invalid
from contextops.models import Agent, Organization
from frames.events import event_append
from frames.models import Frame, Session
from frames.services import frame_pop, frame_push, session_create

from .ingest import (
    IngestPass,
    UsageFigures,
    ingest_finish,
    ingest_start,
    message_ingest,
    turn_touch,
    usage_record_for,
)
from .models import Turn
from .readers import Entry, Transcript

IMPORT_BUDGET_MARGIN = 1_000_000
IMPORT_ACTOR = "import"


class TranscriptInvalid(Invalid):
    """An entry of a transcript that is not a valid message, named by its ``line`` in the
    file (for an Anthropic cassette, the interaction's number times 1000 plus the message's)."""

    def __init__(self, detail: str, *, line: int, field: Sequence[str | int] = ()) -> None:
        super().__init__(detail, field=field)
        self.line = line

    @property
    def reason(self) -> str:
        """How the import report names the skipped entry: ``line 12: <what is wrong>``."""
        return f"line {self.line}: {self.detail}"


@dataclass
class ImportReport:
    session: Session
    frames: int
    turns: int
    api_calls: int
    tool_calls: int
    tool_errors: int
    compactions: int
    usage_totals: dict
    skipped: list[tuple[int, str]]

    def as_dict(self) -> dict:
        return {
            "session_id": str(self.session.pk),
            "frames": self.frames,
            "turns": self.turns,
            "api_calls": self.api_calls,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "compactions": self.compactions,
            "usage_totals": self.usage_totals,
            "skipped_lines": len(self.skipped),
            "skipped": [{"line": line, "reason": reason} for line, reason in self.skipped],
        }


def _entry_ingest(state: IngestPass, entry: Entry) -> None:
    """Group a message entry into its branch's turns; ``TranscriptInvalid`` when it is not one."""
    try:
        message_ingest(state, role=entry.role, content=entry.content)
    except Invalid as exc:
        raise TranscriptInvalid(exc.detail, line=entry.line, field=exc.field) from None


def transcript_import(
    *,
    organization: Organization,
    transcript: Transcript,
    agent: Agent | None = None,
    title: str = "",
    context_window_tokens: int = 200_000,
    progress: Callable[[int, int], None] | None = None,
    actor: str = IMPORT_ACTOR,
) -> ImportReport:
    """Write a read transcript as one new session, all in one transaction.

    The main conversation goes to a root frame; every subagent to a child frame with its
    own turns (branch = the agent id) and usage. Entries that are not valid messages are
    skipped and reported with their line number; nothing is written when anything else
    fails. ``progress(done, total)`` is called as entries are written.
    """
    spent: dict[str, int] = {}
    for entry in transcript.entries:
        if entry.kind == "usage":
            figures = UsageFigures(**(entry.usage or {}))
            spent[entry.branch] = spent.get(entry.branch, 0) + figures.occupancy_tokens
    child_budgets = {b: spent.get(b, 0) + IMPORT_BUDGET_MARGIN for b in transcript.branches}
    skipped = list(transcript.skipped)
    total = len(transcript.entries)
    with transaction.atomic():
        session = session_create(
            organization=organization,
            agent=agent,
            identity={"user_name": "transcript import"} if agent is None else {},
            context_window_tokens=context_window_tokens,
            model=transcript.model,
            title=(title or transcript.title or f"Imported {transcript.format} transcript")[:300],
            actor=actor,
        )
        root = frame_push(
            session=session,
            goal=(transcript.title or f"Imported {transcript.format} transcript")[:2000],
            budget_total=spent.get("", 0) + sum(child_budgets.values()) + IMPORT_BUDGET_MARGIN,
            actor=actor,
        )
        frames = {"": root}
        for branch, description in transcript.branches.items():
            frames[branch] = frame_push(
                session=session,
                parent=root,
                goal=f"{branch}: {description}"[:2000],
                budget_total=child_budgets[branch],
                actor=actor,
            )
        states: dict[str, IngestPass] = {}
        seq = 1
        for done, entry in enumerate(transcript.entries, start=1):
            state = states.get(entry.branch)
            if state is None:
                state = states[entry.branch] = ingest_start(
                    session=session, branch=entry.branch, frame=frames.get(entry.branch, root)
                )
            if entry.kind == "message":
                state.next_seq = seq
                try:
                    _entry_ingest(state, entry)
                except TranscriptInvalid as exc:
                    skipped.append((exc.line, exc.reason))
                seq = state.next_seq
            else:
                figures = UsageFigures(**(entry.usage or {}))
                usage_record_for(
                    session=session,
                    frame=frames.get(entry.branch, root),
                    usage=figures,
                    actor=actor,
                )
                if state.current is not None:
                    turn_touch(state, state.current).occupancy_tokens = figures.occupancy_tokens
            if progress is not None and (done % 200 == 0 or done == total):
                progress(done, total)
        for state in states.values():
            ingest_finish(state)
        for branch in transcript.branches:
            frame_pop(frame=frames[branch], status=Frame.Status.COMPLETED, actor=actor)
        event_append(
            session=session,
            type="conversation.imported",
            frame=root,
            actor=actor,
            payload={
                "format": transcript.format,
                "entries": total,
                "skipped": len(skipped),
                "compactions": transcript.compactions,
            },
        )
        session.refresh_from_db()
        turns = Turn.objects.filter(session=session).count()
    return ImportReport(
        session=session,
        frames=len(frames),
        turns=turns,
        api_calls=session.api_calls_total,
        tool_calls=transcript.count_blocks("tool_use"),
        tool_errors=transcript.count_blocks("tool_result", error=True),
        compactions=transcript.compactions,
        usage_totals=session.usage_totals,
        skipped=sorted(skipped),
    )
