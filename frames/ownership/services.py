"""Exporting and deleting a session: the writes (and the one read they share).

A session's rows are found from the models themselves: every model with a foreign key
to ``Session`` (cascading or not), the RLM states of the session with their variables,
mutations and checkpoints, and the facts of the session's own scope (``scope="session"``,
``scope_id`` = its id), with their dependencies. Global facts an agent wrote during the
session stay: other sessions read them.

Some of a session lives in files of the default storage (the bucket in production): the
events retention archived (``events/<organization>/<session>/``) and the RLM values above
the inline limit (``rlm/<organization>/<state>/``). The export reads them back, so it
holds the archived events and the values themselves; the delete removes those files once
its transaction has committed (a file that cannot be removed then is logged, by name).
"""

import base64
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.storage import default_storage
from django.db import models, transaction
from django.utils import timezone

from contextops.audit import audit_record, session_target
from contextops.models import AuditEntry
from facts.models import Fact, FactDependency
from frames.archive import session_events
from frames.locks import session_lock
from frames.models import Event, Session, Suspension, token_hash
from frames.rlm.models import RlmCheckpoint, RlmMutation, RlmState, RlmVariable
from frames.rlm.values import stored_value

logger = logging.getLogger(__name__)

# One run of the beat job deletes at most this many sessions; the next run takes the rest.
SESSIONS_PER_RUN = 100
RETENTION_ACTOR = "retention"

EXPORT_FORMAT = "contextops.session-export"
EXPORT_VERSION = 1


def _plain(value: Any) -> Any:
    """A stored value as JSON: ids and times as strings, bytes as base64."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return {"base64": base64.b64encode(bytes(value)).decode()}
    return value


def _session_models() -> list[tuple[Any, str, bool]]:
    """(model, name of its foreign key to Session, whether deleting the session deletes
    its rows) for every model that has such a key."""
    found = []
    for model in apps.get_models():
        for f in model._meta.concrete_fields:
            if isinstance(f, models.ForeignKey) and f.related_model is Session:
                cascades = f.remote_field.on_delete is models.CASCADE
                found.append((model, f.name, cascades))
    return sorted(found, key=lambda found: found[0]._meta.label)


def _rows(queryset) -> list[dict]:
    return [_plain(row) for row in queryset.order_by("pk").values()]


def _events(session: Session) -> list[dict]:
    """Every event of the session, those retention archived to files first, as rows of
    the event table (an archived event has no row id any more: ``id`` is null)."""
    fields = [f.attname for f in Event._meta.concrete_fields]
    return [_plain({f: getattr(event, f) for f in fields}) for event in session_events(session)]


def _with_values(rows: list[dict], pairs: tuple[tuple[str, str], ...]) -> list[dict]:
    """RLM rows with the values kept in files read back into them: for each (value
    column, file column) of ``pairs``, a row naming a file gets that file's value."""
    for row in rows:
        for value, file in pairs:
            if row.get(file):
                row[value] = _plain(stored_value(row[value], row[file]))
    return rows


def _files_under(prefix: str) -> Iterator[str]:
    """The names of the files of the default storage below ``prefix`` (a folder)."""
    try:
        folders, files = default_storage.listdir(prefix)
    except FileNotFoundError:  # the local storage has no folder until a file is written
        return
    yield from (f"{prefix}{name}" for name in files)
    for folder in folders:
        yield from _files_under(f"{prefix}{folder}/")


def _session_files(session: Session) -> list[str]:
    """The files of the default storage that hold only this session's data: its archived
    events and its RLM states' values. An RLM state's id is unique in its organization, so
    its folder is its own."""
    organization = session.organization_id
    prefixes = [f"events/{organization}/{session.pk}/"] + [
        f"rlm/{organization}/{state_id}/"
        for state_id in RlmState.objects.filter(session=session).values_list("state_id", flat=True)
    ]
    return sorted({name for prefix in prefixes for name in _files_under(prefix)})


def _files_delete(names: list[str]) -> None:
    """Remove files once the rows pointing at them are gone; log those that stay."""
    left = []
    for name in names:
        try:
            default_storage.delete(name)
        except Exception:  # the bucket is away: the rows are gone already, say what stays
            left.append(name)
    if left:
        logger.error(
            "A deleted session's %d file(s) could not be removed from storage: %s",
            len(left),
            ", ".join(left),
        )


def _own_facts(session: Session):
    """The facts of the session's own scope, with nothing outside it building on them."""
    scoped = Fact.objects.filter(
        organization_id=session.organization_id,
        scope=Fact.Scope.SESSION,
        scope_id=str(session.pk),
    )
    ids = [pk for pk in scoped.values_list("pk", flat=True) if pk is not None]
    kept = {
        pk
        for pk in Fact.objects.filter(supersedes__in=ids)
        .exclude(pk__in=ids)
        .values_list("supersedes", flat=True)
        if pk is not None
    }
    return scoped.exclude(pk__in=kept)


def session_export(*, session: Session, actor: str = "", user: User | None = None) -> dict:
    """The whole session as one JSON document; the export is audited."""
    with transaction.atomic():
        document: dict[str, Any] = {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "exported_at": timezone.now().isoformat(),
            "session": _rows(Session.objects.filter(pk=session.pk))[0],
        }
        tables: dict[str, list[dict]] = {}
        for model, field, _ in _session_models():
            if model in (Session, Event):
                continue
            rows = _rows(model.objects.filter(**{field: session.pk}))
            if model is Suspension:  # the token is a bearer secret: only its hash leaves
                for row in rows:
                    row["token_hash"] = token_hash(row.pop("token"))
            tables[model._meta.label_lower] = rows
        states = RlmState.objects.filter(session=session)
        facts = _own_facts(session)
        document.update(
            frames=tables.pop("frames.frame", []),
            events=_events(session),
            turns=tables.pop("conversation.turn", []),
            usage=tables.pop("frames.usage", []),
            facts=_rows(facts),
            fact_dependencies=_rows(FactDependency.objects.filter(fact__in=facts)),
            rlm_states=[
                {
                    **state,
                    "variables": _with_values(
                        _rows(RlmVariable.objects.filter(state_id=state["id"])),
                        (("value", "file_name"),),
                    ),
                    "mutations": _with_values(
                        _rows(RlmMutation.objects.filter(state_id=state["id"])),
                        (("old_value", "old_file"), ("new_value", "new_file")),
                    ),
                    "checkpoints": _rows(RlmCheckpoint.objects.filter(state_id=state["id"])),
                }
                for state in _rows(states)
            ],
            other=tables,
        )
        _audited(
            AuditEntry.Action.SESSION_EXPORTED,
            session,
            actor=actor,
            user=user,
            frames=len(document["frames"]),
        )
    return json.loads(json.dumps(document))


def _audited(
    action: str, session: Session, *, actor: str, user: User | None, **detail: Any
) -> None:
    """Audit ``action`` on ``session``: its organization's entry naming it, its title first
    in the detail (the row itself may be gone by then: only its fields are read)."""
    audit_record(
        action=action,
        actor=actor,
        user=user,
        organization_id=session.organization_id,
        target=session_target(session.pk),
        detail={"title": session.title[:200], **detail},
    )


def session_delete(*, session: Session, actor: str = "", user: User | None = None) -> dict:
    """Delete the session and everything that belongs only to it, in one transaction;
    returns how many rows of each kind went (and, as ``storage.file``, how many files of
    the default storage go once it commits). The deletion is audited."""
    with transaction.atomic():
        locked = session_lock(session, open_only=False)
        deleted: dict[str, int] = {}
        files = _session_files(locked)

        def count(result: tuple[int, dict[str, int]]) -> None:
            for label, n in result[1].items():
                deleted[label] = deleted.get(label, 0) + n

        # What does not cascade from the session row: RLM states, imports and the rest
        # whose link to the session is SET_NULL, and the facts of its scope.
        for model, field, cascades in _session_models():
            if model is not Session and not cascades:
                count(model.objects.filter(**{field: locked.pk}).delete())
        facts = list(_own_facts(locked).order_by("-created_at"))
        for fact in facts:  # newest first: a version is deleted before the one it superseded
            count(Fact.objects.filter(pk=fact.pk).delete())
        count(Session.objects.filter(pk=locked.pk).delete())
        if files:
            deleted["storage.file"] = len(files)
            transaction.on_commit(lambda: _files_delete(files))
        _audited(
            AuditEntry.Action.SESSION_DELETED,
            locked,
            actor=actor,
            user=user,
            deleted=dict(sorted(deleted.items())),
        )
    return {"session_id": str(locked.pk), "deleted": dict(sorted(deleted.items()))}


def sessions_expired(*, days: int, now: datetime | None = None):
    """Sessions that ended at least ``days`` days ago, oldest first."""
    cutoff = (now or timezone.now()) - timedelta(days=days)
    return Session.objects.filter(
        lifecycle_state=Session.Lifecycle.ENDED, ended_at__isnull=False, ended_at__lte=cutoff
    ).order_by("ended_at")


def sessions_delete_expired(
    *, days: int | None = None, now: datetime | None = None, limit: int = SESSIONS_PER_RUN
) -> list[str]:
    """Delete up to ``limit`` sessions past ``CONTEXTOPS_SESSION_RETENTION_DAYS`` (or
    ``days``; 0 keeps every session), each as ``session_delete`` does and audited with the
    actor "retention"; returns their ids. A session another run deleted meanwhile is
    skipped."""
    if days is None:
        days = settings.CONTEXTOPS_SESSION_RETENTION_DAYS
    if days <= 0:
        return []
    deleted = []
    for session in sessions_expired(days=days, now=now)[:limit]:
        try:
            session_delete(session=session, actor=RETENTION_ACTOR)
        except Session.DoesNotExist:
            continue
        deleted.append(str(session.pk))
    return deleted
