"""How a stored JSON value reads as text, wherever one is shown to a model or a person, and
how a key typed by an agent is stored."""

import json
import unicodedata
from typing import Any

from .errors import Invalid


def value_text(value: Any) -> str:
    """Strings as they are; anything else as compact JSON with sorted keys."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def keyed_text(key: str, value: Any) -> str:
    """A fact or working-set item as a context shows it, counts its tokens and embeds it:
    ``"{key}: {value}"``."""
    return f"{key}: {value_text(value)}"


QUESTION_KEYS = ("question", "prompt", "message", "title", "text", "action")
FIELD_TEXT = 300


def _label(key: Any) -> str:
    words = str(key).replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words else str(key)


def _field_text(value: Any) -> str:
    if isinstance(value, list | tuple) and all(not isinstance(v, dict | list) for v in value):
        text = ", ".join(value_text(v) for v in value)
    elif isinstance(value, dict):
        text = "; ".join(f"{_label(k)}: {_field_text(v)}" for k, v in value.items())
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    else:
        text = value_text(value)
    return text if len(text) <= FIELD_TEXT else text[: FIELD_TEXT - 1] + "…"


def asked_in_words(value: Any) -> list[dict[str, Any]]:
    """What an interrupt asks, as a person reads it: for each value (a LangGraph
    ``Interrupt`` as ``{"value": ..., "id": ...}``, or the value itself) its question and
    its other fields as ``(label, text)`` pairs, labels from the keys in words
    (``refund_amount`` is "Refund amount")."""
    asks = []
    for item in value if isinstance(value, list) else [value]:
        asked = item.get("value", item) if isinstance(item, dict) and "id" in item else item
        if isinstance(asked, dict):
            rest = dict(asked)
            key = next((k for k in QUESTION_KEYS if isinstance(rest.get(k), str)), None)
            question = rest.pop(key) if key else ""
            fields = [(_label(k), _field_text(v)) for k, v in rest.items()]
        else:
            question, fields = _field_text(asked) if asked is not None else "", []
        asks.append({"question": question, "fields": fields})
    return asks


# Letters of these alphabets look alike ("а" Cyrillic, "a" Latin, "α" Greek): a key that
# mixes them reads as another key. Han, kana and Hangul mix with Latin in ordinary
# writing and are not confusable with it.
_EAST_ASIAN = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "HALFWIDTH", "IDEOGRAPHIC")


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    first = name.split(" ", 1)[0]
    return "EAST_ASIAN" if first in _EAST_ASIAN else first


def key_normalize(key: str, *, field: str = "key") -> str:
    """A fact or working-set key as stored: NFKC-normalized (``café`` typed either way is
    one key, ``ﬁle`` is ``file``). Raises Invalid (422, naming the key) for one that would
    look like another: invisible characters (zero-width spaces and joiners, direction
    marks and overrides) or letters from more than one alphabet (a Cyrillic ``а`` among
    Latin letters)."""
    normalized = unicodedata.normalize("NFKC", key)
    invisible = sorted(
        {f"U+{ord(ch):04X}" for ch in normalized if unicodedata.category(ch) == "Cf"}
    )
    if invisible:
        raise Invalid(
            f"{field} {key!r} contains invisible characters ({', '.join(invisible)}): "
            "it would look like another key.",
            field=field,
        )
    scripts = {_script(ch) for ch in normalized if ch.isalpha()} - {"EAST_ASIAN"}
    if len(scripts) > 1:
        raise Invalid(
            f"{field} {key!r} mixes letters of {' and '.join(sorted(s.title() for s in scripts))}: "
            "it would look like another key. Write it in one alphabet.",
            field=field,
        )
    return normalized


def key_lookup(key: str) -> str:
    """A key as asked for in a read: normalized the way writes store it (no refusal)."""
    return unicodedata.normalize("NFKC", key)
