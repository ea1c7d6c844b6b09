"""``usd``: an amount of US dollars as the pages show it (see ``frames.costs.usd_text``)."""

from decimal import Decimal

from django import template

from frames.costs import usd_text

register = template.Library()


@register.filter
def usd(value) -> str:
    return usd_text(Decimal(value or 0))
