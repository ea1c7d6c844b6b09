"""Facts, constraints, the working set and the environment: ``/facts``, ``/constraints``,
``/sessions/{id}/working-set``, ``/sessions/{id}/environment``."""

from datetime import timedelta
from typing import Any, Literal

from django.http import HttpResponse
from django.utils import timezone
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import AwareDatetime, Field

from contextops import tracing
from contextops.actors import agent_actor
from contextops.errors import Invalid
from contextops.http import ApiRequest, prebuilt_json_response
from contextops.pages import Offset, queryset_page
from contextops.text import key_lookup
from contextops.zones import local_now, local_zone
from frames.models import Session
from frames.selectors import session_get

from . import services
from .models import Fact
from .schemas import (
    ConflictListOut,
    ConflictOut,
    ConstraintCheckIn,
    ConstraintCheckOut,
    EnvironmentIn,
    EnvironmentOut,
    FactIn,
    FactListOut,
    FactOut,
    FactWriteOut,
    LineageOut,
    WorkingSetIn,
    WorkingSetOut,
    conflict_out,
    fact_out,
    working_set_out,
)
from .selectors import constraints, lineage, lookup, working_set

router = Router(tags=["facts"])


def _write_body(result: services.FactWriteResult) -> dict[str, Any]:
    """The answer to a write, from what the service read before its commit."""
    fact = result.fact
    if result.created:
        links = {
            "supersedes": result.superseded.key if result.superseded else None,
            # A late older observation is superseded by the head it lost to (rule 4).
            "superseded_by": fact.contested.key
            if fact.status == Fact.Status.OUTDATED and fact.contested is not None
            else None,
            "contested": fact.contested.key if fact.contested is not None else None,
            "depends_on": sorted(result.depends_on or []),
            "derived_facts": [],
        }
        body = fact_out(fact, links=links)
    else:
        body = fact_out(fact)
    return {
        **body,
        "outcome": result.outcome,
        "rule": result.rule,
        "notice": result.notice,
        "flagged_for_review": result.flagged,
        "detected_keywords": result.detected,
        "proposed_conflicts": [conflict_out(c) for c in result.conflicts],
    }


@router.post(
    "/facts",
    response={200: FactWriteOut, 201: FactWriteOut},
    summary="Write a fact (supersession rules applied)",
    description=(
        "201 with `outcome` created, superseded (naming `rule`: explicit, implicit, authority or temporal), "
        "proposal (a lower authority wrote on a subject held by a higher one: kept, never current) or "
        "outdated (an older observation than the current fact). 200 `unchanged` when the same key and value "
        "were written before, or when a new key states what the subject's current fact in that scope already "
        "states (the body is that current fact; nothing is stored and no dependent is flagged) unless it carries "
        "a higher authority or a later `observed_at`. 403 `authority_too_low` (+ `fact_key`, `fact_authority`, "
        "`proposal`) for an explicit supersession of a higher authority's fact: the write is still kept, as the "
        "writer's proposal under the key `proposal` (never current), and the higher fact stays current. "
        "404 when `supersedes` names no fact of this organization, 409 `already_superseded` (+ `superseded_by`), "
        "409 `key_exists`, 422 for bad scope, memory type, constraint or a cycle in `depends_on`."
    ),
)
def fact_create(request: ApiRequest, payload: FactIn) -> Status:
    # Not wrapped in a transaction: a refused supersession commits its proposal, then raises.
    with tracing.span("update_memory", {"gen_ai.operation.name": "update_memory"}) as current:
        result = services.fact_write(
            organization=request.organization,
            authority=request.agent.authority,
            author=agent_actor(request.agent),
            **payload.model_dump(),
        )
        tracing.span_set(
            current,
            {
                "gen_ai.memory.record.id": result.fact.key,
                "gen_ai.memory.type": result.fact.memory_type,
                "gen_ai.memory.scope": result.fact.scope,
                "gen_ai.memory.update.outcome": result.outcome,
                "gen_ai.memory.update.rule": result.rule or None,
                "gen_ai.memory.supersedes": result.superseded.key if result.superseded else None,
            },
        )
    return Status(201 if result.created else 200, _write_body(result))


class FactFilters(Schema):
    valid: Literal["true", "false", "any"] = "true"
    scope: str = Field("", max_length=16)
    scope_id: str = Field("", max_length=200)
    subject: str = Field("", max_length=200)
    needs_review: bool | None = None
    memory_type: str = Field("", max_length=16)
    status: str = Field("", max_length=12)
    limit: int = Field(50, ge=1, le=500)
    offset: Offset = 0
    valid_at: AwareDatetime | None = Field(
        None, description="Valid time: the versions that held then (`valid` is not applied)."
    )


@router.get(
    "/facts",
    response=FactListOut,
    summary="The organization's facts, newest first (valid only by default)",
)
def fact_list(request: ApiRequest, filters: Query[FactFilters]) -> dict[str, Any]:
    for name, allowed in (
        ("scope", Fact.Scope.values),
        ("memory_type", Fact.MemoryType.values),
        ("status", Fact.Status.values),
    ):
        value = getattr(filters, name)
        if value and value not in allowed:
            raise Invalid(f"{name} must be one of {', '.join(allowed)}.", field=name)
    facts = lookup.fact_list(
        organization=request.organization,
        valid={"true": True, "false": False, "any": None}[filters.valid],
        scope=filters.scope,
        scope_id=filters.scope_id,
        subject=filters.subject,
        needs_review=filters.needs_review,
        memory_type=filters.memory_type,
        status=filters.status,
        valid_at=filters.valid_at,
    )
    return queryset_page(facts, offset=filters.offset, limit=filters.limit, out=fact_out)


@router.get("/facts/{key}", response=FactOut, summary="One version, as stored under its key")
def fact_get(request: ApiRequest, key: str) -> dict[str, Any]:
    fact, links = lookup.fact_with_links(organization=request.organization, key=key_lookup(key))
    return fact_out(fact, links=links)


class CurrentAt(Schema):
    at: AwareDatetime | None = None


@router.get(
    "/facts/{key}/current",
    response=FactOut,
    summary="The valid head of the key's chain (one query), or the version that held `at` a time",
    description=(
        "404 when the key is unknown or its chain has no valid version; with `at` (valid time, "
        "with a time zone), the version of the chain that held then, 404 when none did."
    ),
)
def fact_current(request: ApiRequest, key: str, when: Query[CurrentAt]) -> dict[str, Any]:
    fact = lookup.fact_current_get(
        organization=request.organization, key=key_lookup(key), at=when.at
    )
    return fact_out(fact, links=lineage.fact_links(fact))


class LineagePage(Schema):
    limit: int = Field(lineage.LINEAGE_PAGE, ge=1, le=lineage.LINEAGE_PAGE_MAX)
    before_version: int | None = Field(None, ge=1, le=2**31 - 1)


@router.get(
    "/facts/{key}/lineage",
    response=LineageOut,
    summary="The key's supersession chain, oldest first, and every fact depending on a version",
    description=(
        "A long chain comes in pages: `chain` holds the newest `limit` versions (100 by "
        "default, at most 500) below `before_version` (the newest of the whole chain "
        "without it), oldest first; `total_versions` counts the whole chain and "
        "`older_before_version` is the `before_version` of the page before (null at the "
        "root). `contested` and `dependents` cover every version."
    ),
)
def fact_lineage(request: ApiRequest, key: str, page: Query[LineagePage]) -> HttpResponse:
    versions = lineage.fact_lineage(
        organization=request.organization,
        key=key_lookup(key),
        before_version=page.before_version,
        limit=page.limit,
    )
    chain = versions.chain
    older, newer = versions.older, versions.newer
    keys = {f.pk: f.key for f in (*versions.chain, *versions.dependents)}
    depends: dict[int, list[str]] = {}
    for fact_id, up_id in versions.edges:
        depends.setdefault(fact_id, []).append(keys.get(up_id, ""))
    body = {
        "key": key,
        "chain": [
            {
                **fact_out(
                    f,
                    links={
                        "supersedes": chain[i - 1].key if i else (older.key if older else None),
                        "superseded_by": (
                            chain[i + 1].key
                            if i + 1 < len(chain)
                            else (newer.key if newer else None)
                        ),
                        "contested": None,
                        "depends_on": versions.depends_on[f.pk],
                        "derived_facts": versions.derived_facts[f.pk],
                    },
                ),
                "superseded_by_rule": versions.superseded_rule(i),
            }
            for i, f in enumerate(chain)
        ],
        "total_versions": versions.total_versions,
        "older_before_version": versions.older_cursor,
        "contested": [fact_out(f) for f in versions.contested],
        "dependents": [
            {
                "key": d.key,
                "subject": d.subject,
                "value": d.value,
                "is_valid": d.is_valid,
                "status": d.status,
                "needs_review": d.needs_review,
                "depends_on": sorted(depends.get(d.pk, [])),
            }
            for d in versions.dependents
        ],
    }
    # Built field by field in LineageOut's order from typed model fields: a hundred full
    # facts need no second validation (LineageOut stays the documented schema).
    return prebuilt_json_response(request, body)


@router.post(
    "/facts/{key}/promote",
    response=FactWriteOut,
    summary="Promote a hypothetical or draft fact to global (a supersession like any other)",
    description="403 `authority_too_low` when the current global fact of the subject ranks above you; 422 for a global fact.",
)
def fact_promote(request: ApiRequest, key: str) -> dict[str, Any]:
    result = services.fact_promote(
        organization=request.organization,
        key=key_lookup(key),
        authority=request.agent.authority,
        author=agent_actor(request.agent),
    )
    return _write_body(result)


@router.post(
    "/facts/{key}/discard",
    response=FactOut,
    summary="Discard a hypothetical or draft fact",
    description="It stays in its lineage with status `discarded`; 422 for other scopes.",
)
def fact_discard(request: ApiRequest, key: str) -> dict[str, Any]:
    fact = services.fact_discard(
        organization=request.organization, key=key_lookup(key), authority=request.agent.authority
    )
    return fact_out(fact)


@router.post(
    "/facts/{key}/review",
    response=FactOut,
    summary="Clear needs_review after checking a fact whose dependency changed",
)
def fact_review(request: ApiRequest, key: str) -> dict[str, Any]:
    return fact_out(
        services.fact_review_clear(organization=request.organization, key=key_lookup(key))
    )


@router.post(
    "/facts/{key}/invalidate",
    response=FactOut,
    summary="Withdraw the current version of a chain without a successor (flags its dependents)",
)
def fact_invalidate(request: ApiRequest, key: str) -> dict[str, Any]:
    fact = services.fact_invalidate(
        organization=request.organization, key=key_lookup(key), authority=request.agent.authority
    )
    return fact_out(fact)


@router.post(
    "/constraints/check",
    response=ConstraintCheckOut,
    tags=["constraints"],
    summary="Is a proposed value allowed by the constraint facts governing its subject?",
)
def constraints_check(request: ApiRequest, payload: ConstraintCheckIn) -> dict[str, Any]:
    check = constraints.constraints_check(
        organization=request.organization,
        subject=payload.subject,
        value=payload.value,
        scope_id=payload.scope_id,
    )
    return {
        "subject": check.subject,
        "value": check.value,
        "allowed": check.allowed,
        "checked": check.checked,
        "violations": check.violations,
    }


class ConflictFilters(Schema):
    status: Literal["proposed", "accepted", "rejected", "distinct", "any"] = "proposed"
    subject: str = Field("", max_length=200)
    source: str = Field("", max_length=120)
    min_age_hours: int | None = Field(None, ge=0, le=24 * 365 * 100)
    max_age_hours: int | None = Field(None, ge=0, le=24 * 365 * 100)
    limit: int = Field(50, ge=1, le=500)
    offset: Offset = 0


@router.get(
    "/fact-conflicts",
    response=ConflictListOut,
    summary="Proposed supersessions between facts of different subjects, newest first",
    description=(
        "A write that seems to say something else about the same entity as a current fact of "
        "another subject (similar vectors and a shared entity word) is only proposed here, "
        "never applied. Filters: status (default proposed; any), subject or source of either "
        "fact, age in hours."
    ),
)
def conflict_list(request: ApiRequest, filters: Query[ConflictFilters]) -> dict[str, Any]:
    now = timezone.now()
    conflicts = lookup.conflict_list(
        organization=request.organization,
        status="" if filters.status == "any" else filters.status,
        subject=filters.subject,
        source=filters.source,
        older_than=now - timedelta(hours=filters.min_age_hours)
        if filters.min_age_hours is not None
        else None,
        newer_than=now - timedelta(hours=filters.max_age_hours)
        if filters.max_age_hours is not None
        else None,
    )
    return queryset_page(conflicts, offset=filters.offset, limit=filters.limit, out=conflict_out)


@router.get("/fact-conflicts/{conflict_id}", response=ConflictOut, summary="One proposal")
def conflict_get(request: ApiRequest, conflict_id: int) -> dict[str, Any]:
    return conflict_out(
        lookup.conflict_get(organization=request.organization, conflict_id=conflict_id)
    )


def _decide(request: ApiRequest, conflict_id: int, decision: str) -> dict[str, Any]:
    conflict = services.conflict_decide(
        organization=request.organization,
        conflict_id=conflict_id,
        decision=decision,
        authority=request.agent.authority,
        actor=agent_actor(request.agent),
    )
    return conflict_out(conflict)


@router.post(
    "/fact-conflicts/{conflict_id}/accept",
    response=ConflictOut,
    summary="Accept a proposal: the proposing fact supersedes the other (rule 2)",
    description=(
        "The proposing fact's chain supersedes the other fact's chain and joins it (rule implicit). "
        "403 authority_too_low when your key, or the proposing fact's writer, ranks below the "
        "other fact's writer; 409 fact_not_current, 409 outdated when the other holds from a later "
        "time, 409 already_decided; 404 for another organization's proposal."
    ),
)
def conflict_accept(request: ApiRequest, conflict_id: int) -> dict[str, Any]:
    return _decide(request, conflict_id, "accept")


@router.post(
    "/fact-conflicts/{conflict_id}/reject",
    response=ConflictOut,
    summary="Reject a proposal: both facts stay, the pair is never proposed again",
)
def conflict_reject(request: ApiRequest, conflict_id: int) -> dict[str, Any]:
    return _decide(request, conflict_id, "reject")


@router.post(
    "/fact-conflicts/{conflict_id}/distinct",
    response=ConflictOut,
    summary="Not the same thing: both facts stay, the pair is never proposed again",
)
def conflict_distinct(request: ApiRequest, conflict_id: int) -> dict[str, Any]:
    return _decide(request, conflict_id, "distinct")


def _session(request: ApiRequest, session_id: str) -> Session:
    return session_get(organization=request.organization, session_id=session_id)


@router.get(
    "/sessions/{session_id}/working-set", response=list[WorkingSetOut], tags=["working set"]
)
def working_set_list(request: ApiRequest, session_id: str) -> list[dict[str, Any]]:
    return [
        working_set_out(i)
        for i in working_set.working_set_list(session=_session(request, session_id))
    ]


@router.put(
    "/sessions/{session_id}/working-set/{key}",
    response=WorkingSetOut,
    tags=["working set"],
    summary="Set a working-set item (optional ttl_seconds; invisible as soon as it expires)",
)
def working_set_put(
    request: ApiRequest, session_id: str, key: str, payload: WorkingSetIn
) -> dict[str, Any]:
    item = services.working_set_put(
        session=_session(request, session_id),
        key=key_lookup(key),
        value=payload.value,
        ttl_seconds=payload.ttl_seconds,
        actor=agent_actor(request.agent),
    )
    return working_set_out(item)


@router.get(
    "/sessions/{session_id}/working-set/{key}", response=WorkingSetOut, tags=["working set"]
)
def working_set_get(request: ApiRequest, session_id: str, key: str) -> dict[str, Any]:
    return working_set_out(
        working_set.working_set_get(session=_session(request, session_id), key=key_lookup(key))
    )


@router.delete(
    "/sessions/{session_id}/working-set/{key}", response={204: None}, tags=["working set"]
)
def working_set_delete(request: ApiRequest, session_id: str, key: str) -> Status:
    services.working_set_delete(
        session=_session(request, session_id), key=key_lookup(key), actor=agent_actor(request.agent)
    )
    return Status(204, None)


def _environment_body(session: Session) -> dict[str, Any]:
    env = session.environment or {}
    now = local_now(env)
    return {
        "timezone": local_zone(env)[0],
        "location": env.get("location"),
        "external_data": env.get("external_data") or {},
        "current_time": now,
        "current_date": now.date().isoformat(),
    }


@router.get(
    "/sessions/{session_id}/environment",
    response=EnvironmentOut,
    tags=["environment"],
    summary="Layer 4, with the current time and date in the session's time zone",
)
def environment_get(request: ApiRequest, session_id: str) -> dict[str, Any]:
    return _environment_body(_session(request, session_id))


@router.put(
    "/sessions/{session_id}/environment",
    response=EnvironmentOut,
    tags=["environment"],
    summary="Update layer 4 (fields left out keep their value); 422 for an unknown time zone",
)
def environment_put(request: ApiRequest, session_id: str, payload: EnvironmentIn) -> dict[str, Any]:
    if payload.timezone is not None and not payload.timezone:
        raise Invalid("timezone may not be empty.", field="timezone")
    session = services.environment_update(
        session=_session(request, session_id),
        timezone_name=payload.timezone,
        location=payload.location,
        external_data=payload.external_data,
        actor=agent_actor(request.agent),
    )
    return _environment_body(session)
