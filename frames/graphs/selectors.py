"""Reads of LangGraph threads: checkpoint tuples as the saver loads them, and threads."""

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, QuerySet
from django.db.models.fields.json import KeyTransform

from contextops.errors import NotFound
from contextops.ids import uuid_or_none
from contextops.models import Organization

from .models import GraphBlob, GraphCheckpoint, GraphInterrupt, GraphThread, GraphWrite


@dataclass(frozen=True)
class CheckpointTuple:
    """A checkpoint with its channel blobs (at the versions it holds) and pending writes."""

    checkpoint: GraphCheckpoint
    blobs: list[GraphBlob]
    writes: list[GraphWrite]


def _thread(organization: Organization, missing: str, **lookup: Any) -> GraphThread:
    thread = (
        GraphThread.objects.filter(organization=organization, **lookup)
        .select_related("session")
        .first()
    )
    if thread is None:
        raise NotFound(missing)
    return thread


def thread_get(*, organization: Organization, thread_id: str) -> GraphThread:
    """The organization's thread of that LangGraph id; NotFound otherwise."""
    return _thread(organization, f"No thread {thread_id!r}.", thread_id=thread_id)


def thread_by_pk(*, organization: Organization, pk: Any) -> GraphThread:
    """The organization's thread by its own id (the dashboard's); NotFound otherwise."""
    return _thread(organization, "No such thread.", pk=pk)


def thread_list(*, organization: Organization, session_id: Any = None) -> QuerySet[GraphThread]:
    """The organization's threads, most recently written first, with their checkpoint counts."""
    threads = GraphThread.objects.filter(organization=organization)
    if session_id is not None:
        session_pk = uuid_or_none(session_id)
        threads = threads.filter(session_id=session_pk) if session_pk else threads.none()
    return threads.select_related("session").annotate(checkpoint_count=Count("checkpoints"))


def checkpoint_list(
    *,
    organization: Organization,
    thread_id: str | None = None,
    checkpoint_ns: str | None = None,
    checkpoint_id: str | None = None,
    before: str | None = None,
    metadata: dict[str, Any] | None = None,
    limit: int | None = None,
    thread: GraphThread | None = None,
) -> list[CheckpointTuple]:
    """Checkpoints newest first (by id), each with its blobs and pending writes.

    ``checkpoint_ns`` None means every namespace; ``metadata`` keeps those whose metadata
    holds every given key with exactly the given value; ``before`` keeps ids below it.
    """
    checkpoints = GraphCheckpoint.objects.filter(thread__organization=organization)
    if thread is not None:
        checkpoints = checkpoints.filter(thread=thread)
    if thread_id is not None:
        checkpoints = checkpoints.filter(thread__thread_id=thread_id)
    if checkpoint_ns is not None:
        checkpoints = checkpoints.filter(checkpoint_ns=checkpoint_ns)
    if checkpoint_id is not None:
        checkpoints = checkpoints.filter(checkpoint_id=checkpoint_id)
    if before is not None:
        checkpoints = checkpoints.filter(checkpoint_id__lt=before)
    for i, (key, value) in enumerate((metadata or {}).items()):
        # An annotation, not ``metadata__<key>``: a key may hold "__" or any character.
        name = f"_metadata_{i}"
        checkpoints = checkpoints.annotate(**{name: KeyTransform(key, "metadata")}).filter(
            **{name: value}
        )
    checkpoints = checkpoints.select_related("thread")
    checkpoints = checkpoints.order_by("-checkpoint_id", "-pk")
    page = list(checkpoints[:limit] if limit is not None else checkpoints)
    return _with_blobs(page)


def _with_blobs(page: list[GraphCheckpoint]) -> list[CheckpointTuple]:
    # One query per (thread, namespace) of the page: the channels and versions it names
    # (a superset of the pairs, matched exactly below).
    channels: dict[tuple[Any, str], set[str]] = defaultdict(set)
    versions: dict[tuple[Any, str], set[str]] = defaultdict(set)
    for cp in page:
        channels[(cp.thread_id, cp.checkpoint_ns)].update(cp.channel_versions)
        versions[(cp.thread_id, cp.checkpoint_ns)].update(
            str(v) for v in cp.channel_versions.values()
        )
    found: dict[tuple[Any, str, str, str], GraphBlob] = {}
    for (thread_pk, ns), names in channels.items():
        for blob in GraphBlob.objects.filter(
            thread_id=thread_pk,
            checkpoint_ns=ns,
            channel__in=sorted(names),
            version__in=sorted(versions[(thread_pk, ns)]),
        ):
            found[(thread_pk, ns, blob.channel, blob.version)] = blob
    ids: dict[tuple[Any, str], list[str]] = defaultdict(list)
    for cp in page:
        ids[(cp.thread_id, cp.checkpoint_ns)].append(cp.checkpoint_id)
    pending: dict[tuple[Any, str, str], list[GraphWrite]] = defaultdict(list)
    for (thread_pk, ns), checkpoint_ids in ids.items():
        for write in GraphWrite.objects.filter(
            thread_id=thread_pk, checkpoint_ns=ns, checkpoint_id__in=checkpoint_ids
        ).order_by("task_path", "task_id", "idx"):
            pending[(thread_pk, ns, write.checkpoint_id)].append(write)
    tuples = []
    for cp in page:
        blobs = [
            found[key]
            for channel, version in cp.channel_versions.items()
            if (key := (cp.thread_id, cp.checkpoint_ns, channel, str(version))) in found
        ]
        writes = pending.get((cp.thread_id, cp.checkpoint_ns, cp.checkpoint_id), [])
        tuples.append(CheckpointTuple(checkpoint=cp, blobs=blobs, writes=writes))
    return tuples


def interrupt_list(*, thread: GraphThread) -> QuerySet[GraphInterrupt]:
    """The thread's interrupts, newest first, with their suspensions and deciders."""
    return GraphInterrupt.objects.filter(thread=thread).select_related(
        "suspension", "suspension__decided_by"
    )
