"""``{{ value|as_text }}``: a stored JSON value as a person reads it (contextops.text), never
Python's repr of it; ``{{ moment|ago }}``: how long ago, in words."""

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

from contextops.text import value_text

register = template.Library()


@register.filter
def as_text(value: Any) -> str:
    return value_text(value)


@register.filter
def ago(moment: datetime | None) -> str:
    """How long ago, in words ("3 minutes ago"); "just now" under a minute, where
    Django's timesince says "0 minutes"."""
    if moment is None:
        return ""
    if timezone.now() - moment < timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment)} ago"
