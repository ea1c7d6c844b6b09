"""Writes of LangGraph threads: checkpoints, pending writes, deletes, copies and pruning.

Each write is one transaction: it locks the thread's session row first (``frames.locks``),
then changes the thread's rows, and appends its event to that session's log.
"""

import base64
import binascii
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from contextops.errors import Conflict, Invalid, NotFound
from contextops.models import Agent, Organization
from contextops.text import asked_in_words
from frames.events import event_append
from frames.locks import session_lock, session_require_not_ended
from frames.models import Session, Suspension
from frames.services.sessions import session_activated, session_create
from frames.services.stack import frame_push
from frames.suspensions.services import suspension_create, suspension_passed

from .models import GraphBlob, GraphCheckpoint, GraphInterrupt, GraphThread, GraphWrite

Copied = TypeVar("Copied", GraphCheckpoint, GraphBlob, GraphWrite)
T = TypeVar("T")

PRUNE_STRATEGIES = ("keep_latest", "delete")
INTERRUPT = "__interrupt__"  # LangGraph's channel for a task's interrupt() values
ERROR = "__error__"  # and for the error a task failed with
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"  # writes of no task (a Command's)
INTERRUPT_FRAME_BUDGET = 1_000
REASON_CHARS = 500


def task_node(task_path: str) -> str:
    """The node a task ran, from LangGraph's task path (``('~__pregel_pull', 'plan')``)."""
    return task_path.strip("()").split(",")[-1].strip(" '\"") if task_path else ""


def interrupt_text(preview: Any) -> str:
    """What an interrupt asks, as one line of words: each value's question, then its
    fields (``Publish this draft? (Draft: ...)``)."""
    parts = []
    for ask in asked_in_words(preview):
        fields = "; ".join(f"{label}: {text}" for label, text in ask["fields"])
        words = " ".join(p for p in (ask["question"], f"({fields})" if fields else "") if p)
        parts.append(words)
    text = "; ".join(p for p in parts if p) or "(no value)"
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


@dataclass(frozen=True)
class Blob:
    """A value as LangGraph's serializer wrote it: a type name and base64 bytes."""

    type: str
    data: str


@dataclass(frozen=True)
class ChannelBlob:
    channel: str
    version: str
    blob: Blob
    preview: Any = None


@dataclass(frozen=True)
class PendingWrite:
    idx: int
    channel: str
    blob: Blob
    preview: Any = None


def _bytes(blob: Blob, field: str | Sequence[str | int]) -> bytes:
    try:
        return base64.b64decode(blob.data.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise Invalid("data must be base64.", field=field) from None


def thread_id_check(thread_id: str, field: str = "thread_id") -> None:
    """Invalid unless ``thread_id`` can name a thread (and a path segment): 1-255, no ``/``."""
    if not thread_id or len(thread_id) > 255:
        raise Invalid("A thread id has 1 to 255 characters.", field=field)
    if "/" in thread_id:
        raise Invalid("A thread id may not contain '/'.", field=field)


def _thread_locked(*, organization: Organization, thread_id: str) -> GraphThread | None:
    """The thread, its session locked first and then its own row; None when there is none."""
    session_pk = (
        GraphThread.objects.filter(organization=organization, thread_id=thread_id)
        .values_list("session_id", flat=True)
        .first()
    )
    if session_pk is None:
        return None
    session = session_lock(session_pk, open_only=False)
    thread = GraphThread.objects.select_for_update(no_key=True).get(
        organization=organization, thread_id=thread_id
    )
    thread.session = session
    return thread


def _retrying_once(write):
    """Run ``write``; a second writer that created the same row first makes it run again."""
    try:
        return write()
    except IntegrityError:
        return write()


def _thread_write(
    write: Callable[[GraphThread], T],
    organization: Organization,
    agent: Agent | None,
    thread_id: str,
    session: Session | None,
    actor: str,
    /,
    *,
    missing: str = "",
) -> T:
    """``write`` of the thread, locked, in one transaction, retried once as
    ``_retrying_once`` says. The two writes pass their own arguments on, in the order
    they declare them.

    The thread is created (in ``session`` or a new one) when new, unless ``missing``
    says why a new one may not be: NotFound with it.
    """

    def attempt() -> T:
        with transaction.atomic():
            thread = _thread_locked(organization=organization, thread_id=thread_id)
            if thread is None and missing:
                raise NotFound(missing)
            if thread is not None:
                if session is not None and thread.session_id != session.pk:
                    raise Conflict(
                        "thread_in_other_session",
                        f"Thread {thread_id!r} belongs to another session.",
                        session_id=str(thread.session_id),
                    )
                session_require_not_ended(thread.session)  # an ended one takes no more work
                return write(thread)
            opened_in = session or session_create(
                organization=organization,
                agent=agent,
                title=f"LangGraph thread {thread_id}"[:300],
                model="langgraph",
                actor=actor,
            )
            session_lock(opened_in)
            thread = GraphThread.objects.create(
                organization=organization, session=opened_in, thread_id=thread_id
            )
            event_append(
                session=opened_in,
                type="graph.thread_created",
                actor=actor,
                payload={"thread_id": thread_id},
            )
            return write(thread)

    return _retrying_once(attempt)


@dataclass(frozen=True)
class CheckpointSaved:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    session_id: str


def checkpoint_put(
    *,
    organization: Organization,
    agent: Agent | None = None,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str,
    checkpoint: Blob,
    channel_versions: dict[str, Any],
    blobs: Sequence[ChannelBlob],
    metadata: dict[str, Any],
    metadata_blob: Blob | None = None,
    session: Session | None = None,
    actor: str = "",
) -> CheckpointSaved:
    """Store a checkpoint (replacing one of the same id) and the channel blobs it brings.

    A blob of a (channel, version) already stored is kept as it is: a version names one
    value. The thread and its session are created on the first checkpoint (in ``session``
    when given). Conflict ``session_ended`` once the thread's session has ended.

    Long because most of it is the checkpoint's and its blobs' fields written out one a
    line; the steps (open the thread, store, pass interrupts, log) already call their
    own functions.
    """
    thread_id_check(thread_id)
    data = _bytes(checkpoint, "checkpoint.data")
    metadata_data = _bytes(metadata_blob, "metadata_blob.data") if metadata_blob else None
    blob_rows = [(b, _bytes(b.blob, ("blobs", i, "data"))) for i, b in enumerate(blobs)]
    run_id = metadata.get("run_id")
    step = metadata.get("step")

    def write(thread: GraphThread) -> CheckpointSaved:
        GraphCheckpoint.objects.update_or_create(
            thread=thread,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            defaults={
                "parent_checkpoint_id": parent_checkpoint_id,
                "type": checkpoint.type,
                "data": data,
                "channel_versions": channel_versions,
                "metadata": metadata,
                "metadata_type": metadata_blob.type if metadata_blob else "",
                "metadata_data": metadata_data,
                "run_id": str(run_id)[:255] if run_id is not None else "",
                "step": step if isinstance(step, int) and abs(step) < 2**31 else None,
                "source": str(metadata.get("source") or "")[:40],
            },
        )
        GraphBlob.objects.bulk_create(
            [
                GraphBlob(
                    thread=thread,
                    checkpoint_ns=checkpoint_ns,
                    channel=b.channel,
                    version=b.version,
                    type=b.blob.type,
                    data=raw,
                    preview=b.preview,
                )
                for b, raw in blob_rows
            ],
            ignore_conflicts=True,
        )
        thread.updated_at = timezone.now()
        thread.save(update_fields=["updated_at"])
        if parent_checkpoint_id:
            # A checkpoint after an interrupted one: the thread went past it.
            _interrupts_passed(
                thread=thread,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=parent_checkpoint_id,
                actor=actor,
                past=checkpoint_id,
            )
        event_append(
            session=thread.session,
            type="graph.checkpoint_saved",
            actor=actor,
            payload={
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
                "step": step if isinstance(step, int) else None,
                "source": metadata.get("source"),
            },
        )
        # The graph is at work in its session: a loading one shows as active.
        session_activated(session=thread.session, actor=actor)
        return CheckpointSaved(
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            session_id=str(thread.session_id),
        )

    return _thread_write(write, organization, agent, thread_id, session, actor)


def writes_put(
    *,
    organization: Organization,
    agent: Agent | None = None,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[PendingWrite],
    session: Session | None = None,
    actor: str = "",
) -> int:
    """Store a task's pending writes against a checkpoint; return how many changed.

    LangGraph's rule: a write whose index is already stored for the task is kept (a
    retried task writes nothing twice), except the special channels (negative indexes:
    errors, interrupts, ...), which replace what was there. The checkpoint need not be
    stored yet: LangGraph's async durability sends a step's writes while its checkpoint
    is on its way, so a thread that holds a checkpoint takes writes for the next one.
    NotFound when the organization holds no such thread (neither the checkpoint nor its
    thread): writes never create a thread or a session. Conflict ``session_ended`` once
    the thread's session ended, ``thread_in_other_session`` when ``session`` is another.

    Long because most of it is the writes' fields written out one a line, with
    LangGraph's keep-or-replace rule beside them.
    """
    thread_id_check(thread_id)
    raws = [_bytes(w.blob, ("writes", i, "data")) for i, w in enumerate(writes)]

    def write(thread: GraphThread) -> int:
        at: dict[str, Any] = {
            "thread": thread,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
        stored = set(GraphWrite.objects.filter(**at, task_id=task_id).values_list("idx", flat=True))
        changed = []
        for w, raw in zip(writes, raws, strict=True):
            if w.idx >= 0 and w.idx in stored:
                continue
            GraphWrite.objects.update_or_create(
                **at,
                task_id=task_id,
                idx=w.idx,
                defaults={
                    "task_path": task_path,
                    "channel": w.channel,
                    "type": w.blob.type,
                    "data": raw,
                    "preview": w.preview,
                },
            )
            stored.add(w.idx)
            changed.append(w.channel)
        channels = {w.channel for w in writes}
        if channels and not channels & {INTERRUPT, ERROR} and task_id != NULL_TASK_ID:
            # The task wrote its outcome: it got past the interrupt it stopped at.
            _interrupts_passed(
                thread=thread,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=checkpoint_id,
                task_id=task_id,
                actor=actor,
            )
        for w in writes:
            if w.channel == INTERRUPT:
                _interrupt_suspend(
                    thread=thread,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint_id=checkpoint_id,
                    task_id=task_id,
                    task_path=task_path,
                    value=w.preview,
                    actor=actor,
                )
        if changed:
            event_append(
                session=thread.session,
                type="graph.writes_saved",
                actor=actor,
                payload={
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": checkpoint_id,
                    "task_id": task_id,
                    "channels": changed,
                },
            )
        return len(changed)

    missing = f"No checkpoint {checkpoint_id!r} and no thread {thread_id!r}."
    return _thread_write(write, organization, agent, thread_id, session, actor, missing=missing)


def _interrupt_suspend(
    *,
    thread: GraphThread,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    value: Any,
    actor: str,
) -> GraphInterrupt | None:
    """A frame of the thread's session for the interrupted task, suspended for approval,
    so it shows in the inbox; once per task and checkpoint (a replaced write adds none)."""
    at = {
        "thread": thread,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "task_id": task_id,
    }
    known = GraphInterrupt.objects.filter(**at).select_related("suspension").first()
    if known is not None and known.value == value:
        return None  # the same question again (a retried write): its card stands
    waiting = GraphInterrupt.objects.filter(
        thread=thread, suspension__status__in=Suspension.OPEN_STATUSES
    ).only("value")
    if any(other.value == value for other in waiting if other != known):
        # The same interrupts (ids and values) already wait on a card: a subgraph's
        # interrupt reaches its parent's task too, and is asked once.
        return None
    if known is not None:
        # The task was resumed and asks again (a node with several interrupt() calls):
        # the first question was answered, the new one gets its own card.
        suspension_passed(
            suspension=known.suspension,
            actor=actor,
            result={"langgraph": "answered; the task asks again", "node": known.node},
        )
    node = task_node(task_path)
    frame = frame_push(
        session=thread.session,
        goal=f"LangGraph {node or 'task'} in thread {thread.thread_id}"[:500],
        inputs={
            "thread_id": thread.thread_id,
            "checkpoint_id": checkpoint_id,
            "node": node,
            "interrupt": value,
        },
        budget_total=INTERRUPT_FRAME_BUDGET,
        actor=actor,
    )
    suspension = suspension_create(
        frame=frame, reason=interrupt_text(value), requires_approval=True, actor=actor
    )
    if known is not None:
        known.value, known.frame, known.suspension = value, frame, suspension
        known.save(update_fields=["value", "frame", "suspension"])
        return known
    return GraphInterrupt.objects.create(
        **at, node=node[:255], value=value, frame=frame, suspension=suspension
    )


def _interrupts_passed(
    *,
    thread: GraphThread,
    checkpoint_ns: str,
    checkpoint_id: str,
    actor: str,
    task_id: str | None = None,
    past: str = "",
) -> int:
    """The thread went past the interrupts of ``checkpoint_id`` (of ``task_id`` alone,
    given one): each still waiting ends ``resumed`` by ``actor``, its frame completed, so
    its card leaves the inbox however the graph was resumed. Returns how many ended."""
    interrupts = GraphInterrupt.objects.filter(
        thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
    ).select_related("suspension")
    if task_id is not None:
        interrupts = interrupts.filter(task_id=task_id)
    ended = 0
    for found in interrupts:
        result: dict[str, Any] = {"langgraph": "resumed past the interrupt", "node": found.node}
        if past:
            result["checkpoint_id"] = past
        ended += suspension_passed(suspension=found.suspension, actor=actor, result=result)
    return ended


def thread_delete(*, organization: Organization, thread_id: str, actor: str = "") -> None:
    """Delete a thread with every checkpoint, blob and write; NotFound when there is none."""
    with transaction.atomic():
        thread = _thread_locked(organization=organization, thread_id=thread_id)
        if thread is None:
            raise NotFound(f"No thread {thread_id!r}.")
        event_append(
            session=thread.session,
            type="graph.thread_deleted",
            actor=actor,
            payload={"thread_id": thread_id},
        )
        thread.delete()


def _checkpoints_delete(checkpoints) -> int:
    """Delete checkpoints with their writes; return how many checkpoints went."""
    keys = list(checkpoints.values_list("thread_id", "checkpoint_ns", "checkpoint_id"))
    by_place: dict[tuple[Any, str], list[str]] = {}
    for thread_pk, ns, checkpoint_id in keys:
        by_place.setdefault((thread_pk, ns), []).append(checkpoint_id)
    for (thread_pk, ns), ids in by_place.items():
        GraphWrite.objects.filter(
            thread_id=thread_pk, checkpoint_ns=ns, checkpoint_id__in=ids
        ).delete()
    GraphCheckpoint.objects.filter(pk__in=checkpoints.values("pk")).delete()
    return len(keys)


def _sessions_locked(session_pks: set[Any]) -> None:
    # One order everywhere (by primary key), so two bulk deletes never deadlock.
    for pk in sorted(session_pks, key=str):
        session_lock(pk, open_only=False)


def runs_delete(*, organization: Organization, run_ids: Sequence[str], actor: str = "") -> int:
    """Delete the checkpoints (and their writes) of these runs in every thread; return how many."""
    if not run_ids:
        return 0
    with transaction.atomic():
        found = GraphCheckpoint.objects.filter(
            thread__organization=organization, run_id__in=list(run_ids)
        )
        by_thread = dict(found.values_list("thread_id", "thread__session_id").distinct())
        _sessions_locked(set(by_thread.values()))
        threads = GraphThread.objects.select_for_update(no_key=True).filter(pk__in=list(by_thread))
        deleted = 0
        for thread in threads.select_related("session"):
            count = _checkpoints_delete(
                GraphCheckpoint.objects.filter(thread=thread, run_id__in=list(run_ids))
            )
            deleted += count
            event_append(
                session=thread.session,
                type="graph.runs_deleted",
                actor=actor,
                payload={"thread_id": thread.thread_id, "run_ids": list(run_ids)[:100]},
            )
    return deleted


def _copies(rows: Iterable[Copied], *, thread: GraphThread, **changes: Any) -> list[Copied]:
    """Unsaved copies of ``rows`` (checkpoints, blobs or writes) for ``thread``, each with
    ``changes`` set; ``bulk_create`` saves them."""
    copies = []
    for row in rows:
        row.pk = None
        row.thread = thread
        for name, value in changes.items():
            setattr(row, name, value)
        copies.append(row)
    return copies


def thread_copy(
    *, organization: Organization, source_thread_id: str, target_thread_id: str, actor: str = ""
) -> tuple[GraphThread, int]:
    """Copy every checkpoint, blob and write of a thread to another (made in the same session).

    What the target already holds stays; NotFound when the source does not exist. Returns
    the target and how many checkpoints it holds, read inside the transaction.

    Long because it copies three tables (checkpoints, blobs, writes) in one transaction
    under both threads' locks, each copy a few lines of fields.
    """
    thread_id_check(target_thread_id, field="target_thread_id")
    if source_thread_id == target_thread_id:
        raise Invalid("A thread cannot be copied onto itself.", field="target_thread_id")

    def write() -> tuple[GraphThread, int]:
        with transaction.atomic():
            source = _thread_locked(organization=organization, thread_id=source_thread_id)
            if source is None:
                raise NotFound(f"No thread {source_thread_id!r}.")
            target = _thread_locked(organization=organization, thread_id=target_thread_id)
            if target is None:
                target = GraphThread.objects.create(
                    organization=organization, session=source.session, thread_id=target_thread_id
                )
            GraphBlob.objects.bulk_create(
                _copies(source.blobs.all(), thread=target), ignore_conflicts=True
            )
            have = set(target.checkpoints.values_list("checkpoint_ns", "checkpoint_id"))
            checkpoints = source.checkpoints.all()
            copies = _copies(
                (c for c in checkpoints if (c.checkpoint_ns, c.checkpoint_id) not in have),
                thread=target,
            )
            GraphCheckpoint.objects.bulk_create(copies)
            GraphWrite.objects.bulk_create(
                _copies(source.writes.all(), thread=target, created_at=timezone.now()),
                ignore_conflicts=True,
            )
            target.updated_at = timezone.now()
            target.save(update_fields=["updated_at"])
            sessions = {source.session_id: source.session, target.session_id: target.session}
            for session in sessions.values():
                event_append(
                    session=session,
                    type="graph.thread_copied",
                    actor=actor,
                    payload={
                        "thread_id": source_thread_id,
                        "target_thread_id": target_thread_id,
                        "checkpoints": len(copies),
                    },
                )
            return target, target.checkpoints.count()

    return _retrying_once(write)


def threads_prune(
    *,
    organization: Organization,
    thread_ids: Sequence[str],
    strategy: str = "keep_latest",
    actor: str = "",
) -> int:
    """Prune threads: ``keep_latest`` keeps each namespace's newest checkpoint (and its
    writes and the blobs it holds), ``delete`` removes every checkpoint. Returns how many
    checkpoints went; unknown thread ids are skipped."""
    if strategy not in PRUNE_STRATEGIES:
        raise Invalid(
            f"Unknown strategy {strategy!r}; available: {', '.join(PRUNE_STRATEGIES)}.",
            field="strategy",
            available=list(PRUNE_STRATEGIES),
        )
    if not thread_ids:
        return 0
    with transaction.atomic():
        found = GraphThread.objects.filter(
            organization=organization, thread_id__in=list(thread_ids)
        )
        _sessions_locked(set(found.values_list("session_id", flat=True)))
        pruned = 0
        for thread in found.select_for_update(no_key=True).select_related("session"):
            checkpoints = GraphCheckpoint.objects.filter(thread=thread)
            blobs = GraphBlob.objects.filter(thread=thread)
            if strategy == "keep_latest":
                latest = checkpoints.values("checkpoint_ns").annotate(last=Max("checkpoint_id"))
                keep = [
                    cp
                    for row in latest
                    for cp in checkpoints.filter(
                        checkpoint_ns=row["checkpoint_ns"], checkpoint_id=row["last"]
                    )
                ]
                count = _checkpoints_delete(checkpoints.exclude(pk__in=[cp.pk for cp in keep]))
                held = {
                    (cp.checkpoint_ns, channel, str(version))
                    for cp in keep
                    for channel, version in cp.channel_versions.items()
                }
                stale = [
                    pk
                    for pk, ns, channel, version in blobs.values_list(
                        "pk", "checkpoint_ns", "channel", "version"
                    )
                    if (ns, channel, version) not in held
                ]
                GraphBlob.objects.filter(pk__in=stale).delete()
            else:
                count = _checkpoints_delete(checkpoints)
                blobs.delete()
                GraphWrite.objects.filter(thread=thread).delete()
            pruned += count
            event_append(
                session=thread.session,
                type="graph.thread_pruned",
                actor=actor,
                payload={"thread_id": thread.thread_id, "strategy": strategy, "removed": count},
            )
    return pruned
