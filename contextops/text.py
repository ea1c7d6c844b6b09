"""How a stored JSON value reads as text, wherever one is shown to a model or a person."""

import json
from typing import Any


def value_text(value: Any) -> str:
    """Strings as they are; anything else as compact JSON with sorted keys."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def keyed_text(key: str, value: Any) -> str:
    """A fact or working-set item as a context shows it, counts its tokens and embeds it:
    ``"{key}: {value}"``."""
    return f"{key}: {value_text(value)}"
