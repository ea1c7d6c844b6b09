"""Notes left on handles (docs/concepts.md#resources): shown with the handle, in the dense
formats of a context pack and in the bootstrap map."""

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from contextops.errors import Invalid, TooLarge
from frames.events import handle_event_append
from frames.locks import session_lock
from frames.models import ContextHandle, HandleAnnotation

NOTE_MAX_CHARS = 2000
NOTES_PER_HANDLE = 100


def handle_annotate(*, handle: ContextHandle, note: str, actor: str = "") -> ContextHandle:
    """Leave ``note`` on ``handle``; returns the handle, read in the same transaction, with
    its notes oldest first (``handle.notes``).

    Invalid (field ``note``) for an empty or too long note; TooLarge past
    NOTES_PER_HANDLE notes; Conflict ``session_ended`` once the session has ended.
    """
    note = (note or "").strip()
    if not note:
        raise Invalid("A note needs some text.", field="note")
    if len(note) > NOTE_MAX_CHARS:
        raise Invalid(f"A note is at most {NOTE_MAX_CHARS} characters.", field="note")
    with transaction.atomic():
        session = session_lock(handle.session_id)
        handle = ContextHandle.objects.select_for_update(no_key=True).get(pk=handle.pk)
        if HandleAnnotation.objects.filter(handle=handle).count() >= NOTES_PER_HANDLE:
            raise TooLarge(
                f"A handle keeps at most {NOTES_PER_HANDLE} notes.", limit=NOTES_PER_HANDLE
            )
        annotation = HandleAnnotation.objects.create(handle=handle, note=note, actor=actor)
        handle_event_append(
            session,
            handle,
            "handle.annotated",
            actor,
            {"annotation_id": annotation.pk, "note": note},
        )
        handle.notes = list(HandleAnnotation.objects.filter(handle=handle))  # type: ignore[attr-defined]
    return handle


def notes_by_handle(handle_ids: Sequence[Any]) -> dict[str, list[str]]:
    """The notes of each of ``handle_ids``, oldest first; one query."""
    notes: dict[str, list[str]] = {}
    rows = HandleAnnotation.objects.filter(handle_id__in=handle_ids).order_by("created_at", "id")
    for handle_id, note in rows.values_list("handle_id", "note"):
        notes.setdefault(str(handle_id), []).append(note)
    return notes
