"""Reads of the conversation, scoped to one organization (another's objects are NotFound)."""

import uuid
from typing import Any

from django.db.models import QuerySet

from contextops.errors import NotFound
from frames.models import Session

from .models import MAIN_BRANCH, CompactionRun, Import, Summary, Turn


def turns_list(
    *,
    session: Session,
    branch: str = MAIN_BRANCH,
    after: int | None = None,
    limit: int | None = None,
) -> QuerySet[Turn]:
    """The branch's turns in order (index ascending), after index ``after`` when given."""
    turns = Turn.objects.filter(session=session, branch=branch).order_by("index")
    if after is not None:
        turns = turns.filter(index__gt=after)
    return turns[:limit] if limit else turns


def turn_branches(*, session: Session) -> list[str]:
    return list(
        Turn.objects.filter(session=session)
        .order_by("branch")
        .values_list("branch", flat=True)
        .distinct()
    )


def compaction_get(*, organization, compaction_id: Any) -> CompactionRun:
    try:
        pk = uuid.UUID(str(compaction_id))
    except (TypeError, ValueError, AttributeError):
        raise NotFound("No such compaction.") from None
    run = (
        CompactionRun.objects.select_related("summary")
        .filter(pk=pk, session__organization=organization)
        .first()
    )
    if run is None:
        raise NotFound("No such compaction.")
    return run


def compactions_list(*, session: Session) -> QuerySet[CompactionRun]:
    return (
        CompactionRun.objects.filter(session=session)
        .select_related("summary")
        .order_by("-created_at")
    )


def summaries_by_id(*, session: Session) -> dict:
    return {s.pk: s for s in Summary.objects.filter(session=session)}


def occupancy_series(*, session: Session, branch: str = MAIN_BRANCH) -> list[tuple[int, int]]:
    """(turn index, window occupancy of its latest call) for the turns that reported usage."""
    return list(
        Turn.objects.filter(session=session, branch=branch, occupancy_tokens__gt=0)
        .order_by("index")
        .values_list("index", "occupancy_tokens")
    )


def import_get(*, organization, import_id: Any) -> Import:
    """The organization's import ``import_id``, with its source; NotFound for any other."""
    import_id = str(import_id)
    job = (
        Import.objects.select_related("source")
        .filter(pk=import_id, organization=organization)
        .first()
        if len(import_id) <= 24
        else None
    )
    if job is None:
        raise NotFound("No such import.")
    return job
