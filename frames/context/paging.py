"""Paging handles in and out of context, attention, and explicit lifecycle moves.

Every write locks the session row then the handle, checks the transition against
``frames.context.resources`` (409 ``illegal_transition``, nothing changed) and appends its
event in the same transaction. Page-out only queues: the summary is made by the
``handle_page_out`` Celery task, which calls ``handle_page_out_complete``.
"""

import re
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import prefetch_related_objects
from django.utils import timezone

from contextops.audit import audit_person_act
from contextops.embeddings import vector_for_storage
from contextops.errors import Conflict, Invalid, Unavailable
from contextops.jobs import job_send
from contextops.llm import TurnText, summarizer_default
from contextops.models import AuditEntry
from contextops.tokens import count_tokens
from frames.events import handle_event_append
from frames.locks import session_lock
from frames.models import ContextHandle, Session

from .freshness import resource_mark_offline
from .loading import LoadError, resource_load, resource_loadable
from .resources import (
    ACTIVE_STATES,
    COLD,
    HOT,
    INDEXED,
    LOADED,
    OFFLINE,
    state_for_attention,
    transition_check,
)

SUMMARY_MAX_TOKENS = 200
MAX_ATTENTION = 100.0
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def extractive_summary(text: str, max_tokens: int = SUMMARY_MAX_TOKENS) -> str:
    """First and last sentences of ``text``, alternating from both ends, within ``max_tokens``.

    Sentences keep their order; a gap is marked with " … ". A first sentence that is
    itself too long is cut to fit. Counts tokens, so it runs in the worker only.
    """
    sentences = [s.strip() for s in _SENTENCE_END.split(text or "") if s and s.strip()]
    if not sentences:
        return ""
    if count_tokens(" ".join(sentences)) <= max_tokens:
        return " ".join(sentences)
    head: list[str] = []
    tail: list[str] = []
    lo, hi = 0, len(sentences) - 1
    take_head = True

    def render(h, t):
        return " ".join(h) + (" … " + " ".join(t) if t else " …")

    while lo <= hi:
        candidate = sentences[lo] if take_head else sentences[hi]
        trial = render(head + [candidate], tail) if take_head else render(head, [candidate] + tail)
        if count_tokens(trial) > max_tokens:
            break
        if take_head:
            head.append(candidate)
            lo += 1
        else:
            tail.insert(0, candidate)
            hi -= 1
        take_head = not take_head
    if head:
        return render(head, tail)
    # The first sentence alone is too long: keep as much of it as fits.
    first = sentences[0]
    low, high = 0, len(first)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(first[:mid] + " …") <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return first[:low].rstrip() + " …"


def handle_summary(text: str) -> str:
    """The summary a paged-out handle keeps: the model's when a model summarizer is set up
    (the compaction summarizer), else, or when the model fails, an extractive one."""
    summarizer = summarizer_default()
    if summarizer.name != "extractive" and text.strip():
        outcome = summarizer.summarize([TurnText(index=0, user_message=text)])
        if not outcome.failed and outcome.text.strip():
            return outcome.text.strip()
    return extractive_summary(text)


@dataclass
class PageIn:
    handle: ContextHandle
    mode: str
    content: str
    tokens: int


def _locked(handle_id: UUID) -> tuple[Session, ContextHandle]:
    """Lock the handle's session (ended or not), then the handle; return both fresh, the
    handle's notes read with it (the answer shows them, read before the commit)."""
    handle = ContextHandle.objects.only("session_id").get(pk=handle_id)
    session = session_lock(handle.session_id, open_only=False)
    locked = ContextHandle.objects.select_for_update(no_key=True).prefetch_related("annotations")
    return session, locked.get(pk=handle_id)


def _handle_audit(
    action: str, handle: ContextHandle, user: User | None, organization_id: int, **detail: str
) -> None:
    """A person's paging of ``handle`` from the dashboard, in the audit log."""
    audit_person_act(
        user,
        action=action,
        organization_id=organization_id,
        target=f"handle {handle.pk}",
        detail={"frame_id": str(handle.frame_id), "kind": handle.kind, **detail},
    )


def handle_page_out_request(
    *, handle: ContextHandle, actor: str = "", user: User | None = None
) -> ContextHandle:
    """Check that ``handle`` may be paged out and queue the job that does it.

    The handle stays where it is until the worker has written the summary; a second
    request before then queues a job that finds nothing left to do. A person's request
    (``user``, the dashboard's button) is audited once the job is sent.
    """
    from .tasks import handle_page_out  # tasks imports this module: queue the job without a cycle

    transition_check(handle.state, INDEXED)
    # The answer's notes, read before the job goes: once it is sent the answer may not
    # need the database (a restart then would turn a queued page-out into a 500).
    prefetch_related_objects([handle], "annotations")
    if not job_send(handle_page_out, str(handle.pk), actor):
        raise Unavailable(
            "The job queue is unreachable; the handle was left as it was. Retry shortly."
        )
    # Once sent: a job that already ran left the handle indexed, and this matches nothing.
    ContextHandle.objects.filter(pk=handle.pk, state__in=ACTIVE_STATES).update(
        page_out_requested_at=timezone.now()
    )
    if user is not None:  # the organization is the frame's, which the dashboard read
        organization_id = handle.frame.organization_id
        _handle_audit(
            AuditEntry.Action.HANDLE_PAGED_OUT, handle, user, organization_id, state=handle.state
        )
    return handle


def handle_page_out_complete(*, handle_id: UUID | str, actor: str = "") -> ContextHandle | None:
    """Summarize the handle and move it to indexed; None when it is no longer active.

    Idempotent: the state change is a conditional update on an active state, so a
    repeated or late job changes nothing. The summary is counted once and stored.
    """
    handle = ContextHandle.objects.filter(pk=handle_id).first()
    if handle is None:
        return None
    if handle.state not in ACTIVE_STATES:
        if handle.page_out_requested_at is not None:  # nothing left for the sweep to send
            ContextHandle.objects.filter(pk=handle_id).exclude(state__in=ACTIVE_STATES).update(
                page_out_requested_at=None
            )
        return None
    summary = handle.summary or handle_summary(handle.content or handle.ref)
    summary_tokens = count_tokens(summary)
    with transaction.atomic():
        session = session_lock(handle.session_id, open_only=False)
        changed = ContextHandle.objects.filter(pk=handle_id, state__in=ACTIVE_STATES).update(
            state=INDEXED,
            summary=summary,
            summary_tokens=summary_tokens,
            page_out_requested_at=None,
        )
        if changed != 1:
            return None
        handle_event_append(
            session,
            handle,
            "handle.paged_out",
            actor,
            {"from": handle.state, "summary_tokens": summary_tokens},
        )
        handle.refresh_from_db()
    return handle


def handles_page_out_requeue(*, older_than_seconds: int = 60) -> int:
    """Send again the page-outs whose job was sent ``older_than_seconds`` ago and has not
    run (the handle still active); return how many.

    The Redis broker can lose a job it was handed as it restarts, or one a worker took
    off the queue as it died; a page-out has no run of its own, so the handle keeps when
    its job was sent. A job sent twice is harmless: the second finds the handle indexed.
    """
    # tasks imports this module: send the job without a cycle
    from .tasks import handle_page_out

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    pending = ContextHandle.objects.filter(
        page_out_requested_at__lt=cutoff, state__in=ACTIVE_STATES
    ).values_list("pk", flat=True)[:500]
    return sum(job_send(handle_page_out, str(handle_id)) for handle_id in pending)


def _load_cold(handle: ContextHandle) -> str | None:
    """The text of a cold handle's resource when the server loads it
    (docs/concepts.md#resources), else None. A load error takes the handle offline, committed, and raises
    Conflict ``resource_offline``."""
    if handle.state != COLD or handle.content or not resource_loadable(handle.ref):
        return None
    try:
        return resource_load(handle.ref)
    except LoadError as exc:
        resource_mark_offline(handle=handle, detail=str(exc))
        raise Conflict(
            "resource_offline",
            f"The resource could not be loaded ({exc}); the handle is offline until it "
            "recovers (the periodic check, or POST /handles/{id}/state with to=cold).",
            handle_id=str(handle.pk),
            state=OFFLINE,
        ) from exc


def handle_page_in(
    *, handle: ContextHandle, mode: str = "summary", actor: str = "", user: User | None = None
) -> PageIn:
    """Bring ``handle`` back into context (cold or indexed -> loaded) and return its content.

    ``mode`` "summary" returns the stored summary when there is one (else the full
    content), "full" the full content. A person's page-in (``user``, the dashboard's
    button) is audited.
    """
    if mode not in ("summary", "full"):
        raise Invalid("mode must be summary or full.", field="mode")
    loaded = _load_cold(handle)
    # The loaded text replaces the reference as what the handle's vector is of.
    embedding = vector_for_storage(loaded) if loaded else None
    with transaction.atomic():
        session, handle = _locked(handle.pk)
        previous = handle.state
        transition_check(previous, LOADED)
        fields = ["state", "attention_weight", "last_access_at"]
        if loaded is not None and previous == COLD and not handle.content:
            handle.content, handle.estimated_tokens = loaded, count_tokens(loaded)
            fields += ["content", "estimated_tokens"]
            if loaded:  # NULL when the provider failed: the backfill embeds the content
                handle.embedding = embedding
                fields.append("embedding")
        handle.state = LOADED
        handle.attention_weight = min(handle.attention_weight, 1.0)
        handle.last_access_at = timezone.now()
        handle.save(update_fields=fields)
        handle_event_append(
            session, handle, "handle.paged_in", actor, {"from": previous, "mode": mode}
        )
        _handle_audit(
            AuditEntry.Action.HANDLE_PAGED_IN,
            handle,
            user,
            session.organization_id,
            mode=mode,
            state=previous,
        )
    if mode == "summary" and handle.summary:
        return PageIn(handle, "summary", handle.summary, handle.summary_tokens)
    return PageIn(handle, "full", handle.content or handle.ref, handle.estimated_tokens)


def handle_attention_set(*, handle: ContextHandle, weight: float, actor: str = "") -> ContextHandle:
    """Set the attention weight; an active handle becomes hot above 1 and loaded at or below."""
    if not 0 <= weight <= MAX_ATTENTION:
        raise Invalid(f"weight must be between 0 and {MAX_ATTENTION:g}.", field="weight")
    with transaction.atomic():
        session, handle = _locked(handle.pk)
        previous = handle.state
        target = state_for_attention(previous, weight)
        if target != previous:
            transition_check(previous, target)
        handle.attention_weight = weight
        handle.state = target
        handle.last_access_at = timezone.now()
        handle.save(update_fields=["attention_weight", "state", "last_access_at"])
        handle_event_append(
            session,
            handle,
            "handle.attention_set",
            actor,
            {"weight": weight, "from": previous, "to": target},
        )
    return handle


def handle_state_set(*, handle: ContextHandle, to: str, actor: str = "") -> ContextHandle:
    """An explicit lifecycle move (load, stale, error, recover, ...); 409 if the seed has no such edge.

    Moving to hot raises the attention above 1 and back to loaded lowers it to 1, so
    state and weight agree. Going stale (indexed -> cold) clears the cached summary.
    Moving to indexed is a page-out: it queues the summarizing job and returns the
    handle unchanged (the API answers 202).
    """
    with transaction.atomic():
        session, handle = _locked(handle.pk)
        previous = handle.state
        step = transition_check(previous, to)
        if step.trigger == "page_out":
            return handle_page_out_request(handle=handle, actor=actor)
        fields = ["state"]
        handle.state = to
        if to == HOT and handle.attention_weight <= 1.0:
            handle.attention_weight = 2.0
            fields.append("attention_weight")
        elif to == LOADED and handle.attention_weight > 1.0:
            handle.attention_weight = 1.0
            fields.append("attention_weight")
        if step.trigger == "stale":
            handle.summary, handle.summary_tokens = "", 0
            fields += ["summary", "summary_tokens"]
        handle.save(update_fields=fields)
        handle_event_append(
            session,
            handle,
            "handle.state_changed",
            actor,
            {"from": previous, "to": to, "trigger": step.trigger},
        )
    return handle
