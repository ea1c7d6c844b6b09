"""Model instances from rows of SQL written by hand, for the few hot reads where the ORM's
compiling of a query costs more than running it (the API key of every request, the
pop's lock): ``columns`` writes a model's SELECT list, ``from_row`` reads it back with
the converters the ORM would apply (UUIDs, times and JSON differ by database), and
``from_rows`` reads a join's row of several models' lists."""

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from django.db import connection
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)
M2 = TypeVar("M2", bound=Model)
M3 = TypeVar("M3", bound=Model)


def columns(model: type[Model], alias: str) -> str:
    """The SELECT list of ``model``'s columns from the table aliased ``alias``, in the
    order ``from_row`` reads them back."""
    qn = connection.ops.quote_name
    return ", ".join(
        f"{alias}.{qn(field.column or field.attname)}" for field in model._meta.concrete_fields
    )


def _field(model: type[Model], name: str) -> "Field[Any, Any]":
    field = model._meta.get_field(name)
    assert isinstance(field, Field), f"{model.__name__}.{name} is not a column"
    return field


def _column(field: Any) -> Any:
    """``field``'s column as the ORM selects it: a foreign key's has its target's type (a
    UUID on SQLite is text that only the UUID field's converter turns back into one)."""
    return field.get_col(field.model._meta.db_table)


def _converters(field: Any) -> list[Callable[[Any, Any, Any], Any]]:
    column = _column(field)
    converters: list[Callable[[Any, Any, Any], Any]] = connection.ops.get_db_converters(column)
    converters.extend(column.get_db_converters(connection))
    return converters


def converter(model: type[Model], field_name: str) -> Callable[[Any], Any]:
    """What the ORM makes of a value of ``model``'s column ``field_name`` as the database
    hands it back (a UUID arrives as text on SQLite)."""
    field = _field(model, field_name)
    column, steps = _column(field), _converters(field)

    def convert(value: Any) -> Any:
        for step in steps:
            value = step(value, column, connection)
        return value

    return convert


def _row_reader(model: type[M]) -> Callable[[Sequence[Any]], M]:
    """What turns a row of ``model``'s columns (as ``columns`` selects them) into an
    instance, each value through the converters the ORM would apply (a JSON column
    arrives as text): the converters are looked up once, for every row read with it."""
    fields = model._meta.concrete_fields
    names = [field.attname for field in fields]
    steps = [(_column(field), _converters(field)) for field in fields]

    def read(values: Sequence[Any]) -> M:
        converted = []
        for (column, converters), value in zip(steps, values, strict=True):
            for step in converters:
                value = step(value, column, connection)
            converted.append(value)
        return model.from_db(connection.alias, names, converted)

    return read


def from_row(model: type[M], values: Sequence[Any]) -> M:
    """A ``model`` instance from its columns as ``columns`` selected them."""
    return _row_reader(model)(values)


def param(model: type[Model], field_name: str, value: Any) -> Any:
    """``value`` as a parameter for ``model``'s column ``field_name`` on this database (a
    UUID is text of 32 hex digits on SQLite, a datetime is text there too)."""
    return _field(model, field_name).get_db_prep_value(value, connection)


def fetch(model: type[M], sql: str, params: Sequence[Any]) -> list[M]:
    """The ``model`` instances of the rows ``sql`` selects (its columns as ``columns``
    writes them, first in each row)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    read = _row_reader(model)
    return [read(row) for row in rows]


@overload
def from_rows(values: Sequence[Any], first: type[M], second: type[M2], /) -> tuple[M, M2]: ...
@overload
def from_rows(
    values: Sequence[Any], first: type[M], second: type[M2], third: type[M3], /
) -> tuple[M, M2, M3]: ...
def from_rows(values: Sequence[Any], *models: type[Model]) -> tuple[Model, ...]:
    """An instance of each of ``models`` from a row that selected their ``columns`` one
    after another; what follows the last model's columns is left to the caller."""
    instances = []
    start = 0
    for model in models:
        end = start + len(model._meta.concrete_fields)
        instances.append(from_row(model, values[start:end]))
        start = end
    return tuple(instances)
