"""The facts a context pack holds, best first: the current facts a session may read in its
scopes, ranked by relevance to the query with one of two back ends (PostgreSQL full text
over the stored ``search_tsv``, in one statement; elsewhere a count of the query's words),
the facts governing their subjects first.
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import connection
from django.db.models import BooleanField, Case, IntegerField, Q, QuerySet, Value, When
from django.db.models.expressions import Combinable, Expression

from contextops.models import Organization
from contextops.rows import converter
from contextops.text import keyed_text
from frames.models import Session

from .. import supersession as rules
from ..models import Fact
from ..vectors import facts_semantic_candidates
from .lookup import held_at

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
            self.stored_value = _json_value(self.stored_value)
            self.parsed = True
        return self.stored_value

    def text(self) -> str:
        """The fact as a context shows it: ``key: value``. Made from the JSON text without
        parsing it for good when the value is still unparsed: only the facts a pack
        holds need their ``value``."""
        stored = self.stored_value
        if not self.parsed and isinstance(stored, str) and len(stored) <= TEXT_KEPT_CHARS:
            return _text_kept(self.key, stored)
        return keyed_text(self.key, self.value)

    def fields(self) -> dict[str, Any]:
        """Its own fields, as a context pack's answer gives them."""
        return {
            "key": self.key,
            "value": self.value,
            "source": self.source,
            "scope": self.scope,
            "is_constraint": self.is_constraint,
        }


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


def _base_where(base: QuerySet[Fact]) -> tuple[str, list[Any]]:
    """``base``'s conditions as SQL over the facts table, and their parameters."""
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
    return where, list(where_params)


def _governing_postgresql(
    where: str, where_params: Sequence[Any], subjects: list[str], ranked: list[int], limit: int
) -> list[ContextFact]:
    """The facts of ``where`` governing ``subjects`` (constraints, then organizational
    policy, newest first), but the ``ranked`` ones: ``facts_for_context``'s second read, in
    SQL written once (the ORM compiled the same conditions again)."""
    table = connection.ops.quote_name(Fact._meta.db_table)
    fields = ", ".join(f"{table}.{connection.ops.quote_name(f)}" for f in CONTEXT_FIELDS)
    sql = f"""
        SELECT {fields} FROM {table} WHERE {where}
        AND ({table}.is_constraint OR {table}.memory_type = %s)
        AND {table}.subject = ANY(%s::text[]) AND NOT ({table}.id = ANY(%s::bigint[]))
        ORDER BY {_CURRENT_NEWEST.format(t=table)} LIMIT %s
    """
    params = [
        *where_params,
        Fact.MemoryType.ORGANIZATIONAL.value,
        array_literal(subjects)[0] if subjects else "{}",
        array_literal(ranked)[0],
        limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [ContextFact(*row, parsed=False) for row in rows]  # type: ignore[misc]


def _ranked_postgresql(
    terms: list[str], limit: int, base_where: tuple[str, Sequence[Any]]
) -> tuple[list[tuple[ContextFact, float]], list[ContextFact]]:
    """PostgreSQL full text, in one statement, the ``limit`` best of the facts of
    ``base_where`` (SQL and its parameters) in three tiers:

    1. the facts matching the query's narrowing words, by ``ts_rank`` of the whole query
       over the stored ``search_tsv`` column (GIN-indexed, see migration 0002);
    2. the newest others matching any word of the query, by ``ts_rank`` among them;
    3. the newest others, with relevance 0;

    and, in the same statement, the facts governing their subjects that they leave out
    (what ``_governing_postgresql`` reads, up to ``limit``): (ranked, governing).

    A narrowing word is one found in less than half of the facts, by PostgreSQL's own
    statistics of the column (``contextops_fact_narrowing``, migration 0006): a word in
    half of them or more selects nothing, as a stop word, so a query of common words never
    scores every fact of a large organization. Tiers 2 and 3 read an index in their order
    (``fact_current_newest``) and stop at ``limit``. Until the table has statistics every
    word narrows: the ranking is ``ts_rank`` over every match.

    Long because it is one statement, written whole: its parts (the three tiers, then the
    governing facts) read in the order PostgreSQL runs them, and its parameters follow
    them in that order."""
    table = connection.ops.quote_name(Fact._meta.db_table)
    where, where_params = base_where
    every, every_params = _tsquery(terms)
    newest = _CURRENT_NEWEST.format(t=table)
    fields = ", ".join(f"{table}.{connection.ops.quote_name(f)}" for f in CONTEXT_FIELDS)
    sql = f"""
        WITH narrow AS MATERIALIZED (
            SELECT {table}.id, {table}.subject, ts_rank({table}.search_tsv, ({every})) AS relevance
            FROM {table} WHERE {where}
            AND {table}.search_tsv @@ (SELECT contextops_fact_narrowing(%s::text[]))
            ORDER BY 3 DESC, {newest} LIMIT %s
        ), matching AS MATERIALIZED (
            SELECT {table}.id, {table}.subject, ts_rank({table}.search_tsv, ({every})) AS relevance
            FROM {table} WHERE {where}
            AND {table}.search_tsv @@ ({every}) AND {table}.id NOT IN (SELECT id FROM narrow)
            ORDER BY {newest} LIMIT greatest(0, %s - (SELECT count(*) FROM narrow))
        ), rest AS MATERIALIZED (
            SELECT {table}.id, {table}.subject, 0.0::real AS relevance FROM {table} WHERE {where}
            AND {table}.id NOT IN (SELECT id FROM narrow)
            AND {table}.id NOT IN (SELECT id FROM matching)
            ORDER BY {newest}
            LIMIT greatest(0, %s - (SELECT count(*) FROM narrow) - (SELECT count(*) FROM matching))
        ), ranked AS (
            SELECT id, subject, relevance, 0 AS tier FROM narrow
            UNION ALL SELECT id, subject, relevance, 1 FROM matching
            UNION ALL SELECT id, subject, relevance, 2 FROM rest
        ), governing AS MATERIALIZED (
            SELECT {table}.id, 0.0::real AS relevance, 3 AS tier FROM {table} WHERE {where}
            AND ({table}.is_constraint OR {table}.memory_type = %s)
            AND {table}.subject IN (SELECT subject FROM ranked WHERE subject <> '')
            AND {table}.id NOT IN (SELECT id FROM ranked)
            ORDER BY {newest} LIMIT %s
        ), found AS (
            SELECT id, relevance, tier FROM ranked
            UNION ALL SELECT id, relevance, tier FROM governing
        )
        SELECT {fields}, found.relevance, found.tier FROM found
        JOIN {table} ON {table}.id = found.id
        ORDER BY found.tier, found.relevance DESC, {newest}
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
        *where_params,
        Fact.MemoryType.ORGANIZATIONAL.value,
        limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # Each row: CONTEXT_FIELDS, the relevance, the tier; the value stays PostgreSQL's JSON
    # text.
    ranked = [(ContextFact(*row[:-2], parsed=False), row[-2]) for row in rows if row[-1] < 3]  # type: ignore[misc]
    governing = [ContextFact(*row[:-2], parsed=False) for row in rows if row[-1] == 3]  # type: ignore[misc]
    return ranked, governing


# The facts of an organization are offered pack after pack, each pack making the text of
# hundreds: the text of each short one (its key and its stored JSON) is kept.
TEXT_KEPT_CHARS, TEXTS_KEPT = 4_000, 8_192


@functools.lru_cache(maxsize=TEXTS_KEPT)
def _text_kept(key: str, stored: str) -> str:
    return keyed_text(key, _json_value(stored))


def _json_value(text: Any) -> Any:
    """A fact's ``value`` from the JSON text PostgreSQL sent: orjson reads it (a pack
    parses hundreds of values per request, several times faster than the ORM's
    ``json.loads``); what orjson refuses (an integer past 64 bits) goes the ORM's way."""
    if isinstance(text, str):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return _value_converter()(text)


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
    if {type(v) for v in values} <= {int}:  # ints (and not bools)
        return "{" + ",".join(map(str, values)) + "}", "bigint"
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


def _readable(
    organization: Organization,
    valid: Q,
    levels: tuple[str, ...],
    permissions: tuple[str, ...],
    scope_ids: tuple[str, ...],
) -> QuerySet[Fact]:
    """The facts of ``organization`` that ``valid`` selects and a reader may read: at one
    of ``levels``, with no permission or one of ``permissions``, global or in one of
    ``scope_ids``."""
    return (
        Fact.objects.filter(valid, organization=organization, read_authority__in=levels)
        .filter(Q(read_permission="") | Q(read_permission__in=permissions))
        .filter(
            Q(scope=Fact.Scope.GLOBAL)
            | Q(scope__in=[Fact.Scope.TASK, Fact.Scope.SESSION], scope_id__in=scope_ids)
        )
    )


@functools.lru_cache(maxsize=256)
def _current_where(
    organization_id: int,
    levels: tuple[str, ...],
    permissions: tuple[str, ...],
    scope_ids: tuple[str, ...],
) -> tuple[str, tuple[Any, ...]]:
    """``_base_where`` of the current facts a reader may read (``_readable`` of the valid
    ones): the same text for the same reader, compiled once per process (a session asks
    for pack after pack, and the ORM's compiling cost more than the rest of the read)."""
    readable = _readable(
        Organization(pk=organization_id), Q(is_valid=True), levels, permissions, scope_ids
    )
    where, params = _base_where(readable)
    return where, tuple(params)


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
    """Valid facts a context for ``session`` may hold, best first: the ranked facts whole,
    then the facts governing their subjects that the ranking left out (one statement on
    PostgreSQL with a query, two otherwise).

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

    Long because its docstring states every rule of what a context may hold; the body
    reads as the steps it names (the readable facts, the ranking by one of two back
    ends, the nearest by vector, the governing facts first), the back ends already their
    own functions.
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
    levels = tuple(readable_levels(organization, lowest))
    scopes = tuple(str(s) for s in scope_ids)

    @functools.cache
    def readable() -> QuerySet[Fact]:
        return _readable(organization, valid, levels, tuple(permissions), scopes)

    terms = rules.query_terms(query)
    where: tuple[str, Sequence[Any]] | None = None
    if connection.vendor == "postgresql":
        if as_of is None and valid_at is None:  # the current facts: conditions kept
            where = _current_where(organization.pk, levels, tuple(permissions), scopes)
        else:
            where = _base_where(readable())
    governing_read: list[ContextFact] | None = None  # read with the ranking, when it was
    if terms and where is not None:
        rows, governing_read = _ranked_postgresql(terms, max(1, limit), where)
    else:
        rows = []
        for row in _top(readable(), _relevance(terms), max(1, limit)):
            relevance = row.pop("relevance")
            rows.append((ContextFact.from_row(row), relevance))
    if query_vector is not None and as_of is None and valid_at is None:
        nearest = facts_semantic_candidates(organization.pk, query_vector, max(1, limit))
        known = {fact.pk for fact, _ in rows}
        missing = [pk for pk in nearest if pk not in known]
        if missing:
            rows += [
                (ContextFact.from_row(row), 0)
                for row in readable().filter(_id_in(missing)).values(*CONTEXT_FIELDS)
            ]
            governing_read = None  # the nearest facts' subjects are governed too: read below
    scores = {fact.pk: relevance for fact, relevance in rows}
    ranked = [fact for fact, _ in rows]
    subjects = {f.subject for f in ranked if f.subject}
    # The facts governing the ranked facts' subjects that the ranking left out, in one read.
    if not subjects:
        governing = []
    elif governing_read is not None:
        governing = governing_read
    elif where is not None:
        governing = _governing_postgresql(*where, sorted(subjects), list(scores), max(1, limit))
    else:
        governing = [
            ContextFact.from_row(row)
            for row in readable()
            .filter(_GOVERNS, _any("subject", sorted(subjects)))
            .exclude(_id_in(list(scores)))
            .order_by("-is_constraint", "-created_at", "-id")
            .values(*CONTEXT_FIELDS)[: max(1, limit)]
        ]
    governed = subjects | {f.subject for f in ranked if _governs(f) and scores[f.pk]}
    first = [f for f in ranked if _governs(f) and (scores[f.pk] or f.subject in governed)]
    first.sort(key=lambda f: not f.is_constraint)  # stable: constraints, then policy
    first += governing
    first_ids = {f.pk for f in first}
    rest = [f for f in ranked if f.pk not in first_ids]
    return (first + rest)[: max(1, limit) + len(governing)]
