"""The dashboard's LangGraph thread page: history, values at a checkpoint, a diff, pending writes."""

import json
from typing import Any

from django.http import Http404
from django.views.decorators.http import require_GET

from contextops.dashboard import organization_required, render_page
from contextops.errors import NotFound
from contextops.http import MemberRequest

from . import selectors, services
from .selectors import CheckpointTuple

HISTORY_SHOWN = 500


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


_node = services.task_node


def _values(item: CheckpointTuple) -> dict[str, str]:
    return {b.channel: _shown(b.preview) for b in item.blobs if b.type != "empty"}


def _diff(before: CheckpointTuple | None, after: CheckpointTuple) -> list[dict[str, str]]:
    """Channels added, changed or removed from ``before`` to ``after`` (by version)."""
    old = {b.channel: b for b in before.blobs} if before else {}
    new = {b.channel: b for b in after.blobs}
    changes = []
    for channel in sorted(old.keys() | new.keys()):
        a, b = old.get(channel), new.get(channel)
        if a is not None and b is not None and a.version == b.version:
            continue
        changes.append(
            {
                "channel": channel,
                "change": "added" if a is None else "removed" if b is None else "changed",
                "before": _shown(a.preview) if a else "",
                "after": _shown(b.preview) if b else "",
            }
        )
    return changes


@require_GET
@organization_required
def thread_detail(request: MemberRequest, pk: str):
    """``?at=<checkpoint id>`` picks the checkpoint (default: the latest), ``?against=``
    the one the diff starts from (default: its parent)."""
    request.nav_section = "sessions"
    try:
        thread = selectors.thread_by_pk(organization=request.organization, pk=pk)
    except (NotFound, ValueError):
        raise Http404("No such thread.") from None
    items = selectors.checkpoint_list(
        organization=request.organization, thread=thread, limit=HISTORY_SHOWN
    )
    by_id = {(i.checkpoint.checkpoint_ns, i.checkpoint.checkpoint_id): i for i in items}
    history = []
    for item in reversed(items):  # oldest first
        cp = item.checkpoint
        parent = by_id.get((cp.checkpoint_ns, cp.parent_checkpoint_id))
        nodes = sorted({_node(w.task_path) for w in parent.writes} - {""}) if parent else []
        history.append(
            {
                "row": cp,
                "nodes": ", ".join(nodes),
                "metadata": _shown(
                    {k: v for k, v in cp.metadata.items() if k not in ("step", "source")}
                ),
            }
        )
    ns = request.GET.get("ns", "")
    at = by_id.get((ns, request.GET.get("at", "")))
    if at is None:
        at = next((i for i in items if i.checkpoint.checkpoint_ns == ns), None)
    against = None
    if at is not None:
        against_id = request.GET.get("against") or at.checkpoint.parent_checkpoint_id
        against = by_id.get((ns, against_id))
    context = {
        "thread": thread,
        "history": history,
        "at": at,
        "against": against,
        "values": sorted(_values(at).items()) if at else [],
        "diff": _diff(against, at) if at else [],
        "writes": [
            {"row": w, "node": _node(w.task_path), "value": _shown(w.preview)}
            for w in (at.writes if at else [])
        ],
    }
    return render_page(request, "graphs/thread_detail.html", context)
