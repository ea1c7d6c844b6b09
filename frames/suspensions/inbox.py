"""What the approval inbox shows: the pending suspensions, each with its frame's budget
and a preview of the context it would resume with, the recent decisions, and the answer
to an approve or reject.

A decision's answer (the changed row, or the refusal with the whole inbox) is read
inside the decision's own transaction and handed to the view fully evaluated, so a
database lost right after the commit cannot turn a stored decision into an error page.
"""

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction

from contextops.errors import DomainError, Invalid
from contextops.models import Organization
from contextops.text import asked_in_words
from frames.context.pack import context_pack_assemble
from frames.models import Suspension, token_hash
from frames.selectors import frame_ancestry

from . import selectors, services

logger = logging.getLogger(__name__)

Verdict = Literal["approved", "rejected"]


def context_preview(suspension: Suspension, *, budget: int) -> dict[str, Any]:
    """What the frame's context pack would hold if it resumed now, within ``budget``.

    Not stored: looking is not a pack an agent asked for. Any failure becomes
    ``{"error": text}`` instead of breaking the page (or the decision it answers).
    """
    try:
        # A savepoint: a database error here must not spoil a decision's transaction.
        with transaction.atomic():
            pack = context_pack_assemble(
                session=suspension.session,
                frame=suspension.frame,
                budget_tokens=budget,
                store=False,
            )
    except DomainError as exc:
        return {"error": exc.detail}
    except Exception as exc:  # the inbox must render even when a pack cannot be made
        logger.exception("Context pack preview failed for frame %s", suspension.frame_id)
        return {"error": f"The context pack could not be assembled: {exc}"}
    result = pack.result
    return {
        "error": "",
        "brief_context": result.brief_context,
        "sections": [
            ("Breadcrumbs", len(result.breadcrumbs)),
            ("Facts", len(result.facts)),
            ("Working set", len(result.working_set)),
            ("Segments (handles)", len(result.segments)),
            ("Dropped", len(result.dropped)),
        ],
        "budget": result.budget,
        "used": result.used,
        "remaining": result.remaining,
        "breakdown": result.breakdown,
        "compaction_level": result.level,
    }


def pending_item(
    suspension: Suspension, *, preview_budget: int, error: str = "", note: str = ""
) -> dict[str, Any]:
    """One pending row: the suspension, its frame's ancestry and budget, the preview."""
    frame = suspension.frame
    inputs = frame.inputs if isinstance(frame.inputs, dict) else {}
    return {
        "suspension": suspension,
        "frame": frame,
        # What a LangGraph interrupt asks, in words (its frame keeps the value).
        "asks": asked_in_words(inputs["interrupt"]) if "interrupt" in inputs else [],
        "hashed": token_hash(suspension.token),
        "ancestry": frame_ancestry(frame)[:-1],
        "segments": frame.budget.segments(),
        "overrun": frame.budget.overrun,
        "preview": context_preview(suspension, budget=preview_budget),
        "error": error,
        "note": note,
    }


def decided_item(suspension: Suspension, *, notice: str = "", error: str = "") -> dict[str, Any]:
    """One decided row (``frames/partials/_suspension_decided.html``)."""
    return {"s": suspension, "notice": notice, "error": error}


def pending_fingerprint(pending: list[Suspension]) -> str:
    """A short digest of which suspensions wait, in order; it changes when one arrives or
    leaves. Made from the tokens' hashes, so it reveals no token."""
    joined = "|".join(token_hash(s.token) for s in pending)
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def inbox_context(
    *,
    organization: Organization,
    pending: list[Suspension],
    limit: int,
    preview_budget: int,
    can_decide: bool,
    override: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The inbox page's context: the first ``limit`` of ``pending`` (read with one more,
    to know whether more wait) as rows, ``override`` in place of its suspension's row,
    and the recent decisions."""
    items = []
    for suspension in pending[:limit]:
        if override and override["suspension"].pk == suspension.pk:
            items.append(override)
        else:
            items.append(pending_item(suspension, preview_budget=preview_budget))
    return {
        "items": items,
        "more_waiting": len(pending) > limit,
        "decided": selectors.suspensions_decided(organization=organization),
        "can_decide": can_decide,
        "fingerprint": pending_fingerprint(pending),
    }


@dataclass(frozen=True)
class DecisionAnswer:
    """What an approve or reject answers with, read before its commit.

    ``done``: the decision was recorded (``status`` 200) and ``row`` is the decided row.
    Otherwise it was refused with ``status`` (422 for a missing note, nothing changed;
    409 / 410 when the suspension was decided or expired meanwhile) and ``row`` is the
    pending row with the reason (``row_pending``) or the decided row with it. ``page`` is
    the whole inbox with the refusal, when the caller asked for it (a plain form post).
    """

    done: bool
    status: int
    row: dict[str, Any]
    row_pending: bool = False
    page: dict[str, Any] | None = None
    decided: list[Suspension] | None = None


def inbox_decide(
    *,
    organization: Organization,
    user: User,
    frame_id: UUID | str,
    hashed: str,
    verdict: Verdict,
    note: str,
    page: bool,
    limit: int,
    preview_budget: int,
) -> DecisionAnswer:
    """Approve or reject the suspension of ``frame_id`` whose token hashes to ``hashed``,
    and read the answer in the same transaction.

    Raises NotFound when there is no such suspension. A refusal is an answer, not an
    error; an overdue suspension is marked expired even though the decision is refused.
    """
    with transaction.atomic():
        suspension = selectors.suspension_for_frame(
            organization=organization, frame_id=frame_id, hashed=hashed
        )
        try:
            if verdict == Suspension.Status.APPROVED:
                decided = services.suspension_approve(suspension=suspension, user=user, note=note)
            else:
                decided = services.suspension_reject(suspension=suspension, user=user, note=note)
        except Invalid as exc:
            row = pending_item(
                suspension, preview_budget=preview_budget, error=exc.detail, note=note
            )
            return DecisionAnswer(
                done=False,
                status=exc.status,
                row=row,
                row_pending=True,
                page=_refused_page(organization, limit, preview_budget, exc.detail, override=row)
                if page
                else None,
            )
        except DomainError as exc:
            current = selectors.suspension_for_frame(
                organization=organization, frame_id=frame_id, hashed=hashed
            )
            row = decided_item(current, error=exc.detail)
            return DecisionAnswer(
                done=False,
                status=exc.status,
                row=row,
                page=_refused_page(organization, limit, preview_budget, exc.detail)
                if page
                else None,
            )
        if page:  # a form post is answered with a redirect: nothing to read
            return DecisionAnswer(done=True, status=200, row={})
        shown = selectors.suspension_get(organization=organization, token=decided.token)
        verb = "Approved" if decided.status == Suspension.Status.APPROVED else "Rejected"
        return DecisionAnswer(
            done=True,
            status=200,
            row=decided_item(shown, notice=f"{verb}."),
            decided=selectors.suspensions_decided(organization=organization),
        )


def _refused_page(
    organization: Organization,
    limit: int,
    preview_budget: int,
    error: str,
    *,
    override: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole inbox with a refusal's ``error``; a refused pending row (``override``)
    takes its place in the list."""
    pending = selectors.suspensions_pending(organization=organization, limit=limit + 1)
    context = inbox_context(
        organization=organization,
        pending=pending,
        limit=limit,
        preview_budget=preview_budget,
        can_decide=True,  # only a person who may decide gets this far
        override=override,
    )
    return {**context, "page_error": error}
