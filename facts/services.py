"""Writes to facts, the working set and the environment: one transaction each.

The rules themselves live in ``facts.supersession``; this module loads and locks the
rows they apply to, asks the rules once, and stores the outcome. Every write returns its
answer read inside its own transaction (facts with the relations their API body reads),
so no caller reads after the commit. Facts belong to an organization, not a session, so
their writes append no session events; working-set and environment writes do, under the
session lock.
"""

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from contextops.audit import audit_person_act
from contextops.embeddings import vector_for_storage, vector_from_bytes
from contextops.errors import AuthorityTooLow, Conflict, Invalid, NotFound
from contextops.models import AuditEntry, Organization
from contextops.text import key_lookup, key_normalize, keyed_text, value_text
from contextops.tokens import count_tokens
from contextops.zones import zone_check
from frames.events import event_append
from frames.locks import session_lock
from frames.models import Session

from . import conflicts
from . import supersession as rules
from .models import Fact, FactConflict, FactDependency, SourceAuthority, WorkingSetItem
from .selectors.lineage import (
    Lineage,
    dependencies_closure,
    dependents_closure,
    fact_lineage,
    with_relations,
)
from .selectors.lookup import conflict_get, conflict_list, fact_get, subject_current_key

MAX_KEY_LENGTH = 200


@dataclass
class FactWriteResult:
    """What a write did: ``outcome`` is created, superseded, proposal, outdated, unchanged
    or promoted. ``fact`` is read before the commit: a fact just written with the rows the
    write itself set (``superseded``, ``contested``), any other with ``with_relations``.
    """

    fact: Fact
    created: bool
    outcome: str
    rule: str = ""
    notice: str = ""
    superseded: Fact | None = None
    flagged: int = 0
    depends_on: list[str] | None = None  # set when the fact was just written
    # Rule 1's keywords found in the user's words that made this an explicit supersession.
    detected: list[str] = field(default_factory=list)
    # An explicit supersession a lower authority asked for: the write is kept as its
    # proposal, and ``fact_write`` raises this once that is committed.
    refusal: AuthorityTooLow | None = None
    # Proposed supersessions this write raised against current facts of other subjects.
    conflicts: list[FactConflict] = field(default_factory=list)


def _invalid(detail: str, field: str) -> Invalid:
    return Invalid(detail, field=field)


def _has_nul(value: Any, depth: int = 0) -> bool:
    if depth > 64:
        return False
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k, depth + 1) or _has_nul(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v, depth + 1) for v in value)
    return False


def _check_level(organization: Organization, level: str, field: str) -> None:
    if level and level not in (organization.authority_ladder or []):
        raise _invalid(
            f"Unknown authority {level!r}; this organization's ladder is {', '.join(organization.authority_ladder)}.",
            field,
        )


# How far ahead of this server's clock an observed_at may be (another host's clock).
OBSERVED_AT_SKEW = timedelta(minutes=5)


def _validate(
    *,
    organization: Organization,
    key: str,
    value: Any,
    memory_type: str,
    scope: str,
    scope_id: str,
    supersedes: str,
    depends_on: list[str],
    is_constraint: bool,
    constraint: Any,
    read_authority: str,
    observed_at: datetime | None,
    valid_from: datetime | None = None,
) -> None:
    if not key or not key.strip():
        raise _invalid("key may not be empty.", "key")
    if len(key) > MAX_KEY_LENGTH:
        raise _invalid(f"key may be at most {MAX_KEY_LENGTH} characters.", "key")
    if "/" in key or key != key.strip() or any(ch.isspace() and ch != " " for ch in key):
        raise _invalid(
            "key may not contain '/', line breaks or tabs, nor start or end with spaces.", "key"
        )
    if value is None:
        raise _invalid("value is required (any JSON except null).", "value")
    if _has_nul(value) or _has_nul(constraint) or _has_nul(key) or _has_nul(scope_id):
        raise _invalid("Text may not contain NUL characters.", "value")
    if scope not in Fact.Scope.values:
        raise _invalid(f"scope must be one of {', '.join(Fact.Scope.values)}.", "scope")
    if memory_type and memory_type not in Fact.MemoryType.values:
        raise _invalid(
            f"memory_type must be one of {', '.join(Fact.MemoryType.values)}.", "memory_type"
        )
    if scope == Fact.Scope.GLOBAL and scope_id:
        raise _invalid("A global fact has no scope_id.", "scope_id")
    if scope != Fact.Scope.GLOBAL and not scope_id:
        raise _invalid(
            f"A {scope} fact needs a scope_id (the task or session it belongs to).", "scope_id"
        )
    if supersedes and scope in Fact.PRIVATE_SCOPES:
        raise _invalid(
            "Hypothetical and draft facts never supersede; promote the fact to global instead.",
            "supersedes",
        )
    if supersedes == key:
        raise _invalid("A fact cannot supersede itself.", "supersedes")
    if key in depends_on:
        raise _invalid(
            "depends_on would make a cycle: a fact cannot depend on itself.", "depends_on"
        )
    if constraint is not None:
        errors = rules.constraint_errors(constraint)
        if errors:
            raise _invalid(" ".join(errors), "constraint")
    _check_level(organization, read_authority, "read_authority")
    if observed_at is not None and timezone.is_naive(observed_at):
        raise _invalid("observed_at needs a time zone (e.g. 2026-01-15T00:00:00Z).", "observed_at")
    if observed_at is not None and observed_at > timezone.now() + OBSERVED_AT_SKEW:
        # A later observation wins its subject (the temporal rule): one from the future
        # would win every correction written until then.
        raise _invalid(
            "observed_at is in the future: an observation cannot be later than now.",
            "observed_at",
        )
    if valid_from is not None and timezone.is_naive(valid_from):
        raise _invalid("valid_from needs a time zone (e.g. 2026-03-01T00:00:00Z).", "valid_from")
    if valid_from is not None and valid_from > timezone.now() + OBSERVED_AT_SKEW:
        raise _invalid(
            "valid_from is in the future: write the fact when it starts to hold.", "valid_from"
        )


def fact_authority(*, organization: Organization, writer_level: str, source: str) -> str:
    """The level a fact is written with: the writer's own, lowered to the level the
    organization gives ``source`` when that is lower. Citing a source never raises it."""
    mapped = (
        SourceAuthority.objects.filter(
            organization=organization, source__iexact=(source or "").strip()
        )
        .values_list("level", flat=True)
        .first()
        if source
        else None
    )
    if mapped and organization.authority_rank(mapped) > organization.authority_rank(writer_level):
        return mapped
    return writer_level


def _stated_time(fact: Fact) -> datetime | None:
    """The time the writer gave for ``fact`` (``valid_from`` or ``observed_at``): the
    temporal rule compares these; None when it holds from its write time."""
    if fact.observed_at is not None or fact.valid_from != fact.created_at:
        return fact.valid_from
    return None


def _version(fact: Fact, organization: Organization) -> rules.Version:
    return rules.Version(
        key=fact.key,
        value=fact.value,
        authority_rank=organization.authority_rank(fact.authority),
        observed_at=_stated_time(fact),
        is_constraint=fact.is_constraint,
        constraint=fact.constraint,
        chain=fact.chain,
        valid_from=fact.valid_from,
    )


def _refusal(*, proposal: Fact, target: Fact, authority: str) -> AuthorityTooLow:
    return AuthorityTooLow(
        f"Your authority ({authority}) ranks below {target.authority}, which wrote {target.key}; "
        f"a lower authority never supersedes a higher one. Your write is kept as the proposal "
        f"{proposal.key}; {target.key} stays current.",
        fact_key=target.key,
        fact_authority=target.authority,
        proposal=proposal.key,
    )


def _already_superseded(target: Fact) -> Conflict:
    successor = Fact.objects.filter(supersedes_id=target.pk).values_list("key", flat=True).first()
    return Conflict(
        "already_superseded",
        f"{target.key} has already been superseded" + (f" by {successor}." if successor else "."),
        superseded_by=successor,
    )


def _not_current(target: Fact) -> Conflict:
    if target.status == Fact.Status.SUPERSEDED:
        return _already_superseded(target)
    return Conflict(
        "fact_not_current",
        f"{target.key} is {target.status}; only the current fact of a chain can be superseded.",
        status=target.status,
    )


def _flag_dependents(fact_ids: list[int]) -> int:
    ids = dependents_closure(fact_ids)
    if not ids:
        return 0
    return Fact.objects.filter(pk__in=ids, needs_review=False).update(
        needs_review=True, updated_at=timezone.now()
    )


def _current_of_subject(
    organization: Organization, subject: str, scope: str, scope_id: str
) -> list[Fact]:
    """The valid facts of a subject in a scope, locked, newest first.

    A row that another transaction superseded while we waited for its lock drops out of
    a locking read, so the result is checked against a plain read and taken again if
    the head moved meanwhile.
    """
    query = Fact.objects.filter(
        organization=organization, subject=subject, scope=scope, scope_id=scope_id, is_valid=True
    ).order_by("-created_at", "-id")
    for _ in range(5):
        locked = list(query.select_for_update(no_key=True))
        if [f.pk for f in locked] == list(query.values_list("pk", flat=True)):
            return locked
    raise Conflict("write_contention", f"The facts of {subject!r} keep changing; retry the write.")


def _supersede(target: Fact, now: datetime, until: datetime) -> None:
    """``target`` stops being current; its valid interval ends at ``until``, where the
    version superseding it starts to hold."""
    updated = Fact.objects.filter(pk=target.pk, is_valid=True).update(
        is_valid=False, status=Fact.Status.SUPERSEDED, updated_at=now, valid_until=until
    )
    if not updated:
        raise _already_superseded(target)


def _subject_lock(*, organization: Organization, subject: str, scope: str, scope_id: str) -> None:
    """Serialize writes on one subject in one scope until the transaction ends.

    Row locks cannot cover the first fact of a subject (there is no row yet), so two
    first writes would both become current; a transaction-scoped advisory lock on the
    subject closes that gap on PostgreSQL. SQLite already runs one write at a time.
    """
    if connection.vendor != "postgresql":
        return
    digest = hashlib.blake2b(
        f"{organization.pk}\x1f{subject}\x1f{scope}\x1f{scope_id}".encode(), digest_size=8
    ).digest()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest, "big", signed=True)]
        )


def fact_write(
    *,
    organization: Organization,
    key: str,
    value: Any,
    source: str = "",
    authority: str,
    author: str = "",
    subject: str = "",
    observed_at: datetime | None = None,
    valid_from: datetime | None = None,
    memory_type: str = "",
    scope: str = Fact.Scope.GLOBAL,
    scope_id: str = "",
    supersedes: str = "",
    depends_on: list[str] | tuple[str, ...] = (),
    is_constraint: bool = False,
    constraint_type: str = "",
    constraint: dict | None = None,
    read_authority: str = "",
    read_permission: str = "",
    utterance: str = "",
    rule: str = "",
) -> FactWriteResult:
    """Write one fact version and apply the supersession rules (docs/concepts.md#supersession).

    ``utterance``, the user's own words the fact came from, turns on rule 1's detector:
    when it holds one of the rule's keywords ("moved", "actually", "correction", …) and
    no ``supersedes`` is given, the write explicitly supersedes the subject's current
    fact in its scope (rule ``explicit``; the keywords come back as ``detected``).
    ``read_permission`` names a permission a session's identity must hold for a context
    to include the fact.

    Same key and same value again: the stored fact, unchanged (``created`` False).
    Same key, other value: 409 ``key_exists``. Explicit ``supersedes``: 404 when the key
    is not in this organization, 409 ``already_superseded`` (naming the winner) when
    another write got there first, and 403 ``authority_too_low`` when the writer ranks
    below it: this commits the proposal, then raises AuthorityTooLow (the write is kept
    as the writer's proposal, never current; its key is the error's ``proposal``), so a
    caller's own enclosing transaction would roll the proposal back with it and an API
    handler must not wrap this call. Without ``supersedes`` the current fact of the
    subject in the same scope is superseded (rule implicit, authority or temporal), or
    the write is kept as a proposal / as outdated and stays out of every context. A write
    under a new key stating what the subject's current fact states is the current fact,
    unchanged (``created`` False, nothing stored), unless it carries a higher authority
    or a later observation; dependents are only flagged when the superseding version
    states something else.

    Long because its docstring states every outcome of a write; the body only prepares
    the arguments, opens the transaction for _fact_write and says who won a race the
    locks could not see.
    """
    if isinstance(key, str) and key:
        key = key_normalize(key)  # 422 for look-alikes; NFKC so one key is stored one way
    supersedes = key_lookup(supersedes) if isinstance(supersedes, str) else supersedes
    depends_on = [key_lookup(str(k)) for k in (depends_on or [])]
    scope_id = scope_id or ""
    if constraint is not None:
        is_constraint = True
    _validate(
        organization=organization,
        key=key,
        value=value,
        memory_type=memory_type,
        scope=scope,
        scope_id=scope_id,
        supersedes=supersedes,
        depends_on=depends_on,
        is_constraint=is_constraint,
        constraint=constraint,
        read_authority=read_authority,
        observed_at=observed_at,
        valid_from=valid_from,
    )
    subject = (subject or "").strip() or rules.subject_for_key(key)
    detected = rules.explicit_keywords(utterance) if utterance and not supersedes else []
    if detected:
        supersedes = (
            subject_current_key(
                organization=organization, subject=subject, scope=scope, scope_id=scope_id
            )
            or ""
        )
        if not supersedes or supersedes == key:
            supersedes, detected = "", []  # nothing to replace: an ordinary write
    authority = fact_authority(organization=organization, writer_level=authority, source=source)
    if is_constraint and constraint is None:
        constraint = rules.constraint_from_text(value)
    # Embedded once, before the locks are taken: a slow provider never holds a subject.
    embedding = vector_for_storage(keyed_text(key, value))
    try:
        with transaction.atomic():
            _subject_lock(
                organization=organization, subject=subject, scope=scope, scope_id=scope_id
            )
            result = _fact_write(
                organization=organization,
                key=key,
                value=value,
                source=source,
                authority=authority,
                author=author,
                subject=subject,
                observed_at=observed_at,
                stated_from=valid_from or observed_at,
                memory_type=memory_type or rules.memory_type_for_source(source),
                scope=scope,
                scope_id=scope_id,
                supersedes=supersedes,
                depends_on=depends_on,
                is_constraint=is_constraint,
                constraint_type=constraint_type,
                constraint=constraint,
                read_authority=read_authority,
                read_permission=read_permission,
                rule=rule,
                embedding=embedding,
            )
            if detected:
                result.detected = detected
                result.notice = f"{result.notice} Detected: {', '.join(detected)}.".strip()
    except IntegrityError as exc:
        # A concurrent write won a race the locks could not see (the constraints on
        # supersedes, chain versions and keys are the last line): say who won.
        existing = with_relations(Fact.objects.filter(organization=organization, key=key)).first()
        if existing is not None:
            if existing.value == value:
                return FactWriteResult(fact=existing, created=False, outcome="unchanged")
            raise Conflict("key_exists", f"A fact with key {key} already exists.", key=key) from exc
        if supersedes:
            target = Fact.objects.filter(organization=organization, key=supersedes).first()
            if target is not None:
                raise _already_superseded(target) from exc
        raise Conflict("write_conflict", "A concurrent write changed this chain; retry.") from exc
    if result.refusal is not None:
        raise result.refusal
    return result


def _fact_write(
    *,
    organization: Organization,
    key: str,
    value: Any,
    subject: str,
    depends_on: list[str],
    supersedes: str,
    rule: str,
    stated_from: datetime | None,
    **fields: Any,
) -> FactWriteResult:
    """``fact_write`` inside its transaction: load what the rules need, ask
    ``rules.decide_write`` once, then write what the decision says.

    Long because it reads straight through in the three steps the rules ask for (load,
    decide once with rules.decide_write, write what the decision says), each marked by a
    comment; the loads it calls are already their own functions.
    """
    # Most writes are of a new key: a bare existence check, and the stored version with
    # its relations read only for a key written before (compiling that read cost more CPU
    # than the rest of a write).
    stored = Fact.objects.filter(organization=organization, key=key)
    if stored.exists():
        existing = with_relations(stored).get()
        return _fact_rewritten(existing, value=value, supersedes=supersedes)

    # Load: the facts it depends on, the fact it names or its subject's current facts
    # (hypothetical and draft writes never supersede, so they need neither), and the
    # chains its dependencies reach when there is a chain it could supersede.
    dependencies = _dependencies_load(organization, depends_on)
    scope, scope_id = fields["scope"], fields["scope_id"]
    named = _named_load(organization, supersedes, scope, scope_id) if supersedes else None
    current = (
        _current_of_subject(organization, subject, scope, scope_id)
        if not supersedes and scope not in Fact.PRIVATE_SCOPES
        else []
    )
    candidates = {f.key: f for f in ([named] if named else current)}
    upstream_chains = (
        _chains_of(dependencies_closure([d.pk for d in dependencies]))
        if dependencies and candidates
        else set()
    )

    now = timezone.now()
    # A write that states no time holds from now, or from when the version it would
    # replace starts if that is later (an observation from a clock slightly ahead).
    starts = stated_from or max([now, *(f.valid_from for f in candidates.values())])
    if named is not None and starts < named.valid_from:
        raise _invalid(
            f"{named.key} holds from {named.valid_from.isoformat()}; a version superseding it "
            "cannot start to hold before that.",
            "valid_from",
        )
    decision = rules.decide_write(
        new=rules.Version(
            key=key,
            value=value,
            authority_rank=organization.authority_rank(fields["authority"]),
            observed_at=stated_from,
            is_constraint=fields["is_constraint"],
            constraint=fields["constraint"],
            valid_from=starts,
        ),
        named=_version(named, organization) if named else None,
        current=[_version(f, organization) for f in current],
        upstream_chains=upstream_chains,
    )
    target = candidates[decision.against.key] if decision.against else None

    # Write what the decision says.
    if decision.outcome == rules.UNCHANGED:
        assert target is not None
        return FactWriteResult(
            fact=fact_get(organization=organization, key=target.key),
            created=False,
            outcome="unchanged",
            notice=decision.reason,
        )
    if decision.outcome == rules.CYCLE:
        raise _invalid(decision.reason, "depends_on")
    text = value_text(value)
    row = {
        "organization": organization,
        "key": key,
        "value": value,
        "subject": subject,
        "search_text": f"{key} {subject} {text}".lower(),
        "tokens": count_tokens(keyed_text(key, value)),
        "created_at": now,
        "updated_at": now,
        "valid_from": starts,
        **fields,
    }
    flagged = 0
    if decision.outcome == rules.SUPERSEDE:
        assert target is not None
        _supersede(target, now, until=starts)
        fact = Fact.objects.create(
            **row,
            chain=target.chain,
            version=target.version + 1,
            supersedes=target,
            supersession_rule=rule or decision.rule,
        )
        if decision.flag_dependents:
            flagged = _flag_dependents([target.pk])
        outcome, notice = "superseded", f"Supersedes {target.key} (rule: {rule or decision.rule})."
        if starts < now:
            notice += f" {target.key} held until {starts.isoformat()}."
    elif decision.outcome in (rules.PROPOSAL, rules.OUTDATED, rules.FORBIDDEN):
        status = (
            Fact.Status.OUTDATED if decision.outcome == rules.OUTDATED else Fact.Status.PROPOSAL
        )
        # It never held: its interval is closed where it would have started.
        fact = Fact.objects.create(
            **row, is_valid=False, status=status, contested=target, valid_until=starts
        )
        outcome = rules.OUTDATED if decision.outcome == rules.OUTDATED else rules.PROPOSAL
        notice = decision.reason
    else:
        fact = Fact.objects.create(**row)
        outcome, notice = "created", ""
    if dependencies:
        FactDependency.objects.bulk_create(
            [FactDependency(fact=fact, depends_on=d) for d in dependencies]
        )
    raised = _conflicts_propose(fact) if fact.is_valid else []
    return FactWriteResult(
        conflicts=raised,
        fact=fact,
        created=True,
        outcome=outcome,
        rule=fact.supersession_rule or (decision.rule if outcome != "created" else ""),
        notice=notice,
        superseded=target if outcome == "superseded" else None,
        flagged=flagged,
        depends_on=[d.key for d in dependencies],
        refusal=_refusal(proposal=fact, target=target, authority=fields["authority"])
        if decision.outcome == rules.FORBIDDEN and target is not None
        else None,
    )


def _fact_rewritten(existing: Fact, *, value: Any, supersedes: str) -> FactWriteResult:
    """A write under a key that is taken: the same value again is the stored fact,
    unchanged (the same refused supersession again: the same refusal); another value is
    409 ``key_exists``."""
    if existing.value != value:
        raise Conflict(
            "key_exists",
            f"A fact with key {existing.key} already exists with another value; write a new key that supersedes it.",
            key=existing.key,
        )
    contested = existing.contested
    refusal = None
    if (
        supersedes
        and existing.status == Fact.Status.PROPOSAL
        and contested is not None
        and contested.key == supersedes
    ):
        refusal = _refusal(proposal=existing, target=contested, authority=existing.authority)
    return FactWriteResult(fact=existing, created=False, outcome="unchanged", refusal=refusal)


def _dependencies_load(organization: Organization, keys: list[str]) -> list[Fact]:
    """The facts ``keys`` name; 422 naming those that do not exist."""
    dependencies = list(Fact.objects.filter(organization=organization, key__in=keys))
    missing = sorted(set(keys) - {d.key for d in dependencies})
    if missing:
        raise _invalid(
            f"depends_on names facts that do not exist: {', '.join(missing)}.", "depends_on"
        )
    return dependencies


def _locked(organization: Organization, key: str, *, purpose: str = "") -> Fact:
    """The organization's fact ``key``, locked for a change; 404 when there is none."""
    fact = (
        Fact.objects.select_for_update(no_key=True)
        .filter(organization=organization, key=key)
        .first()
    )
    if fact is None:
        raise NotFound(f"No fact {key} in this organization{purpose}.")
    return fact


def _named_load(organization: Organization, key: str, scope: str, scope_id: str) -> Fact:
    """The fact a write explicitly supersedes, locked: 404 when there is none, 422 when it
    is hypothetical or draft or lives in another scope, 409 when it is no longer current."""
    target = _locked(organization, key, purpose=" to supersede")
    if target.is_private_scope:
        raise _invalid(
            f"{key} is {target.scope}: promote or discard it instead of superseding it.",
            "supersedes",
        )
    if (target.scope, target.scope_id) != (scope, scope_id):
        raise _invalid(
            f"{key} lives in scope {target.scope}{':' + target.scope_id if target.scope_id else ''}; "
            "a fact only supersedes within its own scope.",
            "supersedes",
        )
    if not target.is_valid:
        raise _not_current(target)
    return target


def _chains_of(fact_ids: list[int]) -> set[Any]:
    return set(Fact.objects.filter(pk__in=fact_ids).values_list("chain", flat=True).distinct())


def fact_promote(
    *, organization: Organization, key: str, authority: str, author: str = ""
) -> FactWriteResult:
    """Make a hypothetical or draft fact global: a supersession like any other.

    It supersedes the current global fact of its subject (rule ``promotion``); 403
    ``authority_too_low`` when the promoter ranks below that fact, 409 when a later
    observation is current or the fact is no longer valid, 422 for a global fact. The
    result's ``fact`` is the promoted fact with its relations, read before the commit.
    """
    try:
        with transaction.atomic():
            fact = _locked(organization, key)
            if not fact.is_private_scope:
                raise Invalid(
                    f"{key} is already {fact.scope}; only hypothetical or draft facts are promoted."
                )
            if not fact.is_valid:
                raise _not_current(fact)
            new = rules.Version(
                key=fact.key,
                value=fact.value,
                authority_rank=organization.authority_rank(authority),
                observed_at=fact.observed_at,
                is_constraint=fact.is_constraint,
                constraint=fact.constraint,
            )
            current = _current_of_subject(organization, fact.subject, Fact.Scope.GLOBAL, "")
            by_key = {f.key: f for f in current}
            head, guard = rules.head_and_guard(
                new=new, current=[_version(f, organization) for f in current]
            )
            decision = rules.decide_implicit(
                new=new, current=head, guard=guard, allow_unchanged=False
            )
            if decision.outcome == rules.PROPOSAL:
                raise AuthorityTooLow(
                    decision.reason, fact_key=decision.against.key if decision.against else None
                )
            if decision.outcome == rules.OUTDATED:
                raise Conflict(
                    "outdated",
                    decision.reason,
                    current=decision.against.key if decision.against else None,
                )
            now = timezone.now()
            fact.scope, fact.scope_id, fact.authority, fact.updated_at = (
                Fact.Scope.GLOBAL,
                "",
                authority,
                now,
            )
            if author:
                fact.author = author
            fact.supersession_rule = Fact.Rule.PROMOTION
            flagged = 0
            target = by_key[head.key] if head and decision.outcome == rules.SUPERSEDE else None
            if target is not None:
                # It holds from its promotion, never before the version it replaces.
                fact.valid_from = max(now, target.valid_from)
                _supersede(target, now, until=fact.valid_from)
                fact.chain, fact.version, fact.supersedes = target.chain, target.version + 1, target
                if not rules.same_statement(new, _version(target, organization)):
                    flagged = _flag_dependents([target.pk])
            fact.save()
            promoted = fact_get(organization=organization, key=fact.key)
    except IntegrityError as exc:
        raise Conflict(
            "write_conflict", "A concurrent write changed this chain; retry the promotion."
        ) from exc
    return FactWriteResult(
        fact=promoted,
        created=False,
        outcome="superseded" if target else "promoted",
        rule=Fact.Rule.PROMOTION,
        notice=f"Promoted to global{f'; supersedes {target.key}' if target else ''}.",
        superseded=target,
        flagged=flagged,
    )


def _withdraw(
    *, organization: Organization, key: str, status: str, private_only: bool, authority: str
) -> Fact:
    with transaction.atomic():
        fact = _locked(organization, key)
        if organization.authority_rank(authority) > organization.authority_rank(fact.authority):
            raise AuthorityTooLow(
                f"{key} was written with {fact.authority} authority; yours ({authority}) is lower.",
                fact_key=key,
                fact_authority=fact.authority,
            )
        if private_only and not fact.is_private_scope:
            raise Invalid(f"{key} is {fact.scope}; only hypothetical or draft facts are discarded.")
        if not fact.is_valid:
            raise _not_current(fact)
        now = timezone.now()
        fact.is_valid, fact.status, fact.updated_at = False, status, now
        fact.valid_until = max(now, fact.valid_from)
        fact.save(update_fields=["is_valid", "status", "updated_at", "valid_until"])
        _flag_dependents([fact.pk])
        return fact_get(organization=organization, key=key)


def fact_discard(*, organization: Organization, key: str, authority: str) -> Fact:
    """Throw a hypothetical or draft fact away (it stays visible in its lineage).

    Returns the fact with its relations, read before the commit."""
    return _withdraw(
        organization=organization,
        key=key,
        status=Fact.Status.DISCARDED,
        private_only=True,
        authority=authority,
    )


def fact_invalidate(*, organization: Organization, key: str, authority: str) -> Fact:
    """Withdraw the current fact of a chain without a successor: what deleting means here.

    Its dependents are flagged for review; 403 when ``authority`` ranks below the writer's.
    Returns the fact with its relations, read before the commit.
    """
    return _withdraw(
        organization=organization,
        key=key,
        status=Fact.Status.INVALIDATED,
        private_only=False,
        authority=authority,
    )


def _review_clear(organization: Organization, key: str, user: User | None) -> None:
    """Clear the flag; a person's clearing (``user``, the dashboard's "Mark reviewed") is
    audited, a fact that needed no review is left as it was and not."""
    fact = _locked(organization, key)
    if fact.needs_review:
        fact.needs_review, fact.updated_at = False, timezone.now()
        fact.save(update_fields=["needs_review", "updated_at"])
        audit_person_act(
            user,
            action=AuditEntry.Action.FACT_REVIEWED,
            organization_id=organization.pk,
            target=f"fact {fact.key}",
            detail={"subject": fact.subject[:200], "version": fact.version},
        )


def fact_review_clear(*, organization: Organization, key: str, user: User | None = None) -> Fact:
    """A reviewer checked the fact after a dependency changed: clear ``needs_review``.

    Returns the fact with its relations, read before the commit."""
    with transaction.atomic():
        _review_clear(organization, key, user)
        return fact_get(organization=organization, key=key)


def fact_review_clear_in_lineage(
    *, organization: Organization, key: str, lineage_key: str, user: User | None = None
) -> Lineage:
    """``fact_review_clear`` from the lineage page of ``lineage_key``: returns that
    lineage as the commit leaves it, read before the commit. NotFound for either key,
    and then nothing is cleared."""
    with transaction.atomic():
        _review_clear(organization, key, user)
        return fact_lineage(organization=organization, key=lineage_key)


def next_version_key(organization: Organization, fact: Fact) -> str:
    """A free key for the next version of ``fact``: ``<base>_v<n>``."""
    base = rules.subject_for_key(fact.key)
    version = fact.version + 1
    while True:
        candidate = f"{base}_v{version}"[:MAX_KEY_LENGTH]
        if not Fact.objects.filter(organization=organization, key=candidate).exists():
            return candidate
        version += 1


def fact_admin_edit(*, fact: Fact, author: str, authority: str, **changes: Any) -> FactWriteResult:
    """An admin's edit: a new version superseding ``fact`` (rule ``admin_edit``), never in place."""
    organization = fact.organization
    fields: dict[str, Any] = {
        "value": fact.value,
        "source": fact.source,
        "subject": fact.subject,
        "observed_at": fact.observed_at,
        "memory_type": fact.memory_type,
        "is_constraint": fact.is_constraint,
        "constraint_type": fact.constraint_type,
        "constraint": fact.constraint,
        "read_authority": fact.read_authority,
        "read_permission": fact.read_permission,
        "depends_on": list(fact.depends_on.values_list("key", flat=True)),
    }
    fields.update(changes)
    return fact_write(
        organization=organization,
        key=next_version_key(organization, fact),
        authority=authority,
        author=author,
        scope=fact.scope,
        scope_id=fact.scope_id,
        supersedes=fact.key,
        rule=Fact.Rule.ADMIN_EDIT,
        **fields,
    )


# Working set (layer 3) and environment (layer 4) --------------------------------------------


def working_set_put(
    *,
    session: Session,
    key: str,
    value: Any,
    ttl_seconds: int | None = None,
    actor: str = "",
) -> WorkingSetItem:
    """Set ``key`` in the session's working set, replacing any earlier value and TTL.

    409 ``session_ended`` once the session has ended."""
    key = key_normalize(key) if isinstance(key, str) else key
    if not key or len(key) > MAX_KEY_LENGTH:
        raise Invalid(f"key must be 1 to {MAX_KEY_LENGTH} characters.", field="key")
    if ttl_seconds is not None and ttl_seconds <= 0:
        raise Invalid("ttl_seconds must be positive.", field="ttl_seconds")
    now = timezone.now()
    expires_at = now + timedelta(seconds=ttl_seconds) if ttl_seconds else None
    text = keyed_text(key, value)
    tokens = count_tokens(text)
    embedding = vector_for_storage(text)
    with transaction.atomic():
        session = session_lock(session)
        item, _ = WorkingSetItem.objects.update_or_create(
            session=session,
            key=key,
            defaults={
                "value": value,
                "tokens": tokens,
                "embedding": embedding,
                "expires_at": expires_at,
                "updated_at": now,
            },
            create_defaults={
                "value": value,
                "tokens": tokens,
                "embedding": embedding,
                "expires_at": expires_at,
                "created_at": now,
                "updated_at": now,
            },
        )
        event_append(
            session=session,
            type="working_set.put",
            actor=actor,
            payload={
                "key": key,
                "tokens": tokens,
                "expires_at": expires_at.isoformat() if expires_at else None,
            },
        )
    return item


def working_set_delete(*, session: Session, key: str, actor: str = "") -> None:
    """Remove ``key``; 404 when it is not there or has already expired, 409
    ``session_ended`` once the session has ended."""
    with transaction.atomic():
        session = session_lock(session)
        item = WorkingSetItem.objects.filter(session=session, key=key).first()
        if item is None or item.is_expired():
            if item is not None:
                item.delete()
            raise NotFound(f"No working-set item {key} in this session.")
        item.delete()
        event_append(session=session, type="working_set.deleted", actor=actor, payload={"key": key})


def working_set_clear(*, session: Session) -> int:
    """Drop the whole working set of a session that ends (layer 3 lives as long as its
    session); inside the caller's transaction, the session locked. Returns how many went."""
    deleted, _ = WorkingSetItem.objects.filter(session=session).delete()
    return deleted


def working_set_expire(*, now: datetime | None = None) -> int:
    """Delete every expired working-set item; returns how many went."""
    deleted, _ = WorkingSetItem.objects.filter(expires_at__lte=now or timezone.now()).delete()
    return deleted


def environment_update(
    *,
    session: Session,
    timezone_name: str | None = None,
    location: str | None = None,
    external_data: dict | None = None,
    actor: str = "",
) -> Session:
    """Update layer 4; fields left out keep their value. 422 for an unknown time zone, 409
    ``session_ended`` once the session has ended. Returns the session as committed."""
    if timezone_name is not None:
        zone_check(timezone_name, field="timezone")
    if external_data is not None and not isinstance(external_data, dict):
        raise Invalid("external_data must be an object.", field="external_data")
    with transaction.atomic():
        session = session_lock(session)
        environment = dict(session.environment or {})
        changed: dict[str, Any] = {}
        if timezone_name is not None:
            changed["timezone"] = timezone_name
        if location is not None:
            changed["location"] = location
        if external_data is not None:
            changed["external_data"] = external_data
        environment.update(changed)
        session.environment = environment
        session.updated_at = timezone.now()
        session.save(update_fields=["environment", "updated_at"])
        event_append(
            session=session,
            type="environment.updated",
            actor=actor,
            payload={"changed": sorted(changed)},
        )
    return session


# Proposed supersessions (facts.conflicts) -----------------------------------------------

CONFLICT_CANDIDATES = 200  # current facts sharing an entity word that a write compares with


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    return (a, b) if str(a) <= str(b) else (b, a)


def _conflicts_propose(fact: Fact) -> list[FactConflict]:
    """Inside the write's transaction: record a proposed supersession for every current
    fact of the organization in ``fact``'s scope (another subject, another chain, the same
    kind) that ``conflicts.conflict_evidence`` finds to say something else about the same
    entity, unless that pair of chains was proposed before (whatever was decided then).
    Nothing is superseded here."""
    if fact.embedding is None or fact.is_private_scope:
        return []
    words = conflicts.entity_words(fact.key, fact.subject)
    searched = conflicts.search_words(words)
    if not searched:
        return []
    lexical = Q()
    for word in searched:
        lexical |= Q(search_text__contains=word)
    candidates = list(
        Fact.objects.filter(
            lexical,
            organization_id=fact.organization_id,
            scope=fact.scope,
            scope_id=fact.scope_id,
            is_valid=True,
            is_constraint=fact.is_constraint,
            embedding__isnull=False,
        )
        .exclude(subject=fact.subject)
        .exclude(chain=fact.chain)
        .only("id", "key", "subject", "value", "source", "chain", "embedding")
        .order_by("-created_at", "-id")[:CONFLICT_CANDIDATES]
    )
    if not candidates:
        return []
    known = {
        (str(low), str(high))
        for low, high in FactConflict.objects.filter(
            organization_id=fact.organization_id,
            chain_low__in=[_pair(fact.chain, c.chain)[0] for c in candidates],
        ).values_list("chain_low", "chain_high")
    }
    new = conflicts.Candidate(fact.key, fact.subject, fact.value, vector_from_bytes(fact.embedding))
    raised = []
    for other in candidates:
        low, high = _pair(fact.chain, other.chain)
        if (str(low), str(high)) in known:
            continue
        evidence = conflicts.conflict_evidence(
            new,
            conflicts.Candidate(
                other.key, other.subject, other.value, vector_from_bytes(other.embedding)
            ),
        )
        if evidence is None:
            continue
        known.add((str(low), str(high)))
        raised.append(
            FactConflict(
                organization_id=fact.organization_id,
                fact=fact,
                other=other,
                chain_low=low,
                chain_high=high,
                similarity=evidence.similarity,
                matched_words=evidence.words,
            )
        )
    return FactConflict.objects.bulk_create(raised) if raised else []


CONFLICT_DECISIONS = {
    "accept": FactConflict.Status.ACCEPTED,
    "reject": FactConflict.Status.REJECTED,
    "distinct": FactConflict.Status.DISTINCT,
}


def _head(organization: Organization, chain: Any) -> Fact | None:
    return (
        Fact.objects.select_for_update(no_key=True)
        .filter(organization=organization, chain=chain, is_valid=True)
        .first()
    )


def _conflict_accept(conflict: FactConflict, authority: str) -> Fact:
    """Rule 2 applied to the pair: the current version of the proposing fact's chain
    supersedes the current version of the other chain, which it joins (its versions
    numbered after the other's). 409 when either chain has no current version any more or
    the proposing chain started to hold before the other did; 403 when the decider, or
    the proposing fact's writer, ranks below the other fact's writer."""
    organization = conflict.organization
    proposing, other = (
        _head(organization, conflict.fact.chain),
        _head(organization, conflict.other.chain),
    )
    if proposing is None or other is None:
        raise Conflict(
            "fact_not_current",
            "One of the two facts is no longer current; reject the proposal instead.",
        )
    if organization.authority_rank(authority) > organization.authority_rank(other.authority):
        raise AuthorityTooLow(
            f"Your authority ({authority}) ranks below {other.authority}, which wrote "
            f"{other.key}; a lower authority never supersedes a higher one.",
            fact_key=other.key,
            fact_authority=other.authority,
        )
    first = (
        Fact.objects.filter(chain=proposing.chain).order_by("version").only("id", "valid_from")
    ).first()
    assert first is not None
    decision = rules.decide_implicit(
        new=_version(proposing, organization),
        current=_version(other, organization),
        allow_unchanged=False,
    )
    if decision.outcome == rules.PROPOSAL:
        raise AuthorityTooLow(
            f"{proposing.key} was written with {proposing.authority} authority, below "
            f"{other.authority} which wrote {other.key}: a proposal never lets a lower "
            "authority supersede a higher one.",
            fact_key=other.key,
            fact_authority=other.authority,
        )
    if decision.outcome == rules.OUTDATED or first.valid_from < other.valid_from:
        raise Conflict(
            "outdated",
            f"{other.key} holds from a later time ({other.valid_from.isoformat()}) than "
            f"{proposing.key}'s chain; it stays current.",
            current=other.key,
        )
    now = timezone.now()
    _supersede(other, now, until=first.valid_from)
    Fact.objects.filter(chain=proposing.chain).update(
        chain=other.chain, version=F("version") + other.version, updated_at=now
    )
    Fact.objects.filter(pk=first.pk).update(supersedes=other, supersession_rule=Fact.Rule.IMPLICIT)
    if not rules.same_statement(_version(proposing, organization), _version(other, organization)):
        _flag_dependents([other.pk])
    return proposing


def conflict_decide(
    *,
    organization: Organization,
    conflict_id: int,
    decision: str,
    authority: str,
    actor: str,
    user: User | None = None,
) -> FactConflict:
    """Settle a proposed supersession: ``accept`` (rule 2, ``_conflict_accept``),
    ``reject`` or ``distinct`` ("not the same thing"); either way the pair is never
    proposed again. Records who decided and when; a person's decision is audited. 404 for
    another organization's proposal, 409 ``already_decided``, 422 for an unknown decision.
    Returns the proposal as committed, with its two facts."""
    if decision not in CONFLICT_DECISIONS:
        raise Invalid(f"decision must be one of {', '.join(CONFLICT_DECISIONS)}.", field="decision")
    try:
        with transaction.atomic():
            conflict = (
                FactConflict.objects.select_for_update()
                .filter(organization=organization, pk=conflict_id)
                .first()
            )
            if conflict is None:
                raise NotFound(f"No proposed supersession {conflict_id}.")
            if conflict.status != FactConflict.Status.PROPOSED:
                raise Conflict(
                    "already_decided",
                    f"This proposal was already decided: {conflict.status}.",
                    status=conflict.status,
                )
            if decision == "accept":
                _conflict_accept(conflict, authority)
            conflict.status = CONFLICT_DECISIONS[decision]
            conflict.decided_by = user
            conflict.decided_actor = actor[:200]
            conflict.decided_at = timezone.now()
            conflict.save(update_fields=["status", "decided_by", "decided_actor", "decided_at"])
            audit_person_act(
                user,
                action=AuditEntry.Action.FACT_REVIEWED,
                organization_id=organization.pk,
                target=f"fact conflict {conflict.pk}",
                detail={
                    "decision": conflict.status,
                    "fact": conflict.fact.key,
                    "other": conflict.other.key,
                },
            )
            return conflict_get(organization=organization, conflict_id=conflict.pk)
    except IntegrityError as exc:
        raise Conflict(
            "write_conflict", "A concurrent write changed one of the chains; retry."
        ) from exc


def conflict_decide_in_queue(
    *, queue: dict[str, Any], limit: int, **decision: Any
) -> tuple[list[FactConflict], list[FactConflict]]:
    """``conflict_decide`` from the dashboard's queue: returns the proposals still waiting
    (filtered by ``queue``, at most ``limit``) and the latest decisions, read before the
    commit."""
    with transaction.atomic():
        conflict_decide(**decision)
        organization = decision["organization"]
        pending = list(conflict_list(organization=organization, **queue)[:limit])
        decided = list(
            conflict_list(organization=organization, status="").exclude(
                status=FactConflict.Status.PROPOSED
            )[:10]
        )
        return pending, decided
