"""Received spans into what the client's wrappers record: a session per conversation (per
trace when the spans name none), a frame per agent span following the span tree, a model
call per LLM span (its messages and usage through ``messages_append``, as the wrappers'
``POST /sessions/{id}/messages``), and each tool span as a tool call with its result.

Each span is kept whole (``ReceivedSpan``, every attribute included) and counted once: a
span sent again (same trace and span id) is stored and applied nothing the second time.
A trace is written in one transaction; one that fails is reported and leaves nothing.
"""

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from contextops.errors import DomainError
from contextops.models import Agent, Organization
from frames.conversation.ingest import UsageFigures, messages_append, usage_record_for
from frames.conversation.models import ToolUse, Turn
from frames.models import Frame, Session, Usage
from frames.services.sessions import session_create, session_source_set
from frames.services.stack import frame_pop, frame_push

from .models import ReceivedSpan
from .spans import SpanData, conversation_messages, span_fields, tool_messages

logger = logging.getLogger(__name__)

OTEL_ACTOR = "otel"
# A conversation's root frame has room for any session; each agent span's frame takes an
# eighth of what its parent has left, so nesting stays funded many levels deep.
ROOT_BUDGET = 10**15
CHILD_SHARE = 8
MAX_DEPTH = 32


@dataclass
class IngestOutcome:
    """What a request's spans became: ``accepted`` new spans applied, ``duplicates`` sent
    before (counted once), ``rejected`` refused with ``errors`` saying why."""

    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    errors: list[str] = field(default_factory=list)
    sessions: set = field(default_factory=set)


def spans_ingest(
    *, organization: Organization, agent: Agent | None, spans: Sequence[SpanData]
) -> IngestOutcome:
    """Store and apply ``spans``, a trace at a time (see the module's docstring)."""
    outcome = IngestOutcome()
    fresh = _unseen(organization, spans, outcome)
    traces: dict[str, list[SpanData]] = {}
    for span in fresh:
        traces.setdefault(span.trace_id, []).append(span)
    for trace_id, group in traces.items():
        try:
            session = _trace_apply(organization=organization, agent=agent, spans=group)
        except DomainError as exc:
            outcome.rejected += len(group)
            outcome.errors.append(f"trace {trace_id}: {exc.detail}")
            continue
        except IntegrityError:
            # The same spans, sent again while this request applied them (an exporter's
            # retry racing its first attempt): that one stored them; nothing was written here.
            outcome.duplicates += len(group)
            continue
        outcome.accepted += len(group)
        outcome.sessions.add(session.pk)
    return outcome


def _unseen(
    organization: Organization, spans: Sequence[SpanData], outcome: IngestOutcome
) -> list[SpanData]:
    """The spans not stored yet, each once."""
    stored = set(
        ReceivedSpan.objects.filter(
            organization=organization, trace_id__in={s.trace_id for s in spans}
        ).values_list("trace_id", "span_id")
    )
    fresh = []
    for span in spans:
        key = (span.trace_id, span.span_id)
        if key in stored:
            outcome.duplicates += 1
            continue
        stored.add(key)
        fresh.append(span)
    return fresh


def _session_for(
    organization: Organization, agent: Agent | None, trace_id: str, spans: Sequence[SpanData]
) -> Session:
    """The trace's session: the one its earlier spans went to, else the conversation's
    (``gen_ai.conversation.id`` on any of its spans), else a new one for the trace."""
    known = (
        ReceivedSpan.objects.filter(
            organization=organization, trace_id=trace_id, session__isnull=False
        )
        .select_related("session")
        .first()
    )
    if known is not None and known.session is not None:
        return known.session
    conversation = next((s.conversation_id for s in spans if s.conversation_id), "")
    source = (
        {"kind": "otel", "conversation_id": conversation}
        if conversation
        else {"kind": "otel", "trace_id": trace_id}
    )
    found = Session.objects.filter(organization=organization, source=source).first()
    if found is not None:
        return found
    roots = [s for s in spans if not s.parent_span_id] or list(spans)
    root = min(roots, key=lambda s: s.started_at or s.ended_at or 0)  # type: ignore[arg-type, return-value]
    title = root.agent_name or root.name or f"trace {trace_id}"
    model = next((s.model for s in spans if s.model), "")
    session = session_create(
        organization=organization,
        agent=agent,
        identity={} if agent is not None else {"user_name": "OpenTelemetry"},
        model=model,
        title=title[:300],
        actor=OTEL_ACTOR,
    )
    session_source_set(session=session, source=source, started_at=root.started_at)
    named = f"conversation {conversation}" if conversation else f"trace {trace_id}"
    frame_push(
        session=session,
        goal=f"{title} ({named})"[:2000],
        inputs={"otel": source},
        budget_total=ROOT_BUDGET,
        max_subframe_depth=MAX_DEPTH,
        actor=OTEL_ACTOR,
    )
    return session


@dataclass
class _Tree:
    """The trace's spans, stored and new: parents, and the frame each agent span opened."""

    parents: dict[str, str]
    frames: dict[str, Frame]
    root: Frame

    def frame_of(self, span_id: str) -> Frame:
        """The open frame of the nearest agent span above ``span_id`` (itself excluded),
        else the conversation's root frame."""
        seen = set()
        current = self.parents.get(span_id, "")
        while current and current not in seen:
            seen.add(current)
            frame = self.frames.get(current)
            if frame is not None and frame.status in Frame.OPEN_STATUSES:
                return frame
            current = self.parents.get(current, "")
        return self.root

    def depth(self, span_id: str) -> int:
        depth, current, seen = 0, self.parents.get(span_id, ""), set()
        while current and current not in seen:
            seen.add(current)
            depth += 1
            current = self.parents.get(current, "")
        return depth


def _trace_apply(
    *, organization: Organization, agent: Agent | None, spans: list[SpanData]
) -> Session:
    trace_id = spans[0].trace_id
    with transaction.atomic():
        session = _session_for(organization, agent, trace_id, spans)
        stored = ReceivedSpan.objects.filter(organization=organization, trace_id=trace_id)
        root = Frame.objects.filter(session=session, parent__isnull=True).order_by("created_at")[0]
        tree = _Tree(
            parents={r.span_id: r.parent_span_id for r in stored},
            frames={r.span_id: r.frame for r in stored.select_related("frame") if r.frame},
            root=root,
        )
        tree.parents.update({s.span_id: s.parent_span_id for s in spans})
        rows = {
            s.span_id: ReceivedSpan(
                organization=organization, kind=s.kind, session=session, **span_fields(s)
            )
            for s in spans
        }
        agents = sorted(
            (s for s in spans if s.kind == "agent"), key=lambda s: tree.depth(s.span_id)
        )
        for span in agents:
            tree.frames[span.span_id] = rows[span.span_id].frame = _frame_open(
                session, tree.frame_of(span.span_id), span
            )
        calls = sorted(
            (s for s in spans if s.kind in ("model_call", "tool")),
            key=lambda s: (s.started_at or s.ended_at or root.created_at, s.kind == "model_call"),
        )
        before = _previous_call(session)
        for span in calls:
            frame = tree.frame_of(span.span_id)
            rows[span.span_id].frame = frame
            if span.kind == "model_call":
                rows[span.span_id].usage_id, before = _model_call_record(
                    session, frame, span, before
                )
            else:
                _tool_call_record(session, frame, span)
        for span in sorted(agents, key=lambda s: -tree.depth(s.span_id)):
            _frame_close(tree.frames[span.span_id], span)
        ReceivedSpan.objects.bulk_create(rows.values())
    return session


def _frame_open(session: Session, parent: Frame, span: SpanData) -> Frame:
    parent.refresh_from_db()
    goal = span.agent_name or span.name or "agent"
    description = span.attributes.get("gen_ai.agent.description")
    return frame_push(
        session=session,
        parent=parent,
        goal=(f"{goal}: {description}" if description else goal)[:2000],
        inputs={"otel": {"trace_id": span.trace_id, "span_id": span.span_id}},
        budget_total=max(1, parent.budget_available // CHILD_SHARE),
        actor=OTEL_ACTOR,
    )


def _frame_close(frame: Frame, span: SpanData) -> None:
    """An agent span's frame closes with it (failed when the span's status is an error),
    once nothing under it is open."""
    frame.refresh_from_db()
    if frame.status not in Frame.OPEN_STATUSES:
        return
    if Frame.objects.filter(parent=frame, status__in=Frame.OPEN_STATUSES).exists():
        return
    failed = span.status_code == "error"
    frame_pop(
        frame=frame,
        status=Frame.Status.FAILED if failed else Frame.Status.COMPLETED,
        failure_reason=(span.status_message or "the span ended in error")[:200] if failed else "",
        actor=OTEL_ACTOR,
    )
    if span.ended_at is not None:
        Frame.objects.filter(pk=frame.pk).update(completed_at=span.ended_at)


def _previous_call(session: Session) -> list[dict]:
    """What the session's last recorded model call read and wrote (its input then output
    messages), to tell what a later call's input adds."""
    last = (
        ReceivedSpan.objects.filter(session=session, kind=ReceivedSpan.Kind.MODEL_CALL)
        .order_by("-started_at", "-id")
        .first()
    )
    if last is None:
        return []
    inputs, outputs = conversation_messages(SpanData(**span_fields(last)))
    return inputs + outputs


def _recorded_tools(session: Session) -> tuple[set[str], set[str]]:
    """The tool call ids the session's turns hold, and those whose result they hold."""
    uses = set(ToolUse.objects.filter(session=session).values_list("tool_use_id", flat=True))
    results = {
        str(result.get("tool_use_id"))
        for results in Turn.objects.filter(session=session)
        .exclude(tool_results=[])
        .values_list("tool_results", flat=True)
        for result in results or []
        if isinstance(result, dict)
    }
    return uses, results


def _unrecorded(session: Session, messages: Iterable[dict]) -> list[dict]:
    """``messages`` without the tool calls and results the session holds already (a
    tool span recorded them, or the call before sent them)."""
    uses, results = _recorded_tools(session)
    kept = []
    for message in messages:
        blocks = [
            b
            for b in message["content"]
            if not (b["type"] == "tool_use" and b["id"] in uses)
            and not (b["type"] == "tool_result" and b["tool_use_id"] in results)
        ]
        if blocks:
            kept.append({**message, "content": blocks})
    return kept


def _model_call_record(
    session: Session, frame: Frame, span: SpanData, before: list[dict]
) -> tuple[Any, list[dict]]:
    """The call's new messages (what its input adds to ``before``, the previous call's
    input and output) and its usage on ``frame``; returns the usage record's id and what
    this call read and wrote."""
    inputs, outputs = conversation_messages(span)
    new = inputs[len(before) :] if before and inputs[: len(before)] == before else inputs
    messages = _unrecorded(session, new + outputs)
    figures = UsageFigures(**span.usage())
    if messages:
        messages_append(
            session=session,
            messages=messages,
            usage=figures,
            frame_id=frame.pk,
            actor=OTEL_ACTOR,
        )
        usage_id = (
            Usage.objects.filter(session=session, message_id=figures.message_id)
            .values_list("pk", flat=True)
            .first()
        )
    else:
        usage_id = usage_record_for(
            session=session, frame=frame, usage=figures, actor=OTEL_ACTOR
        ).pk
    return usage_id, (inputs + outputs) if inputs or outputs else before


def _tool_call_record(session: Session, frame: Frame, span: SpanData) -> None:
    messages = _unrecorded(session, tool_messages(span))
    if messages:
        messages_append(session=session, messages=messages, frame_id=frame.pk, actor=OTEL_ACTOR)
