"""Reads of facts, constraints and the working set, always scoped to one organization.

The current head of any key and the lineage of its chain are one indexed query each,
however long the chain: every version of a chain shares ``Fact.chain``; what depends on
what, transitively, is one recursive query (``dependents_closure``, ``dependencies_closure``).
"""

import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    F,
    IntegerField,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.expressions import Combinable, Expression, RawSQL
from django.utils import timezone

from contextops.errors import NotFound
from contextops.models import Organization
from contextops.rows import columns, converter, fetch, param
from contextops.text import value_text
from frames.models import Session

from . import supersession as rules
from . import validtime
from .models import Fact, FactConflict, FactDependency, WorkingSetItem
from .vectors import facts_semantic_candidates

# What a context pack uses of a fact (the ranking orders by more, in SQL).
CONTEXT_FIELDS = (
    "id",
    "key",
    "subject",
    "value",
    "tokens",
    "is_constraint",
    "memory_type",
    "source",
    "scope",
    "embedding",
)


@dataclass(slots=True)
class ContextFact:
    """A current fact as a context reads it: the columns of CONTEXT_FIELDS, no model.

    ``value`` is parsed on first use: the ranking hands over the JSON text PostgreSQL
    sent (``stored_value``, with ``parsed`` False), so the facts a pack considers and
    drops unread (at its critical level, every one that is not a constraint) are never
    parsed."""

    id: int
    key: str
    subject: str
    stored_value: Any
    tokens: int
    is_constraint: bool
    memory_type: str
    source: str
    scope: str
    embedding: Any = None  # its stored vector (contextops.embeddings), or None
    parsed: bool = True

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "ContextFact":
        """From a row of CONTEXT_FIELDS (its ``value`` parsed)."""
        row["stored_value"] = row.pop("value")
        return cls(**row)

    @property
    def pk(self) -> int:
        return self.id

    @property
    def value(self) -> Any:
        if not self.parsed:
            self.stored_value = _value_converter()(self.stored_value)
            self.parsed = True
        return self.stored_value

    def text(self) -> str:
        """The fact as a context shows it: ``key: value``."""
        return f"{self.key}: {value_text(self.value)}"

    def fields(self) -> dict[str, Any]:
        """Its own fields, as a context pack's answer gives them."""
        return {
            "key": self.key,
            "value": self.value,
            "source": self.source,
            "scope": self.scope,
            "is_constraint": self.is_constraint,
        }


def _table(model: type[Fact] | type[FactDependency]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _dependents_sql(seed: str) -> str:
    """The recursive query of the ids depending, transitively, on the ids ``seed`` selects."""
    links = _table(FactDependency)
    return (
        f"WITH RECURSIVE dependents(id) AS ("
        f" SELECT fact_id FROM {links} WHERE depends_on_id IN ({seed})"
        f" UNION SELECT l.fact_id FROM {links} l JOIN dependents d ON l.depends_on_id = d.id"
        f") SELECT id FROM dependents"
    )


def dependents_closure(fact_ids: list[int]) -> list[int]:
    """Ids of every fact that depends on ``fact_ids``, transitively: one recursive query."""
    if not fact_ids:
        return []
    sql = _dependents_sql(", ".join(["%s"] * len(fact_ids)))
    with connection.cursor() as cursor:
        cursor.execute(sql, list(fact_ids))
        return [row[0] for row in cursor.fetchall()]


def _chain_dependents(versions: QuerySet[Fact]) -> RawSQL:
    """The ids depending, transitively, on any of ``versions``: the recursive query as a
    subquery seeded by the chain's own query, so no id list travels to the database."""
    seed, params = versions.order_by().values("pk").query.sql_with_params()
    return RawSQL(_dependents_sql(seed), params)


def dependencies_closure(fact_ids: list[int]) -> list[int]:
    """``fact_ids`` and every fact they depend on, transitively: one recursive query."""
    if not fact_ids:
        return []
    facts, links = _table(Fact), _table(FactDependency)
    marks = ", ".join(["%s"] * len(fact_ids))
    sql = (
        f"WITH RECURSIVE upstream(id) AS ("
        f" SELECT id FROM {facts} WHERE id IN ({marks})"
        f" UNION SELECT l.depends_on_id FROM {links} l JOIN upstream u ON l.fact_id = u.id"
        f") SELECT id FROM upstream"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, list(fact_ids))
        return [row[0] for row in cursor.fetchall()]


def _keys_only() -> QuerySet[Fact]:
    return Fact.objects.only("id", "key")


def with_relations(queryset: QuerySet[Fact]) -> QuerySet[Fact]:
    """``queryset`` with what a fact's API body reads, so a list costs no query per row."""
    return queryset.select_related("supersedes", "superseded_by", "contested").prefetch_related(
        Prefetch("depends_on", queryset=_keys_only()),
        Prefetch("derived_facts", queryset=_keys_only()),
    )


def fact_get(*, organization: Organization, key: str) -> Fact:
    """The version stored under ``key``; NotFound for unknown keys and other organizations."""
    fact = with_relations(Fact.objects.filter(organization=organization, key=key)).first()
    if fact is None:
        raise NotFound(f"No fact {key}.")
    return fact


# The keys of what a fact links to, as rows of (link, key): the version it supersedes,
# the one superseding it, the fact it contests, what it depends on and what derives from
# it. Parameters: supersedes id, id, contested id, id, id.
_LINKS_SQL = (
    "SELECT 'supersedes', s.key FROM {facts} s WHERE s.id = %s"
    " UNION ALL SELECT 'superseded_by', n.key FROM {facts} n WHERE n.supersedes_id = %s"
    " UNION ALL SELECT 'contested', c.key FROM {facts} c WHERE c.id = %s"
    " UNION ALL SELECT 'depends_on', u.key FROM {links} l"
    " JOIN {facts} u ON u.id = l.depends_on_id WHERE l.fact_id = %s"
    " UNION ALL SELECT 'derived_facts', d.key FROM {links} l"
    " JOIN {facts} d ON d.id = l.fact_id WHERE l.depends_on_id = %s"
)


def fact_links(fact: Fact) -> dict[str, Any]:
    """The keys of the facts ``fact`` links to, as its API body gives them (``links`` of
    ``schemas.fact_out``), in one statement: no related fact is built.

    An outdated write is superseded by the head it lost to (``Fact.superseded_by_fact``)."""
    links: dict[str, Any] = {
        "supersedes": None,
        "superseded_by": None,
        "contested": None,
        "depends_on": [],
        "derived_facts": [],
    }
    with connection.cursor() as cursor:
        cursor.execute(
            _LINKS_SQL.format(facts=_table(Fact), links=_table(FactDependency)),
            [fact.supersedes_id, fact.pk, fact.contested_id, fact.pk, fact.pk],
        )
        for link, key in cursor.fetchall():
            if link in ("depends_on", "derived_facts"):
                links[link].append(key)
            else:
                links[link] = key
    if fact.status == Fact.Status.OUTDATED and fact.contested_id is not None:
        links["superseded_by"] = links["contested"]
    links["depends_on"].sort()
    links["derived_facts"].sort()
    return links


@functools.cache
def _fact_by_key_sql() -> str:
    return (
        f"SELECT {columns(Fact, 'f')} FROM {_table(Fact)} f"
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

    An outdated write leads to the head of the chain it lost to (seed 001 rule 4: the
    later observation stays current). NotFound when the key is unknown, and when its chain
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


LINEAGE_PAGE = 100  # versions a lineage answers at once unless asked for fewer or more
LINEAGE_PAGE_MAX = 500


@dataclass
class Lineage:
    fact: Fact
    chain: list[Fact]  # one page of the chain, oldest first: the newest versions by default
    contested: list[Fact]  # proposals and outdated writes against a version of the chain
    dependents: list[Fact]  # every fact depending on a version, transitively
    edges: list[tuple[int, int]] = field(default_factory=list)  # (fact id, depends-on id)
    # Keys each version of the page depends on / has derived from it, sorted, by version id.
    depends_on: dict[int, list[str]] = field(default_factory=dict)
    derived_facts: dict[int, list[str]] = field(default_factory=dict)
    total_versions: int = 0  # in the whole chain
    older: Fact | None = None  # the version just before the page, if any
    newer: Fact | None = None  # the version just after the page, if any

    def superseded_rule(self, index: int) -> str:
        """The rule by which ``chain[index]`` was superseded ("" for the head)."""
        if index + 1 < len(self.chain):
            return self.chain[index + 1].supersession_rule
        return self.newer.supersession_rule if self.newer is not None else ""

    @property
    def older_cursor(self) -> int | None:
        """The ``before_version`` that reads the page before this one; None at the root."""
        return self.chain[0].version if self.older is not None and self.chain else None


@functools.cache
def _page_links_sql() -> str:
    """The links of a page of versions (organization, chain, first and last version, twice),
    as rows of (fact id, its key, depends-on id, its key): the links from the page, then
    those to it, each half through an index (an OR of both sides would read every link).
    Written once per process: compiling the ORM's union cost more than running it."""
    facts, links = _table(Fact), _table(FactDependency)
    half = (
        "SELECT l.fact_id, f.key, l.depends_on_id, u.key FROM {links} l"
        " JOIN {facts} f ON f.id = l.fact_id JOIN {facts} u ON u.id = l.depends_on_id"
        " WHERE {side}.organization_id = %s AND {side}.chain = %s"
        " AND {side}.version BETWEEN %s AND %s"
    )
    return " UNION ".join(half.format(links=links, facts=facts, side=side) for side in "fu")


def _page_links(page: list[Fact]) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """The keys each version of ``page`` (consecutive versions of one chain) depends on and
    the keys derived from it, sorted: one query over the links of the whole page, found by
    the page's version range, rows of ids and keys, no Fact built."""
    depends_on: dict[int, list[str]] = {f.pk: [] for f in page}
    derived_facts: dict[int, list[str]] = {f.pk: [] for f in page}
    if not page:
        return depends_on, derived_facts
    first = page[0]
    with connection.cursor() as cursor:
        cursor.execute(
            _page_links_sql(),
            [
                first.organization_id,
                param(Fact, "chain", first.chain),
                first.version,
                page[-1].version,
            ]
            * 2,
        )
        links = cursor.fetchall()
    for fact_id, fact_key, up_id, up_key in links:
        if fact_id in depends_on:
            depends_on[fact_id].append(up_key)
        if up_id in derived_facts:
            derived_facts[up_id].append(fact_key)
    for keys in (*depends_on.values(), *derived_facts.values()):
        keys.sort()
    return depends_on, derived_facts


def _dependency_edges(fact_ids: list[int]) -> list[tuple[int, int]]:
    """(fact id, depends-on id) for every link of ``fact_ids``: in the order of
    ``fact_ids``, then newest depended-on fact first (``Fact``'s own ordering)."""
    if not fact_ids:
        return []
    position = {pk: i for i, pk in enumerate(fact_ids)}
    links = (
        FactDependency.objects.filter(fact_id__in=fact_ids)
        .order_by("-depends_on__created_at", "-depends_on_id")
        .values_list("fact_id", "depends_on_id")
    )
    return sorted(links, key=lambda link: position[link[0]])


# The key's version (its id, its chain) and the size of its chain, in one read.
_LINEAGE_HEAD_SQL = (
    "SELECT f.id, f.chain, (SELECT count(*) FROM {facts} c"
    " WHERE c.organization_id = f.organization_id AND c.chain = f.chain)"
    " FROM {facts} f WHERE f.organization_id = %s AND f.key = %s"
)


@functools.cache
def _chain_of_converter() -> Any:
    return converter(Fact, "chain")


def _chain_of(value: Any) -> Any:
    return _chain_of_converter()(value)


@functools.cache
def _lineage_page_sql(before: bool) -> str:
    """The newest versions of a chain (organization, chain, [below a version], limit),
    whole, newest first: written once per process (the ORM's compiling of a read of
    every column cost more than running it)."""
    below = " AND f.version < %s" if before else ""
    return (
        f"SELECT {columns(Fact, 'f')} FROM {_table(Fact)} f"
        f" WHERE f.organization_id = %s AND f.chain = %s{below}"
        " ORDER BY f.version DESC LIMIT %s"
    )


def fact_lineage(
    *,
    organization: Organization,
    key: str,
    before_version: int | None = None,
    limit: int = LINEAGE_PAGE,
) -> Lineage:
    """One page of the supersession chain of ``key`` with its contested writes and the
    dependents of every version; the same number of queries for 3 versions or 3,000.

    The page holds the newest ``limit`` versions below ``before_version`` (the whole
    chain's newest without it), oldest first; ``older`` and ``newer`` are its neighbours,
    so the links and rules at its edges read as in the whole chain.
    """
    with connection.cursor() as cursor:
        cursor.execute(_LINEAGE_HEAD_SQL.format(facts=_table(Fact)), [organization.pk, key])
        head = cursor.fetchone()
    if head is None:
        raise NotFound(f"No fact {key}.")
    # As ``only("id", "organization", "key", "chain")`` reads it: the rest loads if used.
    fact = Fact.from_db(
        connection.alias,
        ["id", "organization_id", "key", "chain"],
        [head[0], organization.pk, key, _chain_of(head[1])],
    )
    # The chain's versions as a subquery: contested writes and dependents are found in the
    # database, however long the chain, without its ids passing through Python.
    versions = Fact.objects.filter(organization=organization, chain=fact.chain)
    # Neighbours in the chain are each other's supersedes / superseded_by: no joins needed.
    rows = fetch(
        Fact,
        _lineage_page_sql(bool(before_version)),
        [
            organization.pk,
            param(Fact, "chain", fact.chain),
            *([before_version] if before_version else []),
            limit + 1,
        ],
    )
    older = rows[limit] if len(rows) > limit else None
    chain = list(reversed(rows[:limit]))
    depends_on, derived_facts = _page_links(chain)
    newer = (
        versions.filter(version__gt=chain[-1].version).order_by("version").first()
        if before_version and chain
        else None
    )
    # Through the few facts that contest anything, not a probe per version. Sorted here:
    # ordering in SQL makes Django compare the sort keys with each of the ~120 columns
    # the related versions add, which costs more than sorting a handful of rows.
    contested = sorted(
        with_relations(
            Fact.objects.filter(
                organization=organization,
                contested__isnull=False,
                contested__organization=organization,
                contested__chain=fact.chain,
            ).order_by()
        ),
        key=lambda f: (f.created_at, f.pk),
    )
    dependents = list(
        Fact.objects.filter(organization=organization, pk__in=_chain_dependents(versions)).order_by(
            "created_at", "id"
        )
    )
    edges = _dependency_edges([d.pk for d in dependents])
    return Lineage(
        fact=fact,
        chain=chain,
        contested=contested,
        dependents=dependents,
        edges=edges,
        depends_on=depends_on,
        derived_facts=derived_facts,
        total_versions=head[2],
        older=older,
        newer=newer,
    )


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
    if scope:
        queryset = queryset.filter(scope=scope)
    if scope_id:
        queryset = queryset.filter(scope_id=scope_id)
    if subject:
        queryset = queryset.filter(subject=subject)
    if needs_review is not None:
        queryset = queryset.filter(needs_review=needs_review)
    if memory_type:
        queryset = queryset.filter(memory_type=memory_type)
    if status:
        queryset = queryset.filter(status=status)
    if search:
        queryset = queryset.filter(search_text__contains=search.lower())
    return with_relations(queryset).order_by("-created_at", "-id")


def fact_review_count(*, organization: Organization) -> int:
    """How many facts of the organization are flagged for review (any validity)."""
    return Fact.objects.filter(organization=organization, needs_review=True).count()


def readable_levels(organization: Organization, authority: str) -> list[str]:
    """The ``read_authority`` values a reader at ``authority`` may see ("" is everyone's)."""
    ladder = list(organization.authority_ladder or [])
    return ["", *ladder[organization.authority_rank(authority or "") :]]


def _relevance(terms: list[str]) -> Combinable:
    """How many of ``terms`` a fact's search text contains (0 without terms)."""
    if not terms:
        return Value(0, output_field=IntegerField())
    score: Combinable | None = None
    for term in terms:
        when = Case(
            When(search_text__contains=term, then=Value(1)),
            default=Value(0),
            output_field=IntegerField(),
        )
        score = when if score is None else score + when
    assert score is not None  # terms is not empty
    return score


RANK_ORDER = ("-relevance", "-is_constraint", "-created_at", "-id")


def _top(candidates: QuerySet[Fact], rank: Combinable, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` best of ``candidates`` by ``rank``, each a row of CONTEXT_FIELDS and
    its ``relevance``, in one statement: the ranking sorts narrow rows (ids and scores),
    the outer read takes the winners whole (sorting every candidate with its value
    attached is what would cost time on a large organization)."""
    top = candidates.annotate(relevance=rank).order_by(*RANK_ORDER).values("id")[:limit]
    return list(
        Fact.objects.filter(id__in=top)
        .annotate(relevance=rank)
        .order_by(*RANK_ORDER)
        .values(*CONTEXT_FIELDS, "relevance")
    )


def _tsquery(terms: list[str]) -> tuple[str, list[str]]:
    """The query as one ``tsquery``: any of ``terms``, each as ``plainto_tsquery`` reads it."""
    return " || ".join(["plainto_tsquery('english'::regconfig, %s)"] * len(terms)), list(terms)


_CURRENT_NEWEST = "{t}.is_constraint DESC, {t}.created_at DESC, {t}.id DESC"


def _ranked_postgresql(
    base: QuerySet[Fact], terms: list[str], limit: int
) -> list[tuple[ContextFact, float]]:
    """PostgreSQL full text, in one statement, the ``limit`` best of ``base`` in three tiers:

    1. the facts matching the query's narrowing words, by ``ts_rank`` of the whole query
       over the stored ``search_tsv`` column (GIN-indexed, see migration 0002);
    2. the newest others matching any word of the query, by ``ts_rank`` among them;
    3. the newest others, with relevance 0.

    A narrowing word is one found in less than half of the facts, by PostgreSQL's own
    statistics of the column (``contextops_fact_narrowing``, migration 0006): a word in
    half of them or more selects nothing, as a stop word, so a query of common words never
    scores every fact of a large organization. Tiers 2 and 3 read an index in their order
    (``fact_current_newest``) and stop at ``limit``. Until the table has statistics every
    word narrows: the ranking is ``ts_rank`` over every match."""
    table = connection.ops.quote_name(Fact._meta.db_table)
    joined = [
        a for a, uses in base.query.alias_refcount.items() if uses and a != Fact._meta.db_table
    ]
    if not joined:  # the table alone: its conditions, as they are
        where, where_params = base.query.get_compiler(connection=connection).compile(
            base.query.where
        )
    else:  # a past moment's joins: the facts it selects, by id
        subquery, where_params = base.values("id").query.sql_with_params()
        where = f"{table}.id IN ({subquery})"
    where_params = list(where_params)
    every, every_params = _tsquery(terms)
    newest = _CURRENT_NEWEST.format(t=table)
    fields = ", ".join(f"{table}.{connection.ops.quote_name(f)}" for f in CONTEXT_FIELDS)
    sql = f"""
        WITH narrow AS MATERIALIZED (
            SELECT {table}.id, ts_rank({table}.search_tsv, ({every})) AS relevance
            FROM {table} WHERE {where}
            AND {table}.search_tsv @@ (SELECT contextops_fact_narrowing(%s::text[]))
            ORDER BY 2 DESC, {newest} LIMIT %s
        ), matching AS MATERIALIZED (
            SELECT {table}.id, ts_rank({table}.search_tsv, ({every})) AS relevance
            FROM {table} WHERE {where}
            AND {table}.search_tsv @@ ({every}) AND {table}.id NOT IN (SELECT id FROM narrow)
            ORDER BY {newest} LIMIT greatest(0, %s - (SELECT count(*) FROM narrow))
        ), rest AS MATERIALIZED (
            SELECT {table}.id, 0.0::real AS relevance FROM {table} WHERE {where}
            AND {table}.id NOT IN (SELECT id FROM narrow)
            AND {table}.id NOT IN (SELECT id FROM matching)
            ORDER BY {newest}
            LIMIT greatest(0, %s - (SELECT count(*) FROM narrow) - (SELECT count(*) FROM matching))
        ), ranked AS (
            SELECT id, relevance, 0 AS tier FROM narrow
            UNION ALL SELECT id, relevance, 1 FROM matching
            UNION ALL SELECT id, relevance, 2 FROM rest
        )
        SELECT {fields}, ranked.relevance FROM ranked JOIN {table} ON {table}.id = ranked.id
        ORDER BY ranked.tier, ranked.relevance DESC, {newest}
    """
    literal, _ = array_literal(list(terms))
    params = [
        *every_params,
        *where_params,
        literal,
        limit,
        *every_params,
        *where_params,
        *every_params,
        limit,
        *where_params,
        limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # Each row: CONTEXT_FIELDS, then the relevance; the value stays PostgreSQL's JSON text.
    return [(ContextFact(*row[:-1], parsed=False), row[-1]) for row in rows]  # type: ignore[misc]


@functools.cache
def _value_converter() -> Any:
    """What the ORM makes of a fact's ``value`` as PostgreSQL hands it back (text)."""
    return converter(Fact, "value")


def _id_in(ids: list[int]) -> Q | Expression:
    """``id IN ids``: on PostgreSQL one array parameter (``= ANY``), so a long list costs
    the driver no placeholder parsing and the statement stays the same text."""
    return _any("id", ids)


class _Any(Expression):
    """``column = ANY(%s)`` of the query's own table, the values as one array parameter
    written as PostgreSQL's array literal (integers, or text): the driver sends one
    string instead of adapting each of hundreds of items, which cost more than the read."""

    output_field = BooleanField()

    def __init__(self, column: str, values: list[Any]) -> None:
        super().__init__()
        self.column, self.values = column, values

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        if not self.values:
            return "FALSE", ()
        table = compiler.quote_name_unless_alias(compiler.query.base_table)
        literal, element = array_literal(self.values)
        column = connection.ops.quote_name(self.column)
        return f"{table}.{column} = ANY(%s::{element}[])", (literal,)


def array_literal(values: list[Any]) -> tuple[str, str]:
    """``values`` as PostgreSQL's array literal and its element type: ``bigint`` when all
    are integers, else ``text`` (each element quoted, ``"`` and ``\\`` escaped)."""
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "{" + ",".join(str(int(v)) for v in values) + "}", "bigint"
    quoted = ('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(quoted) + "}", "text"


def _any(column: str, values: list[Any]) -> Q | Expression:
    if connection.vendor != "postgresql":
        return Q(**{f"{column}__in": values})
    return _Any(column, list(values))


# Facts that govern their subject: constraints and organizational policy. A context
# that holds anything about a subject holds these first.
_GOVERNS = Q(is_constraint=True) | Q(memory_type=Fact.MemoryType.ORGANIZATIONAL)


def _governs(fact: ContextFact) -> bool:
    return fact.is_constraint or fact.memory_type == Fact.MemoryType.ORGANIZATIONAL


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


def facts_for_context(
    *,
    organization: Organization,
    session: Session,
    scope_ids: list[str],
    query: str = "",
    limit: int = 50,
    reader_authority: str | None = None,
    as_of: datetime | None = None,
    query_vector: Any = None,
    valid_at: datetime | None = None,
) -> list[ContextFact]:
    """Valid facts a context for ``session`` may hold, best first: two queries, the ranked
    facts whole, then the facts governing their subjects that the ranking left out.

    ``query_vector``: where the database has a vector index (pgvector), the facts nearest
    to it join the candidates too (a third query), so a fact that shares no word with the
    query can still be ranked.

    ``as_of``: the facts valid at that time instead: written by then, and current then
    (superseded or withdrawn only later).

    ``valid_at``: the facts that held at that time (valid time, ``held_at``) instead of
    the current ones; with ``as_of`` too, only those written by then.

    Only current facts (never superseded, proposed, outdated, hypothetical or draft),
    global ones plus those of ``scope_ids``, whose ``read_permission`` (if any) the session's
    identity holds, readable at the session's authority (and at
    ``reader_authority``, the calling agent's, when given: the lower of the two wins), ranked
    by relevance to ``query`` (PostgreSQL: full-text rank over a GIN index of the facts
    matching the query's words found in less than half of the facts, then the newest
    matching any word, see ``_ranked_postgresql``; elsewhere the number of query words
    each contains, a LIKE per word). Constraints, then
    organizational policy, that govern a subject in the result come first, fetched even when their own
    words did not match.
    """
    identity = session.identity or {}
    permissions = [str(p) for p in identity.get("permissions") or []]
    readers = [identity.get("authority") or ""]
    if reader_authority is not None:
        readers.append(reader_authority)
    lowest = max(readers, key=organization.authority_rank)
    if as_of is None:
        valid = Q(is_valid=True)
    else:
        valid = Q(created_at__lte=as_of) & (
            Q(is_valid=True)
            | Q(status=Fact.Status.SUPERSEDED, superseded_by__created_at__gt=as_of)
            | Q(status=Fact.Status.INVALIDATED, updated_at__gt=as_of)
        )
    if valid_at is not None:
        valid = held_at(valid_at) & (Q() if as_of is None else Q(created_at__lte=as_of))
    base = (
        Fact.objects.filter(
            valid,
            organization=organization,
            read_authority__in=readable_levels(organization, lowest),
        )
        .filter(Q(read_permission="") | Q(read_permission__in=permissions))
        .filter(
            Q(scope=Fact.Scope.GLOBAL)
            | Q(
                scope__in=[Fact.Scope.TASK, Fact.Scope.SESSION],
                scope_id__in=[str(s) for s in scope_ids],
            )
        )
    )
    terms = rules.query_terms(query)
    if terms and connection.vendor == "postgresql":
        rows = _ranked_postgresql(base, terms, max(1, limit))
    else:
        rows = []
        for row in _top(base, _relevance(terms), max(1, limit)):
            relevance = row.pop("relevance")
            rows.append((ContextFact.from_row(row), relevance))
    if query_vector is not None and as_of is None and valid_at is None:
        nearest = facts_semantic_candidates(organization.pk, query_vector, max(1, limit))
        known = {fact.pk for fact, _ in rows}
        missing = [pk for pk in nearest if pk not in known]
        if missing:
            rows += [
                (ContextFact.from_row(row), 0)
                for row in base.filter(_id_in(missing)).values(*CONTEXT_FIELDS)
            ]
    scores = {fact.pk: relevance for fact, relevance in rows}
    ranked = [fact for fact, _ in rows]
    subjects = {f.subject for f in ranked if f.subject}
    # The facts governing the ranked facts' subjects that the ranking left out, in one read.
    governing = (
        [
            ContextFact.from_row(row)
            for row in base.filter(_GOVERNS, _any("subject", sorted(subjects)))
            .exclude(_id_in(list(scores)))
            .order_by("-is_constraint", "-created_at", "-id")
            .values(*CONTEXT_FIELDS)[: max(1, limit)]
        ]
        if subjects
        else []
    )
    governed = subjects | {f.subject for f in ranked if _governs(f) and scores[f.pk]}
    first = [f for f in ranked if _governs(f) and (scores[f.pk] or f.subject in governed)]
    first.sort(key=lambda f: not f.is_constraint)  # stable: constraints, then policy
    first += governing
    first_ids = {f.pk for f in first}
    rest = [f for f in ranked if f.pk not in first_ids]
    return (first + rest)[: max(1, limit) + len(governing)]


@dataclass
class ConstraintCheck:
    subject: str
    value: Any
    allowed: bool
    checked: list[str]
    violations: list[dict]


def constraints_check(
    *, organization: Organization, subject: str, value: Any, scope_id: str = ""
) -> ConstraintCheck:
    """Whether ``value`` is allowed for ``subject`` by every current constraint fact governing it.

    Global constraints always apply; task and session constraints when ``scope_id`` is theirs.
    """
    scopes = Q(scope=Fact.Scope.GLOBAL)
    if scope_id:
        scopes |= Q(scope__in=[Fact.Scope.TASK, Fact.Scope.SESSION], scope_id=scope_id)
    facts = list(
        Fact.objects.filter(
            organization=organization, is_valid=True, is_constraint=True, subject=subject
        )
        .filter(scopes)
        .order_by("key")
    )
    violations = []
    checked = []
    for fact in facts:
        if not isinstance(fact.constraint, dict):
            continue
        checked.append(fact.key)
        for detail in rules.constraint_violations(fact.constraint, value):
            violations.append(
                {"fact_key": fact.key, "constraint": fact.constraint, "detail": detail}
            )
    return ConstraintCheck(
        subject=subject, value=value, allowed=not violations, checked=checked, violations=violations
    )


# Working set (layer 3) -----------------------------------------------------------------------


def _live(session: Session) -> QuerySet[WorkingSetItem]:
    now = timezone.now()
    return WorkingSetItem.objects.filter(session=session).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )


def working_set_get(*, session: Session, key: str) -> WorkingSetItem:
    """The live item ``key``: NotFound when missing or expired (expiry is immediate)."""
    item = _live(session).filter(key=key).first()
    if item is None:
        raise NotFound(f"No working-set item {key} in this session.")
    return item


def working_set_list(*, session: Session) -> list[WorkingSetItem]:
    """The session's live working set, by key."""
    return list(_live(session).order_by("key"))


@functools.cache
def _working_set_newest_first_sql() -> str:
    return (
        f"SELECT {columns(WorkingSetItem, 'w')} FROM {WorkingSetItem._meta.db_table} w"
        ' WHERE w."session_id" = %s AND (w."expires_at" IS NULL OR w."expires_at" > %s)'
        ' ORDER BY w."updated_at" DESC, w."id" DESC'
    )


def working_set_for_context(*, session: Session, query: str = "") -> list[WorkingSetItem]:
    """The session's live working set, items that mention a word of ``query`` first: what
    ``_live`` reads, newest first, as SQL written once per process (every context pack
    reads it)."""
    items = fetch(
        WorkingSetItem,
        _working_set_newest_first_sql(),
        [
            param(WorkingSetItem, "session", session.pk),
            param(WorkingSetItem, "expires_at", timezone.now()),
        ],
    )
    terms = rules.query_terms(query)
    if not terms:
        return items

    def hits(item: WorkingSetItem) -> int:
        text = f"{item.key} {value_text(item.value)}".lower()
        return sum(1 for term in terms if term in text)

    return sorted(items, key=lambda item: -hits(item))


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
