"""What a notification says, per kind of destination, and how a webhook body is signed:
plain functions, no database.

A webhook body is JSON ``{"id", "event", "created_at", "data"}`` with the header
``X-Contextops-Signature: t=<unix seconds>,v1=<hex>`` where ``<hex>`` is HMAC-SHA256,
keyed with the destination's secret, over ``"<t>.<body>"`` (the body's exact bytes). A
receiver recomputes it, compares in constant time and refuses a ``t`` too far from its
clock, so a captured body cannot be replayed later.
"""

import hashlib
import hmac
import json
import secrets
from typing import Any

SIGNATURE_HEADER = "X-Contextops-Signature"
EVENT_HEADER = "X-Contextops-Event"
DELIVERY_HEADER = "X-Contextops-Delivery"
SECRET_PREFIX = "whsec_"


def secret_new() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def signature_valid(secret: str, header: str, body: bytes) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` (what a receiver checks)."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), header)


def webhook_body(*, delivery_id: str, event: str, created_at: str, data: dict[str, Any]) -> bytes:
    return json.dumps(
        {"id": delivery_id, "event": event, "created_at": created_at, "data": data},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


HEADLINES = {
    "approval.pending": "Approval needed",
    "approval.decided": "Approval decided",
    "approval.expiring": "Approval expiring soon",
    "approval.expired": "Approval expired",
    "compaction.failed": "Compaction failed",
    "test": "Test notification",
}


def summary_lines(event: str, data: dict[str, Any]) -> list[str]:
    """The facts a person needs, one per line: goal, who asks, budget, decision, link."""
    frame = data.get("frame") or {}
    suspension = data.get("suspension") or {}
    budget = frame.get("budget") or {}
    lines = []
    if frame.get("goal"):
        lines.append(f"Goal: {frame['goal']}")
    if suspension.get("requested_by"):
        lines.append(f"Asked by: {suspension['requested_by']}")
    if suspension.get("reason"):
        lines.append(f"Why: {suspension['reason']}")
    if budget:
        lines.append(
            f"Budget: {budget.get('used', 0):,} of {budget.get('total', 0):,} tokens used"
            f" ({budget.get('available', 0):,} available)"
        )
    if suspension.get("status") in ("approved", "rejected"):
        decided = f"Decision: {suspension['status']}"
        if suspension.get("decided_by"):
            decided += f" by {suspension['decided_by']}"
        if suspension.get("note"):
            decided += f": {suspension['note']}"
        lines.append(decided)
    if suspension.get("expires_at"):
        lines.append(f"Expires: {suspension['expires_at']}")
    if data.get("detail"):
        lines.append(str(data["detail"]))
    if data.get("link"):
        lines.append(f"Open: {data['link']}")
    return lines


def slack_body(event: str, data: dict[str, Any]) -> bytes:
    """A Slack-compatible incoming-webhook message (``text``, with ``blocks`` for
    clients that render them; Mattermost and others read ``text``)."""
    headline = HEADLINES.get(event, event)
    lines = summary_lines(event, data)
    text = f"*{headline}*\n" + "\n".join(lines)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
    ]
    if data.get("link"):
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open the card"},
                        "url": data["link"],
                    }
                ],
            }
        )
    return json.dumps({"text": text, "blocks": blocks}).encode()


def email_message(event: str, data: dict[str, Any]) -> tuple[str, str]:
    """The subject and plain-text body of the e-mail."""
    frame = data.get("frame") or {}
    subject = HEADLINES.get(event, event)
    if frame.get("goal"):
        subject += f": {frame['goal']}"
    return subject[:200], "\n".join(summary_lines(event, data)) + "\n"
