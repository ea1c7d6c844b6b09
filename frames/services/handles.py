"""Writes of context handles: adding an item to an open frame's context, counted and
embedded once."""

from django.db import transaction

from contextops.embeddings import vector_for_storage
from contextops.errors import Invalid
from contextops.tokens import count_tokens

from ..events import handle_event_append
from ..models import ContextHandle, Frame
from .stack import open_frame_lock


def handle_add(
    *,
    frame: Frame,
    kind: str,
    priority: str = ContextHandle.Priority.MEDIUM,
    content: str = "",
    ref: str = "",
    category: str = "",
    tool_call_id: str = "",
    estimated_tokens: int | None = None,
    state: str = ContextHandle.State.LOADED,
    actor: str = "",
) -> ContextHandle:
    """Add an item to a frame's context; its token count is computed here, once.

    A reference without content is counted from ``estimated_tokens`` when given.
    ``state`` is ``loaded`` (in the window) or ``cold`` (discovered: registered, not
    loaded; it costs the window nothing until it is paged in); Invalid otherwise.
    """
    if state not in (ContextHandle.State.LOADED, ContextHandle.State.COLD):
        raise Invalid("A new handle is loaded or cold.", field="state")
    tokens = count_tokens(content) if content else (estimated_tokens or 0)
    # Embedded once, here, before the locks are taken (ContextHandle.embedding_text).
    embedding = vector_for_storage(content or ref)
    with transaction.atomic():
        session, frame = open_frame_lock(frame, action="add a handle to")
        handle = ContextHandle.objects.create(
            frame=frame,
            session=session,
            kind=kind,
            priority=priority,
            category=category,
            content=content,
            ref=ref,
            tool_call_id=tool_call_id,
            estimated_tokens=tokens,
            state=state,
            embedding=embedding,
        )
        handle_event_append(
            session,
            handle,
            "frame.handle_added",
            actor,
            {"kind": kind, "priority": priority, "tokens": tokens, "state": state},
        )
    return handle
