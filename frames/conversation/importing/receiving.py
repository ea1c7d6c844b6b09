"""Receiving transcript uploads: a file's part stored at its byte offset (or the whole file
again), checked against what is held and the size limit, and the import job queued, sent
again when it was lost, and claimed once by the worker that runs it (``executing``).

The formats as the API names them and where a transcript comes from (``source_of``) are
here too: an upload speaks of both first.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from contextops.errors import Conflict, Invalid, TooLarge
from contextops.jobs import job_send, job_send_on_commit
from contextops.models import Agent, Organization

from ..models import Import, TranscriptFile, TranscriptSource
from ..readers import TranscriptError, detect_format_of, read_text, source_key

# What one source may hold, every file together (CONTEXTOPS_IMPORT_MAX_BYTES).
IMPORT_MAX_BYTES = 64 * 1024 * 1024


# The API's spelling of the formats, and the readers'.
API_FORMATS = {"claude_code": "claude-code", "anthropic": "anthropic", "openai": "openai"}
WHOLE_DOCUMENT_FORMATS = ("anthropic", "openai")


def import_max_bytes() -> int:
    """What one transcript may hold, all its files together (413 ``too_large`` beyond)."""
    return int(getattr(settings, "CONTEXTOPS_IMPORT_MAX_BYTES", IMPORT_MAX_BYTES))


def source_of(source: TranscriptSource) -> dict[str, Any]:
    """Where a transcript comes from, as a session and an import show it."""
    api_format = next((k for k, v in API_FORMATS.items() if v == source.format), source.format)
    return {
        "format": api_format,
        "file_name": source.file_name,
        "source_session_id": source.source_session_id,
        "tool_version": source.tool_version or None,
    }


# -- Uploads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class UploadFile:
    """A file's text from byte ``offset`` on, as an upload carries it."""

    file_name: str
    content: str
    offset: int = 0


@dataclass
class Received:
    """What an upload answers: its job and the bytes now held of each file."""

    job: Import
    source: TranscriptSource
    sizes: dict[str, int]  # file name -> bytes held, every file of the source
    subagents: list[str]  # the upload's subagent files, as named when stored


def _basename(name: str, field: Sequence[str | int]) -> str:
    base = re.split(r"[\\/]", name.strip())[-1]
    if not base or base in (".", ".."):
        raise Invalid("Name the transcript's file (its base name).", field=field)
    return base[:500]


def _format_of(organization: Organization, fmt: str | None, upload: UploadFile, name: str) -> str:
    if fmt is not None:
        if fmt not in API_FORMATS:
            raise Invalid(f"format is one of {', '.join(API_FORMATS)}.", field="format")
        return API_FORMATS[fmt]
    try:
        return detect_format_of(name, upload.content)
    except TranscriptError as exc:
        # A later part of a JSON transcript is no JSON on its own: its source knows.
        known = (
            TranscriptSource.objects.filter(organization=organization, file_name=name)
            .order_by("-updated_at")
            .values_list("format", flat=True)
            .first()
        )
        if upload.offset and known:
            return known
        raise Invalid(f"{exc} Say which format it is.", field="format") from None


def _mismatch(name: str, held: int, detail: str) -> Conflict:
    return Conflict(
        "import_offset_mismatch",
        f"{detail} The server holds {held} bytes of {name}; send it again from offset {held}.",
        expected_offset=held,
        file_name=name,
    )


def _joined(held: TranscriptFile, upload: UploadFile, name: str, whole_document: bool) -> str:
    """The file's text with the upload's part placed at its offset.

    The part may overlap what is held (a resend) but must then match it, and may not
    start beyond it: 409 ``import_offset_mismatch`` with the offset to send from. A whole
    document (JSON, YAML) sent again from offset 0 replaces the held text, since such a
    file grows by rewriting its end.
    """
    if upload.offset > held.size:
        raise _mismatch(name, held.size, f"The part starts at byte {upload.offset}.")
    if upload.offset == held.size:
        return held.text + upload.content
    if whole_document and upload.offset == 0:
        return held.text if held.text.startswith(upload.content) else upload.content
    held_bytes = held.text.encode("utf-8")
    part = upload.content.encode("utf-8")
    overlap = held_bytes[upload.offset : upload.offset + len(part)]
    if part[: len(overlap)] != overlap:
        raise _mismatch(
            name, held.size, f"The part from byte {upload.offset} differs from what was received."
        )
    return held.text + part[len(overlap) :].decode("utf-8")


def _source_for(
    organization: Organization, fmt: str, main: UploadFile, name: str
) -> TranscriptSource:
    """The upload's source, locked (made when this is the first upload of it)."""
    key = source_key(fmt, name=name, text=main.content, offset=main.offset)
    if not key:
        # A later part that does not name its transcript (a JSON document's middle, or
        # nothing new at all): the one of that file name it continues.
        for source in (
            TranscriptSource.objects.select_for_update(no_key=True)
            .filter(organization=organization, format=fmt, file_name=name)
            .order_by("-updated_at")
        ):
            held = source.files.filter(main=True).values_list("size", flat=True).first() or 0
            if held >= main.offset:
                return source
        raise _mismatch(name, 0, f"No earlier part of {name} is held.")
    source, _ = TranscriptSource.objects.get_or_create(
        organization=organization,
        format=fmt,
        source_session_id=key,
        defaults={"file_name": name},
    )
    return TranscriptSource.objects.select_for_update(no_key=True).get(pk=source.pk)


def import_receive(
    *,
    organization: Organization,
    agent: Agent | None,
    file_name: str,
    content: str,
    offset: int = 0,
    format: str | None = None,
    final: bool = True,
    subagents: Sequence[UploadFile] = (),
    title: str | None = None,
    context_window_tokens: int = 200_000,
    queue: bool = True,
) -> Received:
    """Store an upload of a transcript and queue the job that imports it.

    ``content`` is the file's text from byte ``offset`` on; ``subagents`` are Claude
    Code's subagent files of the same session, each with its own offset. ``format`` is
    the API's name (``claude_code``, ``anthropic``, ``openai``), detected when None.
    ``queue``: send the job to a worker once stored (the operator's command runs it itself).

    Raises Conflict ``import_offset_mismatch`` (``expected_offset``, ``file_name``) when a
    part starts beyond what is held or differs from it where they overlap, TooLarge when
    the transcript would hold more than ``import_max_bytes()``, Invalid for a bad name, a
    format that cannot be told, subagents of a format that has none, or a final JSON or
    YAML document that cannot be read. Nothing is stored then.

    Long because an upload is checked whole (names, format, offsets, size, a final
    document's readability) before one transaction stores it and queues its job; the
    checks it calls are already their own functions.
    """
    main = UploadFile(file_name, content, offset)
    name = _basename(file_name, "file_name")
    fmt = _format_of(organization, format, main, name)
    uploads = [(name, main, True)]
    if subagents and fmt != "claude-code":
        raise Invalid("Only Claude Code transcripts have subagent files.", field="subagents")
    for i, sub in enumerate(subagents):
        sub_name = _basename(sub.file_name, ("subagents", i, "file_name"))
        if any(sub_name == other for other, _, _ in uploads):
            raise Invalid(
                f"{sub_name} is sent twice in this upload.", field=("subagents", i, "file_name")
            )
        uploads.append((sub_name, sub, False))
    whole_document = fmt in WHOLE_DOCUMENT_FORMATS
    with transaction.atomic():
        source = _source_for(organization, fmt, main, name)
        held = {f.name: f for f in source.files.all()}
        held_main = next((f for f in held.values() if f.main), None)
        if held_main is not None and held_main.name != name:
            # The same transcript (its session id) under another file name: it is the file
            # already held, so only what goes past it is new (a differing text is 409).
            name = held_main.name
            uploads[0] = (name, main, True)
        joined: list[tuple[TranscriptFile, str]] = []
        for upload_name, upload, is_main in uploads:
            current = held.get(upload_name) or TranscriptFile(
                source=source, name=upload_name, main=is_main
            )
            joined.append((current, _joined(current, upload, upload_name, whole_document)))
        sizes = {f.name: f.size for f in held.values()}
        sizes.update({f.name: len(text.encode("utf-8")) for f, text in joined})
        limit = import_max_bytes()
        if sum(sizes.values()) > limit:
            raise TooLarge(
                f"This transcript would hold {sum(sizes.values())} bytes; the limit is {limit}.",
                limit=limit,
            )
        if whole_document and final:
            try:
                read_text(fmt, name=name, text=joined[0][1])
            except TranscriptError as exc:
                raise Invalid(str(exc), field="content") from None
        now = timezone.now()
        for current, text in joined:
            if current.pk is None or text != current.text:
                current.text = text
                current.size = sizes[current.name]
                current.save()
        source.final = final
        source.title = (title or "").strip()[:300] or source.title
        source.context_window_tokens = context_window_tokens
        source.updated_at = now
        source.save(update_fields=["final", "title", "context_window_tokens", "updated_at"])
        job = Import.objects.create(
            organization=organization,
            agent=agent,
            source=source,
            session=source.session,
            final=final,
            received_bytes=sizes[name],
            created_at=now,
        )
        if queue:
            _job_queue(job)
    return Received(
        job=job,
        source=source,
        sizes=sizes,
        subagents=[n for n, _, is_main in uploads if not is_main],
    )


def _import_task() -> Any:
    # tasks imports this module: reach the job's task without a cycle
    from ..tasks import import_run

    return import_run


def _job_queue(job: Import) -> None:
    job_send_on_commit(_import_task(), job.pk)


def _stale_before() -> datetime:
    return timezone.now() - timedelta(seconds=settings.CONTEXTOPS_IMPORT_STALE_SECONDS)


def imports_requeue(*, older_than_seconds: int = 60) -> int:
    """Send again the jobs of imports still queued after ``older_than_seconds`` (sent while
    the broker was down), and of imports claimed longer ago than
    ``CONTEXTOPS_IMPORT_STALE_SECONDS`` (a worker that died, a database that went away
    mid-job); return how many. A job sent twice is harmless: one claims it."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    queued = Import.objects.filter(
        Q(status=Import.Status.QUEUED, created_at__lt=cutoff)
        | Q(status=Import.Status.RUNNING, started_at__lt=_stale_before())
    )
    return sum(job_send(_import_task(), pk) for pk in queued.values_list("pk", flat=True)[:500])


# -- The job --------------------------------------------------------------------------------


def import_claim(*, import_id: str) -> bool:
    """Queued -> running, once: a second delivery of the job finds nothing to claim. A run
    claimed longer ago than ``CONTEXTOPS_IMPORT_STALE_SECONDS`` (its worker vanished) may be
    claimed again: it goes on from what the dead run wrote (each batch records how far)."""
    claimable = Q(status=Import.Status.QUEUED) | Q(
        status=Import.Status.RUNNING, started_at__lt=_stale_before()
    )
    return (
        Import.objects.filter(claimable, pk=import_id).update(
            status=Import.Status.RUNNING, started_at=timezone.now()
        )
        == 1
    )
