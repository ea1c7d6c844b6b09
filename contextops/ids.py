"""How an id a caller sends becomes a primary key, and a malformed one a 404.

Every object the API and the dashboard name by id is read within the caller's
organization. An id that is not a UUID names nothing there, so it is NotFound, exactly
as an unknown or another organization's id is: the answer never tells them apart.
"""

import uuid
from typing import Any, TypeVar

from django.db import models

from .errors import NotFound

Row = TypeVar("Row", bound=models.Model)


def uuid_or_none(value: Any) -> uuid.UUID | None:
    """``value`` as a UUID: a model instance's primary key, a UUID, or text in any form
    ``uuid.UUID`` reads; None when it is none of these."""
    if isinstance(value, models.Model):
        value = value.pk
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return None


def parse_id(value: Any, detail: str | None = None) -> uuid.UUID:
    """``value`` as a UUID (as ``uuid_or_none`` reads it); NotFound with ``detail`` when
    it is not one."""
    pk = uuid_or_none(value)
    if pk is None:
        raise NotFound(detail)
    return pk


def row_get(rows: models.QuerySet[Row], value: Any, detail: str) -> Row:
    """The row of ``rows`` (already scoped to the caller's organization) whose primary key
    ``value`` names; NotFound with ``detail`` for a malformed id, an unknown one, or one
    ``rows`` leaves out."""
    row = rows.filter(pk=parse_id(value, detail)).first()
    if row is None:
        raise NotFound(detail)
    return row
