"""Anthropic Messages content, checked and flattened: no database.

``blocks_of`` turns a message's ``content`` (a string or a list of blocks) into a list
of blocks, raising ``Invalid`` naming the field of the first bad one.
"""

import json
from collections.abc import Sequence
from typing import Any

from contextops.errors import Invalid

ROLES = ("user", "assistant")
MAX_BLOCKS = 2_000


def blocks_of(content: Any, field: Sequence[str | int] = ()) -> list[dict]:
    """``content`` as a list of blocks; ``field`` names it in an error (``("messages", 3, "content")``)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise Invalid("content must be a string or a list of content blocks.", field=field)
    if len(content) > MAX_BLOCKS:
        raise Invalid(f"A message may hold at most {MAX_BLOCKS} content blocks.", field=field)
    blocks = []
    for i, block in enumerate(content):
        where = (*field, i)
        if isinstance(block, str):
            block = {"type": "text", "text": block}
        if (
            not isinstance(block, dict)
            or not isinstance(block.get("type"), str)
            or not block["type"]
        ):
            raise Invalid(
                "Every content block must be an object with a type.", field=(*where, "type")
            )
        kind = block["type"]
        if kind == "text" and not isinstance(block.get("text"), str):
            raise Invalid("A text block needs a text string.", field=(*where, "text"))
        if kind == "thinking" and not isinstance(block.get("thinking"), str):
            raise Invalid("A thinking block needs a thinking string.", field=(*where, "thinking"))
        if kind == "tool_use":
            if not isinstance(block.get("id"), str) or not block["id"] or len(block["id"]) > 200:
                raise Invalid(
                    "A tool_use block needs an id (at most 200 characters).", field=(*where, "id")
                )
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise Invalid("A tool_use block needs a name.", field=(*where, "name"))
            if not isinstance(block.get("input", {}), dict):
                raise Invalid("A tool_use input must be an object.", field=(*where, "input"))
        if kind == "tool_result":
            if (
                not isinstance(block.get("tool_use_id"), str)
                or not block["tool_use_id"]
                or len(block["tool_use_id"]) > 200
            ):
                raise Invalid(
                    "A tool_result block needs a tool_use_id (at most 200 characters).",
                    field=(*where, "tool_use_id"),
                )
            if not isinstance(block.get("is_error", False), bool):
                raise Invalid("is_error must be true or false.", field=(*where, "is_error"))
            if not isinstance(block.get("content", ""), (str, list)):
                raise Invalid(
                    "A tool_result content must be a string or a list of blocks.",
                    field=(*where, "content"),
                )
        blocks.append(block)
    return blocks


def result_text(content: Any) -> str:
    """A tool result's output as text: strings joined, images and documents as placeholders."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for item in content:
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, dict):
            if item.get("type") == "text":
                parts.append(str(item.get("text", "")))
            else:
                parts.append(f"[{item.get('type', 'block')}]")
    return "\n".join(parts)


def block_text(block: dict) -> str:
    """What a block puts in the window, as text to count."""
    kind = block.get("type")
    if kind == "text":
        return block.get("text", "")
    if kind == "thinking":
        return block.get("thinking", "")
    if kind == "tool_use":
        return f"{block.get('name', '')} {json.dumps(block.get('input', {}), ensure_ascii=False)}"
    if kind == "tool_result":
        return result_text(block.get("content", ""))
    if kind == "redacted_thinking":
        return ""
    return json.dumps(
        {k: v for k, v in block.items() if k not in ("source", "data")}, ensure_ascii=False
    )[:2000]
