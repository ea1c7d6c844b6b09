"""``{{ value|as_text }}``: a stored JSON value as a person reads it (contextops.text), never
Python's repr of it."""

from typing import Any

from django import template

from contextops.text import value_text

register = template.Library()


@register.filter
def as_text(value: Any) -> str:
    return value_text(value)
