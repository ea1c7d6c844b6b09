"""Schemas of the suspension endpoints: ``/frames/{id}/suspend`` and ``/suspensions/{token}``."""

from datetime import datetime
from typing import Any
from uuid import UUID

from ninja import Schema
from pydantic import Field

from contextops.bodies import BodyIn
from frames.models import Suspension

from .selectors import MAX_WAIT_SECONDS, suspension_status
from .services import MAX_EXPIRES_IN_SECONDS


class SuspendIn(BodyIn):
    reason: str = Field(..., min_length=1, max_length=5_000)
    requires_approval: bool = False
    expires_in_seconds: int | None = Field(None, ge=1, le=MAX_EXPIRES_IN_SECONDS)


class SuspensionDecisionIn(BodyIn):
    """A person's decision from a terminal; rejecting requires a note, as in the inbox."""

    note: str = Field("", max_length=5_000)


class SuspensionWaitQuery(Schema):
    wait: float = Field(0, ge=0, le=MAX_WAIT_SECONDS)


class SuspensionOut(Schema):
    token: str
    frame_id: UUID
    session_id: UUID
    status: str
    requires_approval: bool
    reason: str
    suspended_by: str
    suspended_at: datetime
    expires_at: datetime | None
    decided_by: str | None
    decided_at: datetime | None
    decision_note: str
    resumed_at: datetime | None
    # Who resumed the frame: the actor that used the token, or whose work went past it.
    resumed_by: str = ""
    approve_url: str


def suspension_out(suspension: Suspension, *, approve_url: str) -> dict[str, Any]:
    """The ``SuspensionOut`` answer (no query: ``decided_by`` comes loaded or unset)."""
    return {
        "token": suspension.token,
        "frame_id": suspension.frame_id,
        "session_id": suspension.session_id,
        "status": suspension_status(suspension),
        "requires_approval": suspension.requires_approval,
        "reason": suspension.reason,
        "suspended_by": suspension.suspended_by,
        "suspended_at": suspension.suspended_at,
        "expires_at": suspension.expires_at,
        "decided_by": suspension.decided_by.get_username() if suspension.decided_by else None,
        "decided_at": suspension.decided_at,
        "decision_note": suspension.decision_note,
        "resumed_at": suspension.resumed_at,
        "resumed_by": suspension.resumed_by,
        "approve_url": approve_url,
    }
