"""The frame's handles table on the dashboard: the rows it shows, and the answer to a
paging action there (page in, page out).

An action's answer is read inside the action's transaction and handed back fully
evaluated, so a database lost right after the commit cannot turn a stored change into
an error page.
"""

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models.functions import Substr

from contextops.errors import DomainError
from frames.models import ContextHandle

from .paging import handle_page_in, handle_page_out_request

ROW_FIELDS = (
    "id",
    "kind",
    "priority",
    "category",
    "state",
    "attention_weight",
    "estimated_tokens",
    "summary_tokens",
    "last_access_at",
    "created_at",
)
# How much of a handle's content (or, with none, its reference) a row reads to name it by
# its first words: the page shows a dozen of them, and no row loads the whole content.
OPENING_CHARS = 160


def frame_handles(*, frame_id: UUID, limit: int) -> list[ContextHandle]:
    """The frame's first ``limit`` handles, oldest first, with the fields a row shows,
    the start of each one's content and reference (``opening``, ``ref_opening``: what
    tells two rows apart) and their notes (``handle.annotations.all()``)."""
    rows = (
        ContextHandle.objects.filter(frame_id=frame_id)
        .only(*ROW_FIELDS)
        .annotate(
            opening=Substr("content", 1, OPENING_CHARS), ref_opening=Substr("ref", 1, OPENING_CHARS)
        )
    )
    # Notes show under their handle; one more query for the page, not one per row.
    return list(rows.order_by("created_at", "id").prefetch_related("annotations")[:limit])


@dataclass(frozen=True)
class HandlesAnswer:
    """``handles``: the table after the action (empty when no rows were asked for);
    ``error``: why the action was refused, "" when it was done."""

    handles: list[ContextHandle]
    error: str = ""


def _answered(action: Callable[[], object], *, frame_id: UUID, rows: int) -> HandlesAnswer:
    """Run ``action``; a refusal (a domain error) is part of the answer. With ``rows``,
    read the frame's table in the same transaction."""
    error = ""
    with transaction.atomic():
        try:
            action()
        except DomainError as exc:  # the service's own transaction was rolled back
            error = exc.detail
        handles = frame_handles(frame_id=frame_id, limit=rows) if rows else []
    return HandlesAnswer(handles=handles, error=error)


def handle_page_in_answered(
    *, handle: ContextHandle, mode: str, actor: str, user: User | None = None, rows: int = 0
) -> HandlesAnswer:
    """``handle_page_in``, answered with the frame's first ``rows`` handles."""
    return _answered(
        lambda: handle_page_in(handle=handle, mode=mode, actor=actor, user=user),
        frame_id=handle.frame_id,
        rows=rows,
    )


def handle_page_out_answered(
    *, handle: ContextHandle, actor: str, user: User | None = None, rows: int = 0
) -> HandlesAnswer:
    """``handle_page_out_request``, answered with the frame's first ``rows`` handles."""
    return _answered(
        lambda: handle_page_out_request(handle=handle, actor=actor, user=user),
        frame_id=handle.frame_id,
        rows=rows,
    )
