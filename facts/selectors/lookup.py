"""Reads of facts by key and in lists, always scoped to one organization: a stored version,
the current head of a key (or the version that held at a time), the filtered list, the
review count, a subject's newest key, the valid-time problems, and conflicts.
"""

import functools
import itertools
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import Case, F, Q, QuerySet, Subquery, When

from contextops.errors import NotFound
from contextops.models import Organization
from contextops.pages import lookups_set
from contextops.rows import columns, fetch

from .. import validtime
from ..models import Fact, FactConflict
from .lineage import fact_links, table_of, with_relations


def fact_get(*, organization: Organization, key: str) -> Fact:
    """The version stored under ``key``; NotFound for unknown keys and other organizations."""
    fact = with_relations(Fact.objects.filter(organization=organization, key=key)).first()
    if fact is None:
        raise NotFound(f"No fact {key}.")
    return fact


@functools.cache
def _fact_by_key_sql() -> str:
    return (
        f"SELECT {columns(Fact, 'f')} FROM {table_of(Fact)} f"
        " WHERE f.organization_id = %s AND f.key = %s"
    )


def fact_with_links(*, organization: Organization, key: str) -> tuple[Fact, dict[str, Any]]:
    """The version stored under ``key`` and the keys it links to (``fact_links``): two
    statements, written once per process. NotFound for unknown keys and other
    organizations."""
    found = fetch(Fact, _fact_by_key_sql(), [organization.pk, key])
    if not found:
        raise NotFound(f"No fact {key}.")
    return found[0], fact_links(found[0])


def held_at(at: datetime, prefix: str = "") -> Q:
    """The versions whose valid interval holds at ``at``: versions that held for a while
    (never proposals, outdated or discarded writes), started by then, not ended by then."""
    return Q(
        **{
            f"{prefix}status__in": Fact.TIMELINE_STATUSES,
            f"{prefix}valid_from__lte": at,
        }
    ) & (Q(**{f"{prefix}valid_until__isnull": True}) | Q(**{f"{prefix}valid_until__gt": at}))


def fact_current_get(*, organization: Organization, key: str, at: datetime | None = None) -> Fact:
    """The valid head of the chain ``key`` belongs to: one query whatever the chain's length.

    An outdated write leads to the head of the chain it lost to (the temporal rule,
    docs/concepts.md#supersession: the later observation stays current). NotFound when the key is unknown, and when its chain
    has no valid version (withdrawn, discarded, or a proposal that never became current).

    ``at``: the version of the chain that held then (valid time) instead of the current
    one, in the same one query (an index on chain and ``valid_from``); NotFound when
    none held then.
    """
    chain = (
        Fact.objects.filter(organization=organization, key=key)
        .annotate(
            lead=Case(
                When(
                    status=Fact.Status.OUTDATED,
                    contested__isnull=False,
                    then=F("contested__chain"),
                ),
                default=F("chain"),
            )
        )
        .values("lead")[:1]
    )
    versions = Fact.objects.filter(organization=organization, chain=Subquery(chain))
    versions = versions.filter(is_valid=True) if at is None else versions.filter(held_at(at))
    fact = versions.select_related("supersedes").order_by("-version").first()
    if fact is None and at is not None:
        if not Fact.objects.filter(organization=organization, key=key).exists():
            raise NotFound(f"No fact {key}.")
        raise NotFound(f"No version of {key}'s chain held at {at.isoformat()}.", at=at.isoformat())
    if fact is None:
        stored = (
            Fact.objects.filter(organization=organization, key=key)
            .values_list("status", flat=True)
            .first()
        )
        if stored is None:
            raise NotFound(f"No fact {key}.")
        raise NotFound(f"{key} has no valid version (its chain ends {stored}).", status=stored)
    return fact


def fact_list(
    *,
    organization: Organization,
    valid: bool | None = True,
    scope: str = "",
    scope_id: str = "",
    subject: str = "",
    needs_review: bool | None = None,
    memory_type: str = "",
    status: str = "",
    search: str = "",
    valid_at: datetime | None = None,
) -> QuerySet[Fact]:
    """Facts of the organization, newest first, filtered; ``valid=None`` means any validity.

    Hypothetical and draft facts belong to their scope: they are listed only when
    ``scope`` (or ``scope_id``) asks for them, never beside the organization's facts.
    ``valid_at``: the versions that held at that time (valid time), whatever they are
    now; ``valid`` is then not applied."""
    queryset = Fact.objects.filter(organization=organization)
    if not scope and not scope_id:
        queryset = queryset.exclude(scope__in=Fact.PRIVATE_SCOPES)
    if valid_at is not None:
        queryset = queryset.filter(held_at(valid_at))
    elif valid is not None:
        queryset = queryset.filter(is_valid=valid)
    queryset = queryset.filter(
        **lookups_set(
            scope=scope,
            scope_id=scope_id,
            subject=subject,
            needs_review=needs_review,
            memory_type=memory_type,
            status=status,
        )
    )
    if search:
        queryset = queryset.filter(search_text__contains=search.lower())
    return with_relations(queryset).order_by("-created_at", "-id")


def fact_review_count(*, organization: Organization) -> int:
    """How many facts of the organization are flagged for review (any validity)."""
    return Fact.objects.filter(organization=organization, needs_review=True).count()


def subject_current_key(
    *, organization: Organization, subject: str, scope: str, scope_id: str
) -> str | None:
    """The key of the subject's newest current fact in a scope, if it has one."""
    return (
        Fact.objects.filter(
            organization=organization,
            subject=subject,
            scope=scope,
            scope_id=scope_id,
            is_valid=True,
        )
        .order_by("-created_at", "-id")
        .values_list("key", flat=True)
        .first()
    )


def fact_timeline_problems() -> Iterator[str]:
    """What is wrong with the valid times of every chain (``validtime.timeline_problems``
    on the versions that held, in version order; a current version that is closed, or a
    replaced one left open): one line per problem, naming the chain's first key. Reads
    the table once, streamed."""
    rows = (
        Fact.objects.filter(status__in=Fact.TIMELINE_STATUSES)
        .order_by("chain", "version")
        .values_list("chain", "key", "is_valid", "valid_from", "valid_until")
    )
    for _, versions in itertools.groupby(rows.iterator(chunk_size=2000), key=lambda r: r[0]):
        found = list(versions)
        intervals = [validtime.Interval(start, end) for _, _, _, start, end in found]
        problems = validtime.timeline_problems(intervals)
        problems += [
            f"{key} is current but its interval is closed"
            for _, key, valid, _, end in found
            if valid and end is not None
        ]
        problems += [
            f"{key} was replaced but its interval is open"
            for _, key, valid, _, end in found[:-1]
            if not valid and end is None
        ]
        for problem in problems:
            yield f"fact chain of {found[0][1]}: valid time: {problem}"


def _conflicts() -> QuerySet[FactConflict]:
    return FactConflict.objects.select_related("fact", "other", "decided_by")


def conflict_get(*, organization: Organization, conflict_id: int) -> FactConflict:
    """One proposed supersession with its two facts; NotFound for another organization's."""
    conflict = _conflicts().filter(organization=organization, pk=conflict_id).first()
    if conflict is None:
        raise NotFound(f"No proposed supersession {conflict_id}.")
    return conflict


def conflict_list(
    *,
    organization: Organization,
    status: str = FactConflict.Status.PROPOSED,
    subject: str = "",
    source: str = "",
    older_than: datetime | None = None,
    newer_than: datetime | None = None,
) -> QuerySet[FactConflict]:
    """Proposed supersessions of the organization, newest first: ``status`` (blank: any),
    ``subject`` and ``source`` matching either fact, and proposed before ``older_than`` /
    after ``newer_than`` (their age)."""
    queryset = _conflicts().filter(organization=organization)
    if status:
        queryset = queryset.filter(status=status)
    if subject:
        queryset = queryset.filter(Q(fact__subject=subject) | Q(other__subject=subject))
    if source:
        queryset = queryset.filter(Q(fact__source=source) | Q(other__source=source))
    if older_than is not None:
        queryset = queryset.filter(created_at__lt=older_than)
    if newer_than is not None:
        queryset = queryset.filter(created_at__gte=newer_than)
    return queryset.order_by("-created_at", "-id")
