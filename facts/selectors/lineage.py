"""Reads of what links facts: a version's links (supersedes, superseded by, contested,
depends on, derived), the transitive dependents and dependencies of facts (one recursive
query each), and a chain's lineage, paged: every version of a chain shares ``Fact.chain``,
so the lineage is one indexed query however long the chain.
"""

import functools
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Prefetch, QuerySet
from django.db.models.expressions import RawSQL

from contextops.errors import NotFound
from contextops.models import Organization
from contextops.rows import columns, converter, fetch, param

from ..models import Fact, FactDependency


def table_of(model: type[Fact] | type[FactDependency]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _dependents_sql(seed: str) -> str:
    """The recursive query of the ids depending, transitively, on the ids ``seed`` selects."""
    links = table_of(FactDependency)
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
    facts, links = table_of(Fact), table_of(FactDependency)
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
            _LINKS_SQL.format(facts=table_of(Fact), links=table_of(FactDependency)),
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
    facts, links = table_of(Fact), table_of(FactDependency)
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
        f"SELECT {columns(Fact, 'f')} FROM {table_of(Fact)} f"
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
        cursor.execute(_LINEAGE_HEAD_SQL.format(facts=table_of(Fact)), [organization.pk, key])
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
