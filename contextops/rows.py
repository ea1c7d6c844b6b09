"""Model instances from rows of SQL written by hand, for the few hot reads where the ORM's
compiling of a query costs more than running it (the API key of every request, the
pop's lock): ``columns`` writes a model's SELECT list, ``from_row`` reads it back with
the converters the ORM would apply (UUIDs, times and JSON differ by database)."""

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)


def columns(model: type[Model], alias: str) -> str:
    """The SELECT list of ``model``'s columns from the table aliased ``alias``, in the
    order ``from_row`` reads them back."""
    qn = connection.ops.quote_name
    return ", ".join(
        f"{alias}.{qn(field.column or field.attname)}" for field in model._meta.concrete_fields
    )


def from_row(model: type[M], values: Sequence[Any]) -> M:
    """A ``model`` instance from its columns as ``columns`` selected them, each value
    through the converters the ORM would apply (a JSON column arrives as text)."""
    converted = []
    for field, value in zip(model._meta.concrete_fields, values, strict=True):
        column = field.cached_col
        for converter in connection.ops.get_db_converters(column) + field.get_db_converters(
            connection
        ):
            value = converter(value, column, connection)
        converted.append(value)
    return model.from_db(
        connection.alias, [field.attname for field in model._meta.concrete_fields], converted
    )
