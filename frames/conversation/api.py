"""Conversation endpoints: messages in, turns out, compaction runs."""

from ninja import Field as NinjaField
from ninja import Query, Router, Schema, Status

from contextops.actors import request_actor
from contextops.http import ApiRequest
from frames.selectors import session_get

from . import compaction, ingest, selectors
from .schemas import (
    CompactionIn,
    CompactionOut,
    CompactionQueuedOut,
    MessagesIn,
    MessagesOut,
    TurnOut,
)

router = Router(tags=["conversation"])


class TurnsQuery(Schema):
    branch: str = NinjaField("", max_length=120)
    after: int | None = NinjaField(None, ge=-1, le=2**62)
    limit: int | None = NinjaField(None, ge=1, le=10_000)


@router.post(
    "/sessions/{session_id}/messages",
    response=MessagesOut,
    summary="Append messages; group them into turns",
)
def messages_append(request: ApiRequest, session_id: str, payload: MessagesIn):
    session = session_get(organization=request.organization, session_id=session_id)
    result = ingest.messages_append(
        session=session,
        messages=[m.dict() for m in payload.messages],
        usage=payload.usage.dict() if payload.usage else None,
        frame_id=payload.frame_id,
        actor=request_actor(request),
    )
    return {
        "messages": result.messages,
        "turns": result.turns,
        "occupancy_tokens": result.occupancy_tokens,
        "compaction_id": str(result.compaction.pk) if result.compaction else None,
    }


@router.get(
    "/sessions/{session_id}/turns", response=list[TurnOut], summary="The session's turns in order"
)
def turns_list(request: ApiRequest, session_id: str, filters: Query[TurnsQuery]):
    session = session_get(organization=request.organization, session_id=session_id)
    return list(
        selectors.turns_list(
            session=session, branch=filters.branch, after=filters.after, limit=filters.limit
        )
    )


@router.post(
    "/sessions/{session_id}/compactions",
    response={202: CompactionQueuedOut},
    summary="Queue a compaction",
)
def compaction_create(request: ApiRequest, session_id: str, payload: CompactionIn):
    session = session_get(organization=request.organization, session_id=session_id)
    run = compaction.compaction_request(
        session=session,
        strategy=payload.strategy,
        target_tokens=payload.target_tokens,
        keep_turns=payload.keep_turns,
        actor=request_actor(request),
    )
    return Status(202, {"id": str(run.pk), "status": run.status})


@router.get(
    "/sessions/{session_id}/compactions",
    response=list[CompactionOut],
    summary="The session's compactions, newest first",
)
def compactions_list(request: ApiRequest, session_id: str):
    session = session_get(organization=request.organization, session_id=session_id)
    return list(selectors.compactions_list(session=session)[:100])


@router.get("/compactions/{compaction_id}", response=CompactionOut, summary="One compaction run")
def compaction_get(request: ApiRequest, compaction_id: str):
    return selectors.compaction_get(organization=request.organization, compaction_id=compaction_id)


@router.post(
    "/compactions/{compaction_id}/revert",
    response=CompactionOut,
    summary="Bring the turns back into the window",
)
def compaction_revert(request: ApiRequest, compaction_id: str):
    run = selectors.compaction_get(organization=request.organization, compaction_id=compaction_id)
    return compaction.compaction_revert(run=run, actor=request_actor(request))
