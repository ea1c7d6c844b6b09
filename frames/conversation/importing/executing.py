"""Executing a transcript import: the job reads the whole text received so far with the
``readers`` and writes the entries beyond those already written, in batches, as one session
with a frame per conversation (the main one and each subagent), its turns and its usage, at
the transcript's own times; ``transcript_import`` writes a complete transcript at once.
"""

import bisect
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import InterfaceError, OperationalError, transaction
from django.db.models import F
from django.utils import timezone

from contextops import tracing
from contextops.errors import Conflict, DomainError, Invalid
from contextops.models import Agent, Organization
from frames.context.lifecycle import session_end
from frames.events import event_append
from frames.locks import session_lock
from frames.models import Event, Frame, Session, Usage
from frames.services.sessions import session_create, session_source_set
from frames.services.stack import frame_pop, frame_push
from frames.services.usage import UsageCall, usage_record_many

from ..counterfactual import COMPACTED_EVENT
from ..ingest import (
    IngestPass,
    UsageFigures,
    contents_counted,
    ingest_finish,
    ingest_start,
    message_ingest,
    turn_touch,
    usage_call,
)
from ..models import Import, TranscriptFile, TranscriptSource, Turn
from ..readers import Entry, FileEntries, Transcript, TranscriptError, count_blocks, read_text
from .receiving import WHOLE_DOCUMENT_FORMATS, import_claim, source_of

logger = logging.getLogger(__name__)
IMPORT_BUDGET_MARGIN = 1_000_000


# A transcript still being written cannot say what it will spend: its root frame gets
# room for any session, and each subagent frame a margin beyond what it spent so far.
IMPORT_LIVE_BUDGET = 100_000_000_000
IMPORT_LIVE_MARGIN = 100_000_000
IMPORT_ACTOR = "import"
IMPORT_BATCH_ENTRIES = 250


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
    unchanged: bool = False

    def as_dict(self) -> dict:
        """The summary ``import_transcript --json`` prints and an import job's result holds."""
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
            "unchanged": self.unchanged,
        }


# -- Writing entries ------------------------------------------------------------------------


def _entry_ingest(state: IngestPass, entry: Entry, tokens: list[int] | None) -> None:
    """Group a message entry into its branch's turns (``tokens``: its blocks' counts, None
    when its content is malformed); ``TranscriptInvalid`` when it is not a valid message."""
    try:
        message_ingest(
            state, role=entry.role, content=entry.content, at=entry.timestamp, tokens=tokens
        )
    except Invalid as exc:
        raise TranscriptInvalid(exc.detail, line=entry.line, field=exc.field) from None


def _spent(entries: Iterable[Entry]) -> dict[str, int]:
    """Window occupancy the entries' model calls spent, by branch."""
    spent: dict[str, int] = {}
    for entry in entries:
        if entry.kind == "usage":
            figures = UsageFigures(**(entry.usage or {}))
            spent[entry.branch] = spent.get(entry.branch, 0) + figures.occupancy_tokens
    return spent


@dataclass
class _Budgets:
    """Frame budgets for the entries one run writes: what they spend plus a margin, or, while
    the transcript is still being written, room for what is still to come."""

    spent: dict[str, int]
    branches: Sequence[str]
    final: bool

    def child(self, branch: str) -> int:
        margin = IMPORT_BUDGET_MARGIN if self.final else IMPORT_LIVE_MARGIN
        return self.spent.get(branch, 0) + margin

    def root(self) -> int:
        exact = (
            self.spent.get("", 0)
            + sum(self.child(b) for b in self.branches if b)
            + IMPORT_BUDGET_MARGIN
        )
        return exact if self.final else max(exact, IMPORT_LIVE_BUDGET)


@dataclass
class _Writer:
    """Writes a transcript's entries into its session inside the caller's transaction:
    frames as their conversations appear, turns, messages and usage at the source's times."""

    session: Session
    frames: dict[str, Frame]
    branches: dict[str, str]
    goal: str
    budgets: _Budgets
    actor: str
    skipped: list[tuple[int, str]] = field(default_factory=list)
    times: dict[Any, datetime] = field(default_factory=dict)  # usage or frame pk -> its time
    written: int = 0
    # A block's text -> its tokens: a transcript repeats much (a file read again, the
    # same tool output), and each distinct text is counted once per import.
    counted: dict[str, int] = field(default_factory=dict)
    # Model calls not yet recorded, with their times: recorded together before the next
    # write that appends an event, so the log keeps the transcript's order.
    calls: list[tuple[UsageCall, datetime | None]] = field(default_factory=list)
    dated: list[Usage] = field(default_factory=list)  # usage records to give their times

    def frame_for(self, branch: str, at: datetime | None) -> Frame:
        """The open frame of ``branch``: pushed now (the root first) when there is none."""
        frame = self.frames.get(branch)
        if frame is not None and frame.status in (Frame.Status.ACTIVE, Frame.Status.WAITING):
            return frame
        self.calls_record()
        if branch:
            root = self.frame_for("", at)
            description = self.branches.get(branch, "") or branch
            frame = frame_push(
                session=self.session,
                parent=root,
                goal=f"{branch}: {description}"[:2000],
                budget_total=self.budgets.child(branch),
                actor=self.actor,
            )
        else:
            frame = frame_push(
                session=self.session,
                goal=self.goal[:2000],
                budget_total=self.budgets.root(),
                actor=self.actor,
            )
        if at is not None:
            Frame.objects.filter(pk=frame.pk).update(created_at=at)
            self.times[frame.pk] = at
        self.frames[branch] = frame
        return frame

    def write(
        self,
        entries: Sequence[Entry],
        progress: Callable[[int, int], None] | None = None,
        total: int | None = None,
    ) -> None:
        """Write ``entries`` in order; ``progress(done, total)`` as they are written."""
        total = len(entries) if total is None else total
        states: dict[str, IngestPass] = {}
        seq: int | None = None
        messages = [entry for entry in entries if entry.kind == "message"]
        counts = dict(
            zip(
                map(id, messages),
                contents_counted([entry.content for entry in messages], self.counted),
                strict=True,
            )
        )
        for entry in entries:
            frame = self.frame_for(entry.branch, entry.timestamp)
            state = states.get(entry.branch)
            if state is None:
                state = states[entry.branch] = ingest_start(
                    session=self.session, branch=entry.branch, frame=frame
                )
            if seq is None:
                seq = state.next_seq
            if entry.kind == "message":
                state.next_seq = seq
                try:
                    _entry_ingest(state, entry, counts[id(entry)])
                except TranscriptInvalid as exc:
                    self.skipped.append((exc.line, exc.reason))
                seq = state.next_seq
            elif entry.kind == "compaction":
                self.compaction(entry, frame, state)
            else:
                figures = UsageFigures(**(entry.usage or {}))
                self.calls.append((usage_call(frame=frame, usage=figures), entry.timestamp))
                if state.current is not None:
                    turn_touch(state, state.current).occupancy_tokens = figures.occupancy_tokens
            self.written += 1
            if progress is not None and (self.written % 200 == 0 or self.written == total):
                progress(self.written, total)
        self.calls_record()
        for state in states.values():
            ingest_finish(state)
        Usage.objects.bulk_update(self.dated, ["created_at"], batch_size=500)
        self.dated = []

    def calls_record(self) -> None:
        """Record the model calls waiting, at their times, before anything else is written."""
        if not self.calls:
            return
        usages = usage_record_many(
            session=self.session, calls=[call for call, _ in self.calls], actor=self.actor
        )
        for usage, (_, moment) in zip(usages, self.calls, strict=True):
            if moment is not None:
                usage.created_at = moment
                self.dated.append(usage)
                self.times[usage.pk] = moment
        self.calls = []

    def compaction(self, entry: Entry, frame: Frame, state: IngestPass) -> None:
        """Record the agent's own compaction in the log: where it fell (before the branch's
        next turn), when, and the window it measured before it (``pre_tokens``)."""
        figures = entry.usage or {}
        self.calls_record()
        event = event_append(
            session=self.session,
            type=COMPACTED_EVENT,
            frame=frame,
            actor=self.actor,
            payload={
                "origin": "transcript",
                "branch": entry.branch,
                "before_turn": state.next_index,
                "pre_tokens": int(figures.get("pre_tokens") or 0),
                "trigger": str(figures.get("trigger") or ""),
                "line": entry.line,
                "at": entry.timestamp.isoformat() if entry.timestamp else None,
            },
        )
        if entry.timestamp is not None:
            self.times[("event", event.pk)] = entry.timestamp

    def finish(self, *, last_times: dict[str, datetime]) -> None:
        """The transcript is complete: its frames close as completed (subagents first, each
        at its last time) and the session ends at the transcript's last time."""
        for branch, frame in sorted(self.frames.items(), key=lambda item: item[0] == ""):
            frame.refresh_from_db()
            if frame.status not in (Frame.Status.ACTIVE, Frame.Status.WAITING):
                continue
            if Frame.objects.filter(parent=frame, status__in=Frame.OPEN_STATUSES).exists():
                continue  # frames the import does not own: the end of the session cancels them
            frame_pop(frame=frame, status=Frame.Status.COMPLETED, actor=self.actor)
            if branch in last_times:
                Frame.objects.filter(pk=frame.pk).update(completed_at=last_times[branch])
        session_end(session=self.session, actor=self.actor)
        ended = max(last_times.values(), default=None)
        if ended is not None:
            Session.objects.filter(pk=self.session.pk).update(ended_at=ended)


def _session_start(
    *,
    organization: Organization,
    agent: Agent | None,
    transcript: Transcript,
    title: str,
    context_window_tokens: int,
    source: dict[str, Any],
    actor: str,
) -> Session:
    """A new session for an imported transcript, started at its first timestamp."""
    session = session_create(
        organization=organization,
        agent=agent,
        identity={"user_name": "transcript import"} if agent is None else {},
        context_window_tokens=context_window_tokens,
        model=transcript.model,
        title=title[:300],
        actor=actor,
    )
    session_source_set(session=session, source=source, started_at=transcript.started_at)
    return session


def _events_dated(session: Session, *, after: int, times: dict[Any, datetime], start: Any) -> None:
    """Give the events appended after ``after`` the transcript's times: a usage record's
    event the time of its call, a pushed frame's the time of its first entry, and every
    other event the time of the event before it (``start`` for the first)."""
    current = start
    dated = []
    for event in Event.objects.filter(session=session, seq__gt=after).order_by("seq"):
        key = None
        if event.type == "usage.recorded":
            key = event.payload.get("usage_id")
        elif event.type == "frame.pushed":
            key = event.frame_id
        elif event.type == COMPACTED_EVENT:
            key = ("event", event.pk)
        current = times.get(key, current) if key is not None else current
        if current is not None:
            event.created_at = current
            dated.append(event)
    Event.objects.bulk_update(dated, ["created_at"], batch_size=500)


def _last_times(entries: Iterable[Entry]) -> dict[str, datetime]:
    """The latest time of each branch's entries."""
    last: dict[str, datetime] = {}
    for entry in entries:
        if entry.timestamp is not None and (
            entry.branch not in last or entry.timestamp > last[entry.branch]
        ):
            last[entry.branch] = entry.timestamp
    return last


def _report(
    session: Session,
    transcript: Transcript,
    entries: list[Entry],
    skipped: list[tuple[int, str]],
    unchanged: bool,
) -> ImportReport:
    """The figures of the session as it stands, read inside the caller's transaction."""
    session.refresh_from_db()
    return ImportReport(
        session=session,
        frames=Frame.objects.filter(session=session).count(),
        turns=Turn.objects.filter(session=session).count(),
        api_calls=session.api_calls_total,
        tool_calls=count_blocks(entries, "tool_use"),
        tool_errors=count_blocks(entries, "tool_result", error=True),
        compactions=transcript.compactions,
        usage_totals=session.usage_totals,
        skipped=sorted(skipped),
        unchanged=unchanged,
    )


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
    """Write a complete, read transcript as one new, ended session, all in one transaction.

    The main conversation goes to a root frame; every subagent to a child frame with its
    own turns (branch = the agent id) and usage. Entries that are not valid messages are
    skipped and reported with their line number; nothing is written when anything else
    fails. ``progress(done, total)`` is called as entries are written.
    """
    budgets = _Budgets(_spent(transcript.entries), list(transcript.branches), final=True)
    with transaction.atomic():
        session = _session_start(
            organization=organization,
            agent=agent,
            transcript=transcript,
            title=title or transcript.title or f"{transcript.format} transcript",
            context_window_tokens=context_window_tokens,
            source={},
            actor=actor,
        )
        writer = _Writer(
            session=session,
            frames={},
            branches=transcript.branches,
            goal=title or transcript.title or f"{transcript.format} transcript",
            budgets=budgets,
            actor=actor,
        )
        writer.frame_for("", transcript.started_at)
        writer.write(transcript.entries, progress)
        skipped = [*transcript.skipped, *writer.skipped]
        _imported_event(
            writer, transcript, entries=len(transcript.entries), skipped=len(skipped), import_id=""
        )
        writer.finish(last_times=_last_times(transcript.entries))
        _events_dated(session, after=0, times=writer.times, start=transcript.started_at)
        report = _report(session, transcript, transcript.entries, skipped, unchanged=False)
    return report


def _imported_event(
    writer: _Writer, transcript: Transcript, *, entries: int, skipped: int, import_id: str
) -> None:
    event_append(
        session=writer.session,
        type="conversation.imported",
        frame=writer.frames.get(""),
        actor=writer.actor,
        payload={
            "format": transcript.format,
            "entries": entries,
            "skipped": skipped,
            "compactions": transcript.compactions,
            "import_id": import_id,
        },
    )


def import_execute(
    *, import_id: str, progress: Callable[[int, int], None] | None = None
) -> Import | None:
    """Run a queued import; None when it is not there or not claimable (a repeated delivery).

    Writes in batches, each in its own transaction with the job's progress, so a reader
    sees the progress move; what a failed run wrote stays, and the next run goes on from
    there. The job ends completed with the import summary as its result, or failed with
    the error.
    """
    if not import_claim(import_id=import_id):
        return None
    with tracing.span("import", {"contextops.import.id": str(import_id)}) as current:
        job = _import_guarded(import_id, progress)
        tracing.span_set(
            current,
            {"contextops.import.status": job.status, "gen_ai.conversation.id": _session_id_of(job)},
        )
    return job


def _session_id_of(job: Import) -> str | None:
    session_id = (job.result or {}).get("session_id") if isinstance(job.result, dict) else None
    return str(session_id) if session_id else None


def _import_guarded(import_id: str, progress: Callable[[int, int], None] | None) -> Import:
    """``_import_apply``, a failure recorded on the job."""
    try:
        _import_apply(import_id, progress)
    except DomainError as exc:
        _import_failed(import_id, {"error": exc.code, "detail": exc.detail})
    except TranscriptError as exc:
        _import_failed(import_id, {"error": "transcript_invalid", "detail": str(exc)})
    except (OperationalError, InterfaceError):
        # The database went away mid-job: what committed stays, the rest is not a failure
        # of the transcript; the job stays claimed until stale, then the sweep sends it again.
        raise
    except Exception as exc:  # the job must not stay "running" forever
        logger.exception("import %s failed", import_id)
        _import_failed(
            import_id,
            {"error": "internal_error", "detail": f"The import failed: {type(exc).__name__}."},
        )
    return Import.objects.select_related("source").get(pk=import_id)


def _import_failed(import_id: str, error: dict) -> None:
    Import.objects.filter(pk=import_id, status=Import.Status.RUNNING).update(
        status=Import.Status.FAILED, error=error, finished_at=timezone.now()
    )


@dataclass
class _FilePlan:
    """A file's entries as this run read them, and a digest of its messages so far."""

    row: TranscriptFile
    read: FileEntries
    digest: Any = field(default_factory=hashlib.sha256)
    hashed: int = 0  # entries looked at by the digest
    lines: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lines = [entry.line for entry in self.read.entries]

    def after(self, line: int) -> int:
        """The index of the file's first entry beyond ``line``."""
        return bisect.bisect_right(self.lines, line)

    def pending(self, line: int) -> list[Entry]:
        """The settled entries beyond ``line``: what is left to write."""
        return self.read.entries[self.after(line) : self.read.settled]

    def digest_through(self, line: int) -> str:
        """The SHA-256 of the file's messages up to ``line``, in order.

        Messages only: the usage of a response is placed after its last line, so when a
        transcript imported as final grows inside a response, its usage moves; the usage
        record, idempotent by message id, is then not charged twice.
        """
        end = self.after(line)
        if end < self.hashed:
            self.digest, self.hashed = hashlib.sha256(), 0
        for entry in self.read.entries[self.hashed : end]:
            if entry.kind == "message":
                self.digest.update(entry.fingerprint())
        self.hashed = end
        return self.digest.hexdigest()


def _import_apply(import_id: str, progress: Callable[[int, int], None] | None) -> None:
    job = Import.objects.select_related("source", "agent").get(pk=import_id)
    source = job.source
    rows = {f.name: f for f in source.files.all()}
    main = next((f for f in rows.values() if f.main), None)
    if main is None:
        raise Invalid("The import holds no file.", field="file_name")
    final = source.final
    waiting = source.format in WHOLE_DOCUMENT_FORMATS and not final
    if waiting or (source.session_id is None and not any(f.size for f in rows.values())):
        # A JSON or YAML document is read once its last part is in; an empty file (Claude
        # Code's SessionStart comes before the first line) makes no session yet.
        _import_done(job, report=None, session=source.session)
        return
    transcript = read_text(
        source.format,
        name=main.name,
        text=main.text,
        subagents=[(f.name, f.text) for f in rows.values() if not f.main],
        growing=not final,
    )
    plans = [_FilePlan(rows[read.name], read) for read in transcript.files if read.name in rows]
    settled = transcript.settled_entries
    todo = [entry for plan in plans for entry in plan.pending(plan.row.written_through)]
    total = len(todo)
    # A job run again (its worker died midway) goes on from what the first run wrote:
    # the total is what is done plus what is left, so done never passes it.
    Import.objects.filter(pk=import_id).update(progress_total=F("progress_done") + total)
    budgets = _Budgets(_spent(todo), list(transcript.branches), final=final)
    changed = False
    done = 0
    counted: dict[str, int] = {}  # one count of each text for the run's batches
    try:
        for plan in plans:
            while True:
                with transaction.atomic():
                    written = _batch_write(job, plan, transcript, budgets, counted)
                if written == 0:
                    break
                changed = True
                done += written
                if progress is not None:
                    progress(done, total)
    except _Superseded:
        # A later part arrived while this job ran: the job that part queued reads the
        # whole file and goes on from what this one wrote; this one ends here.
        _import_done(job, report=None, session=Import.objects.get(pk=job.pk).session)
        return
    with transaction.atomic():
        changed = _import_finish(job, transcript, settled, final, changed, todo)


def _session_title(source: TranscriptSource, transcript: Transcript) -> str:
    """An upload's title, else the transcript's summary or first prompt, else its file name."""
    return (source.title or transcript.title or source.file_name)[:300]


def _writer_for(
    job: Import,
    source: TranscriptSource,
    transcript: Transcript,
    budgets: _Budgets,
    at: datetime | None,
    *,
    reopen: bool,
) -> tuple[_Writer, bool]:
    """A writer into the source's session, started when there is none (and, with
    ``reopen``, reopened when it has ended); True when it started or reopened it."""
    title = _session_title(source, transcript)
    started = False
    begins = at  # a resumed part begins at its first entry
    session = source.session
    if session is None:
        begins = transcript.started_at or at
        session = _session_start(
            organization=job.organization,
            agent=job.agent,
            transcript=transcript,
            title=title,
            context_window_tokens=source.context_window_tokens,
            source=source_of(source),
            actor=IMPORT_ACTOR,
        )
        source.session = session
        started = True
    else:
        session = session_lock(session, open_only=False)
        if reopen and session.lifecycle_state == Session.Lifecycle.ENDED:
            # The transcript grew after it was complete (a resumed Claude Code session).
            Session.objects.filter(pk=session.pk).update(
                lifecycle_state=Session.Lifecycle.ACTIVE, ended_at=None, updated_at=timezone.now()
            )
            event_append(session=session, type="session.reopened", actor=IMPORT_ACTOR)
            session.refresh_from_db()
            started = True
    frames = {
        branch: frame
        for branch, frame in (
            (branch, Frame.objects.filter(pk=pk, session=session).first())
            for branch, pk in source.frames.items()
        )
        if frame is not None
    }
    writer = _Writer(
        session=session,
        frames=frames,
        branches=transcript.branches,
        goal=title,
        budgets=budgets,
        actor=IMPORT_ACTOR,
    )
    if started:
        writer.frame_for("", begins)
    return writer, started


def _frames_kept(source: TranscriptSource, writer: _Writer) -> None:
    source.frames = {branch: str(frame.pk) for branch, frame in writer.frames.items()}


class _Superseded(Exception):
    """The file grew after this job read it: the job of the later part imports the rest."""


def _batch_write(
    job: Import,
    plan: _FilePlan,
    transcript: Transcript,
    budgets: _Budgets,
    counted: dict[str, int],
) -> int:
    """Write the next batch of a file's settled entries; how many were written (0: none left).

    Raises _Superseded when the file no longer is what this job read: two jobs of one
    transcript may run at once (a part uploaded while the previous part's job runs), and
    the older one must not write, nor judge the newer one's progress against its shorter
    copy of the file (which would read as a changed transcript).
    """
    source = TranscriptSource.objects.select_for_update(no_key=True).get(pk=job.source_id)
    row = TranscriptFile.objects.select_for_update(no_key=True).get(pk=plan.row.pk)
    if row.size != plan.row.size:
        raise _Superseded(row.name)
    entries = plan.read.entries
    if row.written_through and plan.digest_through(row.written_through) != row.digest:
        raise Conflict(
            "transcript_changed",
            f"{row.name} no longer begins with what was imported from it; "
            "import the changed transcript under another file name.",
        )
    start = plan.after(row.written_through)
    end = min(plan.read.settled, start + IMPORT_BATCH_ENTRIES)
    while end < plan.read.settled and entries[end].line == entries[end - 1].line:
        end += 1  # a response's usage shares its last line: a batch ends after both
    batch = entries[start:end]
    if not batch:
        return 0
    first = next((e.timestamp for e in batch if e.timestamp is not None), None)
    after = _last_seq(source.session)
    writer, _ = _writer_for(job, source, transcript, budgets, first, reopen=True)
    writer.counted = counted
    writer.write(batch)
    _events_dated(writer.session, after=after, times=writer.times, start=first)
    row.written_through = batch[-1].line
    row.digest = plan.digest_through(row.written_through)
    row.save(update_fields=["written_through", "digest"])
    _frames_kept(source, writer)
    source.skipped = [*source.skipped, *([line, reason] for line, reason in writer.skipped)]
    source.save(update_fields=["session", "frames", "skipped"])
    Import.objects.filter(pk=job.pk).update(
        progress_done=F("progress_done") + len(batch), session=writer.session
    )
    return len(batch)


def _last_seq(session: Session | None) -> int:
    """The session's last event number (0 before it exists)."""
    if session is None:
        return 0
    return Session.objects.values_list("last_event_seq", flat=True).get(pk=session.pk)


def _import_finish(
    job: Import,
    transcript: Transcript,
    settled: list[Entry],
    final: bool,
    changed: bool,
    todo: list[Entry],
) -> bool:
    """The run's last transaction: the session's title, source and times, its end when the
    transcript is final, the ``conversation.imported`` event and the job's result."""
    source = TranscriptSource.objects.select_for_update(no_key=True).get(pk=job.source_id)
    budgets = _Budgets({}, list(transcript.branches), final=final)
    last_times = _last_times(settled)
    last = max(last_times.values(), default=None)
    after = _last_seq(source.session)
    kept = (source.session_id, dict(source.frames), source.tool_version)
    writer, started = _writer_for(job, source, transcript, budgets, last, reopen=False)
    changed = changed or started
    session = writer.session
    fields: dict[str, Any] = {}
    title = _session_title(source, transcript)
    if session.title != title:
        fields["title"] = title
    if transcript.model and not session.model:
        fields["model"] = transcript.model
    if transcript.started_at is not None and session.started_at != transcript.started_at:
        fields["started_at"] = transcript.started_at
    if transcript.tool_version and source.tool_version != transcript.tool_version:
        source.tool_version = transcript.tool_version
    if session.source != source_of(source):
        fields["source"] = source_of(source)
    if fields:
        Session.objects.filter(pk=session.pk).update(**fields)
    if "title" in fields:
        _root_goal_follow(writer, old=session.title, new=title)
    skipped = [*transcript.skipped, *((line, reason) for line, reason in source.skipped)]
    if changed:
        _imported_event(
            writer, transcript, entries=len(todo), skipped=len(skipped), import_id=job.pk
        )
    if final and session.lifecycle_state != Session.Lifecycle.ENDED:
        writer.finish(last_times=last_times)
        changed = True
    _events_dated(session, after=after, times=writer.times, start=last)
    _frames_kept(source, writer)
    if (source.session_id, source.frames, source.tool_version) != kept:
        source.save(update_fields=["session", "frames", "tool_version"])
    report = _report(session, transcript, settled, skipped, unchanged=not changed)
    _import_done(job, report=report, session=session)
    return changed


def _root_goal_follow(writer: _Writer, *, old: str, new: str) -> None:
    """The root frame is named for the session. When the title improves (a live capture's
    first part held no prompt yet, so the file name stood in), a root still named for the
    old title takes the new one, logged as ``frame.updated``: live and one-shot imports of
    one transcript end alike."""
    root = writer.frames.get("")
    if root is None or root.goal != old[:2000]:
        return
    goal = new[:2000]
    Frame.objects.filter(pk=root.pk).update(goal=goal)
    root.goal = goal
    event_append(
        session=writer.session,
        type="frame.updated",
        frame=root,
        actor=IMPORT_ACTOR,
        payload={"goal": goal, "from": {"goal": old[:2000]}},
    )


def _import_done(job: Import, *, report: ImportReport | None, session: Session | None) -> None:
    Import.objects.filter(pk=job.pk, status=Import.Status.RUNNING).update(
        status=Import.Status.COMPLETED,
        result=report.as_dict() if report is not None else None,
        session=session,
        finished_at=timezone.now(),
    )
