"""Request and response bodies of the facts API."""

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field

from contextops.bodies import BodyIn
from contextops.pages import Page

from .models import Fact


class FactIn(BodyIn):
    key: str = Field(..., min_length=1, max_length=200)
    subject: str = Field(
        "", max_length=200, description="Defaults to the key without a _v<n> suffix."
    )
    value: Any = Field(..., description="Any JSON except null.")
    source: str = Field(
        ..., max_length=120, description="policy, finance_system, user, observation, ..."
    )
    observed_at: datetime | None = Field(
        None,
        description="When the value was observed; for such facts the later observation wins (temporal rule).",
    )
    valid_from: datetime | None = Field(
        None,
        description=(
            "Valid time: when the statement started to hold (default observed_at, else now); "
            "may be in the past (a retroactive correction ends the current version's interval "
            "there), never in the future."
        ),
    )
    memory_type: str = Field(
        "", description="user, capability or organizational; derived from source when empty."
    )
    scope: str = Field("global", description="global, task, hypothetical, draft or session.")
    scope_id: str = Field("", max_length=200)
    supersedes: str = Field(
        "", max_length=200, description="Key of the fact this one explicitly supersedes."
    )
    depends_on: list[str] = Field(default_factory=list, max_length=200)
    is_constraint: bool = False
    constraint_type: str = Field(
        "", max_length=40, description="budget, deadline, capacity, policy, ..."
    )
    constraint: dict[str, Any] | None = Field(
        None,
        description='Machine-checkable: {"max": 15, "unit": "%"}, {"min": n}, {"allowed": [...]}, {"before": "2026-03-01"}.',
    )
    read_authority: str = Field(
        "", max_length=64, description="Lowest authority allowed to read it into a context."
    )
    read_permission: str = Field(
        "",
        max_length=100,
        description="A permission the session's identity must hold for a context to include it.",
    )
    utterance: str = Field(
        "",
        max_length=5000,
        description=(
            "The user's own words this fact came from. With one of the explicit-supersession keywords "
            "(new, changed, moved, updated, actually, correction, instead, now) and no "
            "`supersedes`, the write explicitly supersedes the subject's current fact."
        ),
    )


class FactOut(Schema):
    id: int
    key: str
    subject: str
    value: Any
    source: str
    authority: str
    author: str
    memory_type: str
    scope: str
    scope_id: str
    is_valid: bool
    status: str
    timestamp: datetime
    observed_at: datetime | None
    valid_from: datetime
    valid_until: datetime | None
    version: int
    chain: str
    supersedes: str | None
    superseded_by: str | None
    supersession_rule: str
    contested: str | None
    depends_on: list[str]
    derived_facts: list[str]
    needs_review: bool
    is_constraint: bool
    constraint_type: str
    constraint: dict[str, Any] | None
    read_authority: str
    read_permission: str
    tokens: int


class FactWriteOut(FactOut):
    outcome: str = Field(
        ..., description="created, superseded, proposal, outdated, unchanged or promoted."
    )
    rule: str
    notice: str
    flagged_for_review: int
    detected_keywords: list[str] = Field(
        default_factory=list, description="Rule 1's keywords found in `utterance`."
    )
    proposed_conflicts: list["ConflictOut"] = Field(
        default_factory=list,
        description="Supersessions this write proposes against current facts of other subjects (never applied).",
    )


class FactListOut(Page[FactOut]):
    """A page of facts."""


class LineageVersionOut(FactOut):
    superseded_by_rule: str = Field(
        ..., description="The rule by which the next version superseded this one."
    )


class DependentOut(Schema):
    key: str
    subject: str
    value: Any
    is_valid: bool
    status: str
    needs_review: bool
    depends_on: list[str]


class LineageOut(Schema):
    key: str
    chain: list[LineageVersionOut]
    total_versions: int
    older_before_version: int | None
    contested: list[FactOut]
    dependents: list[DependentOut]


class ConstraintCheckIn(BodyIn):
    subject: str = Field(..., min_length=1, max_length=200)
    value: Any
    scope_id: str = Field(
        "", max_length=200, description="Also apply task/session constraints of this scope."
    )


class ViolationOut(Schema):
    fact_key: str
    constraint: dict[str, Any]
    detail: str


class ConstraintCheckOut(Schema):
    subject: str
    value: Any
    allowed: bool
    checked: list[str]
    violations: list[ViolationOut]


class WorkingSetIn(BodyIn):
    value: Any
    ttl_seconds: int | None = Field(None, ge=1, le=365 * 24 * 3600)


class WorkingSetOut(Schema):
    key: str
    value: Any
    tokens: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None


class EnvironmentIn(BodyIn):
    timezone: str | None = Field(None, max_length=64)
    location: str | None = Field(None, max_length=300)
    external_data: dict[str, Any] | None = None


class EnvironmentOut(Schema):
    timezone: str
    location: str | None
    external_data: dict[str, Any]
    current_time: datetime
    current_date: str


def _key(fact: Fact | None) -> str | None:
    return fact.key if fact is not None else None


def fact_out(fact: Fact, *, links: dict[str, Any] | None = None) -> dict[str, Any]:
    """The API body of ``fact``; load it through ``selectors.with_relations`` for lists.

    ``links`` gives the keys of related facts (supersedes, superseded_by, contested,
    depends_on, derived_facts) when the caller already knows them, e.g. for a fact just
    written or for a chain read in order; then no related row is read.
    """
    if links is None:
        links = {
            "supersedes": _key(fact.supersedes),
            "superseded_by": _key(fact.superseded_by_fact),
            "contested": _key(fact.contested),
            "depends_on": sorted(f.key for f in fact.depends_on.all()),
            "derived_facts": sorted(f.key for f in fact.derived_facts.all()),
        }
    return {
        "id": fact.pk,
        "key": fact.key,
        "subject": fact.subject,
        "value": fact.value,
        "source": fact.source,
        "authority": fact.authority,
        "author": fact.author,
        "memory_type": fact.memory_type,
        "scope": fact.scope,
        "scope_id": fact.scope_id,
        "is_valid": fact.is_valid,
        "status": fact.status,
        "timestamp": fact.created_at,
        "observed_at": fact.observed_at,
        "valid_from": fact.valid_from,
        "valid_until": fact.valid_until,
        "version": fact.version,
        "chain": str(fact.chain),
        "supersedes": links["supersedes"],
        "superseded_by": links["superseded_by"],
        "supersession_rule": fact.supersession_rule,
        "contested": links["contested"],
        "depends_on": links["depends_on"],
        "derived_facts": links["derived_facts"],
        "needs_review": fact.needs_review,
        "is_constraint": fact.is_constraint,
        "constraint_type": fact.constraint_type,
        "constraint": fact.constraint,
        "read_authority": fact.read_authority,
        "read_permission": fact.read_permission,
        "tokens": fact.tokens,
    }


def working_set_out(item) -> dict[str, Any]:
    return {
        "key": item.key,
        "value": item.value,
        "tokens": item.tokens,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
        "expires_at": item.expires_at,
    }


class ConflictOut(Schema):
    """A proposed supersession and its evidence: ``fact`` would supersede ``other``."""

    id: int
    status: str = Field(..., description="proposed, accepted, rejected or distinct.")
    fact: str
    fact_subject: str
    fact_value: Any
    fact_source: str
    other: str
    other_subject: str
    other_value: Any
    other_source: str
    similarity: float = Field(..., description="Cosine of the two facts' stored vectors.")
    matched_words: list[str] = Field(..., description="Entity words both subjects/keys share.")
    created_at: datetime
    decided_by: str
    decided_at: datetime | None


class ConflictListOut(Page[ConflictOut]):
    """A page of proposed supersessions."""


def conflict_out(conflict) -> dict[str, Any]:
    fact, other = conflict.fact, conflict.other
    return {
        "id": conflict.pk,
        "status": conflict.status,
        "fact": fact.key,
        "fact_subject": fact.subject,
        "fact_value": fact.value,
        "fact_source": fact.source,
        "other": other.key,
        "other_subject": other.subject,
        "other_value": other.value,
        "other_source": other.source,
        "similarity": conflict.similarity,
        "matched_words": list(conflict.matched_words or []),
        "created_at": conflict.created_at,
        "decided_by": conflict.decided_actor,
        "decided_at": conflict.decided_at,
    }
