"""The dashboard's value filters (contextops/templatetags/values.py)."""

from datetime import timedelta

from django.template import Context, Template
from django.utils import timezone


def _render(text: str, **context) -> str:
    return Template("{% load values %}" + text).render(Context(context))


def test_ago_says_just_now_under_a_minute_never_0_minutes():
    now = timezone.now()
    assert _render("{{ t|ago }}", t=now - timedelta(seconds=20)) == "just now"
    assert _render("{{ t|ago }}", t=now - timedelta(minutes=3, seconds=5)) == "3\xa0minutes ago"
    assert _render("{{ t|ago }}", t=None) == ""


def test_as_text_gives_json_for_anything_but_a_string():
    assert _render("{{ v|as_text }}", v="plain") == "plain"
    assert _render("{{ v|as_text }}", v={"b": None, "a": True}) == (
        "{&quot;a&quot;: true, &quot;b&quot;: null}"
    )
