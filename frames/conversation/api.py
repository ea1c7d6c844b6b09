"""Conversation endpoints: messages in, turns out, compaction runs, transcript imports."""

from ninja import Field as NinjaField
from ninja import Query, Router, Schema, Status

from contextops.actors import request_actor
from contextops.http import ApiRequest
from frames import selectors as frames_selectors
from frames.selectors import session_get

from . import anatomy, compaction, ingest, selectors
from .importing.receiving import UploadFile, import_receive
from .schemas import (
    CompactionIn,
    CompactionOut,
    CompactionQueuedOut,
    CounterfactualOut,
    CounterfactualQuery,
    ImportIn,
    ImportOut,
    ImportQueuedOut,
    MessagesIn,
    MessagesOut,
    TurnOut,
    import_out,
    import_queued_out,
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


@router.get(
    "/sessions/{session_id}/counterfactual",
    response=CounterfactualOut,
    summary="What each strategy would have done where the agent compacted",
)
def counterfactual_get(request: ApiRequest, session_id: str, filters: Query[CounterfactualQuery]):
    """Per real compaction (an imported transcript's, or one of ours): what the agent's
    own compaction reported and, per strategy, the turns it would have kept, summarized
    or removed, the tokens after and the anchor it cut at; where our trigger would have
    fired at ``threshold``; and per policy the compactions and tokens sent over the whole
    session. No summary is written: its size is estimated (see docs/compaction.md)."""
    session = session_get(organization=request.organization, session_id=session_id)
    answer = selectors.counterfactual_get(session=session, threshold=filters.threshold)
    return {"session_id": session.pk, **answer.as_dict()}


@router.post(
    "/imports",
    response={202: ImportQueuedOut},
    summary="Upload a transcript, or what was appended to it, to import on a worker",
)
def import_create(request: ApiRequest, payload: ImportIn):
    """Store the upload and queue a job that imports it; poll ``GET /imports/{id}``.

    ``content`` is the file's text from byte ``offset`` on: send the whole file, or only
    what was appended since the last upload. A part that starts beyond what the server
    holds, or differs from it where they overlap, answers 409 ``import_offset_mismatch``
    with ``expected_offset`` (send again from there) and ``file_name``. The same transcript
    sent again writes nothing (the job's ``result.unchanged`` is true); one that grew
    writes only what is new, into the same session. Until ``final`` the trailing entries
    that later lines may change wait; a final transcript ends its session.

    A request body is at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (2 MiB by default) and
    a transcript, all its files together, at most ``CONTEXTOPS_IMPORT_MAX_BYTES`` (64 MiB):
    413 ``too_large`` with ``limit`` beyond either. Send a bigger file in parts.
    """
    received = import_receive(
        organization=request.organization,
        agent=request.agent,
        file_name=payload.file_name,
        content=payload.content,
        offset=payload.offset,
        format=payload.format,
        final=payload.final,
        subagents=[UploadFile(s.file_name, s.content, s.offset) for s in payload.subagents],
        title=payload.title,
    )
    return Status(202, import_queued_out(received))


@router.get(
    "/imports/{import_id}",
    response=ImportOut,
    summary="An import job: its status, progress and result",
)
def import_detail(request: ApiRequest, import_id: str):
    return import_out(selectors.import_get(organization=request.organization, import_id=import_id))


class AnatomyPartOut(Schema):
    what: str
    tokens: int
    ref: str


class AnatomyCategoryOut(Schema):
    category: str
    tokens: int
    largest: list[AnatomyPartOut]


class AnatomyOut(Schema):
    full_input_tokens: int
    output_tokens: int
    window_tokens: int
    threshold_tokens: int
    from_messages: bool
    categories: list[AnatomyCategoryOut]


@router.get(
    "/sessions/{session_id}/calls/{call_id}/anatomy",
    response=AnatomyOut,
    summary="What one model call's input was made of, by category",
    description="The categories' tokens add up to full_input_tokens (input + cache creation "
    "+ cache read); system_and_tools is what the stored messages do not account for. A "
    "call recorded by its usage alone (no stored message before it) has from_messages "
    "false and every category at 0: nothing says what its input held.",
)
def call_anatomy(request: ApiRequest, session_id: str, call_id: str):
    session = session_get(organization=request.organization, session_id=session_id)
    call = frames_selectors.call_get(session=session, call_id=call_id)
    return anatomy.call_anatomy(session=session, call=call).as_dict()
