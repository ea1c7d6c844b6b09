"""The retention policy of the event log: ended sessions' events move to the default storage.

A session that ended more than ``CONTEXTOPS_EVENT_RETENTION_DAYS`` ago keeps its frames,
budgets, totals and everything else in the tables (the projections); its events leave
the event table for one JSON Lines file in Django's default storage (a bucket shared by
every host in production), recorded by an ``EventArchive`` row. Readers of a whole log
(``session_events``: projections, ``rebuild_projections``, the events API) read the
archived files first, then what is still in the table, in sequence order, so nothing a
person or ``rebuild_projections --verify`` sees changes.

Archiving appends no event of its own: it moves the log rather than changing what it
says, and a marker left in the table would itself be archived by the next run.
"""

import hashlib
import json
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from .locks import session_lock
from .models import Event, EventArchive, Session

# One run of the beat job archives at most this many sessions; the next run takes the rest.
SESSIONS_PER_RUN = 200


def event_record(event: Event) -> dict[str, Any]:
    """One event as a line of an archive file."""
    return {
        "seq": event.seq,
        "type": event.type,
        "frame_id": str(event.frame_id) if event.frame_id else None,
        "actor": event.actor,
        "payload": event.payload,
        "created_at": event.created_at.isoformat(),
    }


def event_from_record(session: Session, record: dict[str, Any]) -> Event:
    """An archived event as an (unsaved) ``Event``, so readers need not tell the two apart."""
    return Event(
        session=session,
        seq=record["seq"],
        type=record["type"],
        frame_id=record["frame_id"],
        actor=record["actor"],
        payload=record["payload"],
        created_at=datetime.fromisoformat(record["created_at"]),
    )


def archive_events(session: Session, archive: EventArchive) -> Iterator[Event]:
    """The events one archive file holds, in sequence order."""
    with default_storage.open(archive.file_name, "rb") as handle:
        for line in handle.read().decode().splitlines():
            if line:
                yield event_from_record(session, json.loads(line))


def session_events(session: Session, *, after: int = 0) -> Iterator[Event]:
    """Every event of ``session`` after ``after``, archived or not, in sequence order."""
    archives = EventArchive.objects.filter(session=session, last_seq__gt=after).order_by(
        "first_seq"
    )
    for archive in archives:
        for event in archive_events(session, archive):
            if event.seq > after:
                yield event
    yield from (
        Event.objects.filter(session=session, seq__gt=after)
        .order_by("seq")
        .iterator(chunk_size=2000)
    )


def _archive_lines(events: Iterable[Event]) -> bytes:
    return b"".join(
        json.dumps(event_record(event), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        for event in events
    )


@dataclass
class Archived:
    session_id: str
    events: int
    file_name: str


def session_archive(session: Session | Any) -> Archived | None:
    """Move the events still in the table of one ended session to an archive file.

    Holds the session lock while it writes, so two runs never archive the same events
    (the second finds none). The file is written before the rows are deleted, in the
    same transaction: a failed write deletes nothing; a commit that fails after the write
    leaves an unreferenced file, never a lost event. None when there was nothing to move.
    """
    with transaction.atomic():
        locked = session_lock(session, open_only=False)
        events = list(Event.objects.filter(session=locked).order_by("seq"))
        if not events:
            return None
        data = _archive_lines(events)
        first, last = events[0].seq, events[-1].seq
        name = default_storage.save(
            f"events/{locked.organization_id}/{locked.pk}/"
            f"{first:012d}-{last:012d}-{secrets.token_hex(4)}.jsonl",
            ContentFile(data),
        )
        EventArchive.objects.create(
            session=locked,
            file_name=name,
            first_seq=first,
            last_seq=last,
            events=len(events),
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        Event.objects.filter(session=locked, seq__lte=last).delete()
    return Archived(session_id=str(locked.pk), events=len(events), file_name=name)


def sessions_due(*, days: int, now: datetime | None = None):
    """Ended sessions that ended at least ``days`` days ago and still have events in the table."""
    cutoff = (now or timezone.now()) - timedelta(days=days)
    return (
        Session.objects.filter(
            lifecycle_state=Session.Lifecycle.ENDED,
            ended_at__isnull=False,
            ended_at__lte=cutoff,
        )
        .filter(Exists(Event.objects.filter(session=OuterRef("pk"))))
        .order_by("ended_at")
    )


def events_archive_due(
    *, days: int | None = None, now: datetime | None = None, limit: int = SESSIONS_PER_RUN
) -> list[Archived]:
    """Archive the events of up to ``limit`` sessions past retention; ``days`` defaults to
    ``CONTEXTOPS_EVENT_RETENTION_DAYS``, where 0 means keep events forever."""
    if days is None:
        days = settings.CONTEXTOPS_EVENT_RETENTION_DAYS
        if days <= 0:
            return []
    due = list(sessions_due(days=days, now=now).values_list("pk", flat=True)[:limit])
    archived = [session_archive(pk) for pk in due]
    return [item for item in archived if item is not None]
