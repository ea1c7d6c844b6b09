"""What a suspension's notification says (``approval.*`` events): one home, below the
frame services that expire a suspension and the suspension services that decide one.
The deliveries themselves: contextops.notifications."""

from typing import Any

from contextops.notifications.services import notify, public_url
from frames.models import Frame, Session, Suspension, token_hash


def approval_data(suspension: Suspension, frame: Frame, session: Session) -> dict[str, Any]:
    """The goal, who asks and why, the budget, the decision so far and a link to the card."""
    decided_by = suspension.decided_by.get_username() if suspension.decided_by else ""
    return {
        "suspension": {
            "token_hash": token_hash(suspension.pk),
            "status": suspension.status,
            "reason": suspension.reason,
            "requested_by": suspension.suspended_by,
            "requires_approval": suspension.requires_approval,
            "suspended_at": suspension.suspended_at.isoformat(),
            "expires_at": suspension.expires_at.isoformat() if suspension.expires_at else None,
            "decided_by": decided_by,
            "note": suspension.decision_note,
        },
        "frame": {
            "id": str(frame.pk),
            "goal": frame.goal,
            "depth": frame.depth,
            "budget": {
                "total": frame.budget_total,
                "used": frame.budget_used,
                "available": frame.budget_available,
            },
        },
        "session": {"id": str(session.pk), "title": session.title},
        "link": public_url(f"/inbox/#frame-{frame.pk}"),
    }


def approval_notify(event: str, suspension: Suspension, frame: Frame, session: Session) -> None:
    """Inside the caller's transaction: ``event`` for a suspension that needs approval."""
    if not suspension.requires_approval:
        return
    notify(
        organization=session.organization_id,
        event=event,
        key=token_hash(suspension.pk),
        data=approval_data(suspension, frame, session),
    )
