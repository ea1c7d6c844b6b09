"""The one base of every request body: a field the API does not know is refused, and so
is a boolean where a number is due.

A typo such as ``"buget": 1`` would otherwise be dropped silently and the request applied
without it; with ``extra="forbid"`` it answers 422 ``validation_error`` naming the field
(``loc: ["body", "payload", "buget"]``). Every ``...In`` schema, nested ones included,
derives from ``BodyIn``; tests/hardening/test_strict_bodies.py checks the API's schema.

Pydantic's lax mode reads ``true`` as 1 for a number; JSON keeps the two apart, and so
does the API: ``{"input_tokens": true}`` is a 422 naming the field, not one token charged.
"""

import types
from typing import Any, Union, get_args, get_origin

from ninja import Schema
from pydantic import ConfigDict, ValidationInfo, field_validator


def _numeric(annotation: Any) -> bool:
    """Whether ``annotation`` takes a number (an int or a float, optional or not) and no bool."""
    if annotation in (int, float):
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        options = get_args(annotation)
        return bool not in options and any(_numeric(option) for option in options)
    return False


class BodyIn(Schema):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            field = cls.model_fields.get(info.field_name)
            if field is not None and _numeric(field.annotation):
                raise ValueError("Input should be a number, not a boolean")
        return value
