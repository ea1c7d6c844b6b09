"""Reads of recorded context packs, scoped to one organization."""

import uuid
from typing import Any

from contextops.errors import Invalid, NotFound
from facts.models import Fact
from frames.models import ContextHandle, ContextPackRecord, Session

from . import diff


def context_pack_get(*, organization: Any, pack_id: Any) -> ContextPackRecord:
    """The organization's recorded pack ``pack_id``; NotFound for any other."""
    try:
        pk = uuid.UUID(str(pack_id))
    except (TypeError, ValueError, AttributeError):
        raise NotFound("No such context pack.") from None
    record = (
        ContextPackRecord.objects.select_related("session")
        .filter(pk=pk, session__organization=organization)
        .first()
    )
    if record is None:
        raise NotFound("No such context pack.")
    return record


def _side(record: ContextPackRecord) -> diff.PackSide:
    return diff.PackSide(
        id=str(record.pk),
        frame_id=str(record.frame_id) if record.frame_id else None,
        budget=record.budget,
        used=record.used,
        level=record.level,
        breakdown=record.breakdown,
        included=record.included,
        dropped=record.dropped,
        format=getattr(record, "format", None),
        created_at=record.created_at,
        as_of_seq=record.as_of_seq,
    )


def context_pack_diff(
    *, organization: Any, a_id: Any, b_id: Any, session: Session | None = None
) -> diff.PackDiff:
    """Why pack ``b`` differs from pack ``a``: both the organization's, of one session
    (422 ``packs_of_other_sessions`` otherwise) and, with ``session``, of that one
    (NotFound otherwise)."""
    a = context_pack_get(organization=organization, pack_id=a_id)
    b = context_pack_get(organization=organization, pack_id=b_id)
    if session is not None and session.pk not in (a.session_id, b.session_id):
        raise NotFound("No such context pack in this session.")
    if a.session_id != b.session_id:
        raise Invalid(
            "Both packs must belong to one session.", field="b", code="packs_of_other_sessions"
        )
    named = [*a.included, *a.dropped, *b.included, *b.dropped]
    fact_ids = {str(i.get("id")) for i in named if i.get("section") == "facts"}
    handle_ids = []
    for item in named:
        if item.get("section") == "segments":
            try:
                handle_ids.append(uuid.UUID(str(item.get("id"))))
            except ValueError:
                continue
    facts = {
        str(pk): {"status": status, "superseded_by": next_id, "scope": scope}
        for pk, status, scope, next_id in Fact.objects.filter(
            pk__in=[int(f) for f in fact_ids if f.isdigit()], organization=organization
        ).values_list("pk", "status", "scope", "superseded_by")
    }
    handles = {
        str(pk): {"priority": priority, "state": state, "frame_id": str(frame_id)}
        for pk, priority, state, frame_id in ContextHandle.objects.filter(
            pk__in=handle_ids, frame__session_id=a.session_id
        ).values_list("pk", "priority", "state", "frame_id")
    }
    return diff.diff(_side(a), _side(b), facts=facts, handles=handles)
