"""Keeping the resource lifecycle true to the world (docs/concepts.md#resources): stale,
offline, recover.

The periodic task ``frames.resources_check`` calls ``resources_check``:

- an indexed resource (a handle with a ``ref``) not accessed for
  ``CONTEXTOPS_RESOURCE_STALE_SECONDS`` goes stale: back to cold, its cached summary
  cleared (``stale()``);
- a cold or indexed resource the server loads (``frames.context.loading``) that cannot
  be read any more goes offline (``error``); an offline one readable again recovers to
  cold (``recover``).

A page-in that fails to load a cold resource also takes it offline
(``resource_mark_offline``). Every move is a conditional update under the session
lock with its ``handle.state_changed`` event, so two checks running at once move a
handle once.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from frames.events import handle_event_append
from frames.locks import session_lock
from frames.models import ContextHandle

from .loading import resource_loadable, resource_reachable
from .resources import COLD, INDEXED, OFFLINE, transition_check

SYSTEM_ACTOR = "system:resources"
BATCH = 500


@dataclass(frozen=True)
class ResourceCheck:
    stale: int
    offline: int
    recovered: int


def _move(handle_id, *, source: str, target: str, actor: str, detail: str = "") -> bool:
    """Move one handle from ``source`` to ``target`` if it is still there; True if moved."""
    step = transition_check(source, target)
    handle = ContextHandle.objects.filter(pk=handle_id).only("session_id", "frame_id").first()
    if handle is None:
        return False
    with transaction.atomic():
        session = session_lock(handle.session_id, open_only=False)
        fields: dict = {"state": target}
        if step.trigger == "stale":
            fields.update(summary="", summary_tokens=0)
        if ContextHandle.objects.filter(pk=handle_id, state=source).update(**fields) != 1:
            return False
        payload = {"from": source, "to": target, "trigger": step.trigger}
        if detail:
            payload["detail"] = detail[:500]
        handle_event_append(session, handle, "handle.state_changed", actor, payload)
    return True


def resource_mark_offline(*, handle: ContextHandle, detail: str, actor: str = "") -> bool:
    """Take ``handle`` offline after a load error (any state -> offline,
    docs/concepts.md#resources)."""
    return _move(
        handle.pk, source=handle.state, target=OFFLINE, actor=actor or SYSTEM_ACTOR, detail=detail
    )


def resources_check(*, now: datetime | None = None) -> ResourceCheck:
    """One pass of the periodic check (see the module docstring); at most BATCH handles
    of each kind per pass."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=getattr(settings, "CONTEXTOPS_RESOURCE_STALE_SECONDS", 86_400))
    stale = 0
    rows = (
        ContextHandle.objects.filter(state=INDEXED, last_access_at__lt=cutoff)
        .exclude(ref="")
        .values_list("pk", flat=True)[:BATCH]
    )
    for pk in list(rows):
        stale += _move(pk, source=INDEXED, target=COLD, actor=SYSTEM_ACTOR)
    offline = recovered = 0
    probed = (
        ContextHandle.objects.filter(state__in=(COLD, INDEXED, OFFLINE), ref__startswith="file:")
        .order_by("last_access_at")
        .values_list("pk", "state", "ref")[: BATCH * 2]
    )
    for pk, state, ref in list(probed):
        if not resource_loadable(ref):
            continue
        reachable = resource_reachable(ref)
        if state == OFFLINE and reachable:
            recovered += _move(pk, source=OFFLINE, target=COLD, actor=SYSTEM_ACTOR)
        elif state != OFFLINE and not reachable:
            offline += _move(
                pk, source=state, target=OFFLINE, actor=SYSTEM_ACTOR, detail=f"{ref} is unreachable"
            )
    return ResourceCheck(stale=stale, offline=offline, recovered=recovered)
