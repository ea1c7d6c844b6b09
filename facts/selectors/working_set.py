"""Reads of a session's working set (layer 3): its live items, one by key, and those a
context pack holds, newest first."""

import functools

from django.db.models import Q, QuerySet
from django.utils import timezone

from contextops.errors import NotFound
from contextops.rows import columns, fetch, param
from contextops.text import value_text
from frames.models import Session

from .. import supersession as rules
from ..models import WorkingSetItem

# Working set (layer 3) -----------------------------------------------------------------------


def _live(session: Session) -> QuerySet[WorkingSetItem]:
    now = timezone.now()
    return WorkingSetItem.objects.filter(session=session).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )


def working_set_get(*, session: Session, key: str) -> WorkingSetItem:
    """The live item ``key``: NotFound when missing or expired (expiry is immediate)."""
    item = _live(session).filter(key=key).first()
    if item is None:
        raise NotFound(f"No working-set item {key} in this session.")
    return item


def working_set_list(*, session: Session) -> list[WorkingSetItem]:
    """The session's live working set, by key."""
    return list(_live(session).order_by("key"))


@functools.cache
def _working_set_newest_first_sql() -> str:
    return (
        f"SELECT {columns(WorkingSetItem, 'w')} FROM {WorkingSetItem._meta.db_table} w"
        ' WHERE w."session_id" = %s AND (w."expires_at" IS NULL OR w."expires_at" > %s)'
        ' ORDER BY w."updated_at" DESC, w."id" DESC'
    )


def working_set_for_context(*, session: Session, query: str = "") -> list[WorkingSetItem]:
    """The session's live working set, items that mention a word of ``query`` first: what
    ``_live`` reads, newest first, as SQL written once per process (every context pack
    reads it)."""
    items = fetch(
        WorkingSetItem,
        _working_set_newest_first_sql(),
        [
            param(WorkingSetItem, "session", session.pk),
            param(WorkingSetItem, "expires_at", timezone.now()),
        ],
    )
    terms = rules.query_terms(query)
    if not terms:
        return items

    def hits(item: WorkingSetItem) -> int:
        text = f"{item.key} {value_text(item.value)}".lower()
        return sum(1 for term in terms if term in text)

    return sorted(items, key=lambda item: -hits(item))
