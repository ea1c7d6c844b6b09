"""The one shape of a list endpoint's answer: a page of ``items``, the ``count`` of all
that match, and the ``next_offset`` to ask for next (null on the last page).

A list schema derives from ``Page[ItemOut]`` under its own name; a handler answers with
``page_body`` (the items it already has) or ``queryset_page`` (a queryset it slices).
A selector narrows its rows to the filters a request set with ``lookups_set``.
"""

from collections.abc import Callable, Iterable
from typing import Annotated, Any, Generic, TypeVar

from django.db.models import Model, QuerySet
from ninja import Schema
from pydantic import Field

# The furthest offset a list's ``offset`` query parameter may ask for.
MAX_OFFSET = 10**9
# A list's ``offset`` query parameter: ``offset: Offset = 0``.
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]

ItemOut = TypeVar("ItemOut")
Row = TypeVar("Row", bound=Model)


class Page(Schema, Generic[ItemOut]):
    items: list[ItemOut]
    count: int
    next_offset: int | None


def page_body(items: Iterable[Any], *, count: int, offset: int, limit: int) -> dict[str, Any]:
    """The page at ``offset`` of at most ``limit`` items out of ``count``: ``next_offset``
    is None when no item follows it."""
    end = offset + limit
    return {"items": list(items), "count": count, "next_offset": end if end < count else None}


def queryset_page(
    rows: QuerySet[Row], *, offset: int, limit: int, out: Callable[[Row], Any]
) -> dict[str, Any]:
    """``page_body`` of ``rows`` (counted, then sliced in the database), each as ``out`` writes it."""
    page = rows[offset : offset + limit]
    return page_body((out(row) for row in page), count=rows.count(), offset=offset, limit=limit)


def lookups_set(**lookups: Any) -> dict[str, Any]:
    """The ``filter`` lookups of a list's filters that are set: a filter left at None or
    at empty text narrows nothing (False is a value: it is kept)."""
    return {lookup: value for lookup, value in lookups.items() if value is not None and value != ""}
