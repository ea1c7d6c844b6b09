"""Current facts found by their vectors through an index, where the database has one.

Every fact version stores its vector as compact float16 bytes (``Fact.embedding``). On
PostgreSQL with pgvector (when ``CREATE EXTENSION vector`` succeeds), the facts table
also has ``embedding_vector vector(dim)``, a column PostgreSQL computes itself from those
bytes (``GENERATED ALWAYS AS (contextops_f16_vector(embedding, dim)) STORED``: no write
path changes, no extra statement), with an HNSW index on the current versions, so
``facts_semantic_candidates`` answers the nearest current facts of an organization in
one indexed query. Anywhere else it answers ``[]`` and the ranking reads the bytes of
the candidates it already has.

``fact_vectors_sync(dim)`` creates (or, for another dimension, recreates) the column
and its index: the facts migration runs it, and ``manage.py embeddings_backfill`` after
a change of provider.
"""

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import DatabaseError, connection, transaction

logger = logging.getLogger(__name__)

TABLE = "facts_fact"
COLUMN = "embedding_vector"
INDEX = "fact_embedding_hnsw"
DECODE = "contextops_f16_vector"
# pgvector's HNSW index takes vectors of at most 2,000 dimensions.
MAX_INDEXED_DIM = 2000
# How many index entries a search visits at least (pgvector's ef_search).
MIN_EF_SEARCH = 40

# float16 little-endian bytes to a vector: sign, exponent and mantissa of each half. NULL
# for a NULL, for bytes of another dimension, or for a zero vector (cosine undefined).
# PL/pgSQL's loop is about three times faster than the same in one SQL query.
DECODE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {DECODE}(b bytea, dim integer) RETURNS vector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  out real[] := array_fill(0::real, ARRAY[dim]);
  h integer;
  e integer;
  nonzero boolean := false;
BEGIN
  IF b IS NULL OR octet_length(b) <> 2 * dim THEN
    RETURN NULL;
  END IF;
  FOR i IN 0 .. dim - 1 LOOP
    h := get_byte(b, 2 * i) | (get_byte(b, 2 * i + 1) << 8);
    CONTINUE WHEN h & 32767 = 0;
    nonzero := true;
    e := (h >> 10) & 31;
    out[i + 1] := (CASE WHEN h >= 32768 THEN -1 ELSE 1 END) * CASE WHEN e = 0
      THEN (h & 1023) * 2.0::float8 ^ (-24)
      ELSE ((h & 1023) + 1024) * 2.0::float8 ^ (e - 25) END;
  END LOOP;
  RETURN CASE WHEN nonzero THEN out::vector END;
END $$
"""

_available: dict[str, bool] = {}
_column_dims: dict[str, int] = {}


def _database(conn: Any) -> str:
    return f"{conn.alias}:{conn.settings_dict.get('NAME')}"


def pgvector_available(conn: Any = None) -> bool:
    """Whether this database has pgvector installed (PostgreSQL with the ``vector``
    extension created); False on SQLite. Asked once per process and database."""
    conn = conn or connection
    if conn.vendor != "postgresql":
        return False
    key = _database(conn)
    if key not in _available:
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            _available[key] = cursor.fetchone() is not None
    return _available[key]


def _column_dim(conn: Any) -> int:
    """The dimension of the facts' vector column, 0 when there is none. Cached."""
    key = _database(conn)
    if key not in _column_dims:
        dim = 0
        if pgvector_available(conn):
            with conn.cursor() as cursor:
                cursor.execute(
                    "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass"
                    " AND attname = %s AND NOT attisdropped",
                    [TABLE, COLUMN],
                )
                row = cursor.fetchone()
                dim = max(int(row[0]), 0) if row else 0
        _column_dims[key] = dim
    return _column_dims[key]


def _forget(conn: Any) -> None:
    _available.pop(_database(conn), None)
    _column_dims.pop(_database(conn), None)


def fact_vectors_sync(*, dim: int, conn: Any = None) -> bool:
    """Make ``facts_fact.embedding_vector`` a ``vector(dim)`` column computed from the
    stored bytes, with its HNSW index, when this database can have pgvector. True when
    the column is there, False when it cannot be (not PostgreSQL, pgvector not installed
    on the server or not allowed to this user, or more dimensions than HNSW indexes)."""
    conn = conn or connection
    if conn.vendor != "postgresql":
        return False
    _forget(conn)
    try:
        with transaction.atomic(using=conn.alias), conn.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except DatabaseError as exc:
        logger.info("pgvector is not available here (%s); facts keep their vectors as bytes", exc)
        return False
    finally:
        _forget(conn)
    if not 0 < dim <= MAX_INDEXED_DIM:
        logger.warning("vectors of %s dimensions are not indexed with pgvector's HNSW", dim)
        return False
    if _column_dim(conn) == dim:
        return True
    with transaction.atomic(using=conn.alias), conn.cursor() as cursor:
        cursor.execute(DECODE_FUNCTION)
        cursor.execute(f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS {COLUMN}")
        cursor.execute(
            f"ALTER TABLE {TABLE} ADD COLUMN {COLUMN} vector({int(dim)})"
            f" GENERATED ALWAYS AS ({DECODE}(embedding, {int(dim)})) STORED"
        )
        cursor.execute(
            f"CREATE INDEX {INDEX} ON {TABLE} USING hnsw ({COLUMN} vector_cosine_ops)"
            " WHERE is_valid"
        )
    _forget(conn)
    return True


def fact_vectors_drop(conn: Any = None) -> None:
    """Remove the column, its index and the decoding function (the extension stays)."""
    conn = conn or connection
    if conn.vendor == "postgresql":
        with conn.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS {COLUMN}")
            cursor.execute(f"DROP FUNCTION IF EXISTS {DECODE}(bytea, integer)")
        _forget(conn)


def _literal(vector: Sequence[float] | np.ndarray) -> str:
    values = np.asarray(vector, dtype=np.float32)
    if not np.isfinite(values).all():
        raise ValueError("a query vector must be finite")
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def facts_semantic_candidates(
    organization_id: int, query_vector: Sequence[float] | np.ndarray | None, limit: int
) -> list[int]:
    """Ids of the organization's current facts (valid heads of their chains) nearest to
    ``query_vector`` by cosine, nearest first, at most ``limit``: one query through the
    HNSW index. ``[]`` where there is no index (SQLite, PostgreSQL without pgvector), for
    a vector of another dimension than the column's, or for no vector. Scope and read
    rules are the caller's: these are candidates, not what a context may show."""
    if query_vector is None or limit <= 0:
        return []
    dim = _column_dim(connection)
    if not dim or len(query_vector) != dim or not np.any(np.asarray(query_vector)):
        return []
    # One round trip: the settings apply to the SELECT that follows them (a multi-statement
    # query runs in one transaction). Iterative scans (pgvector 0.8) keep visiting the index
    # until ``limit`` facts of this organization are found; older versions ignore them.
    sql = (
        f"SET LOCAL hnsw.ef_search = {max(MIN_EF_SEARCH, min(int(limit), 1000))};"
        " SET LOCAL hnsw.iterative_scan = relaxed_order;"
        f" SELECT id FROM {TABLE} WHERE organization_id = {int(organization_id)} AND is_valid"
        f" AND {COLUMN} IS NOT NULL ORDER BY {COLUMN} <=> '{_literal(query_vector)}'::vector"
        f" LIMIT {int(limit)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        while cursor.description is None and cursor.nextset():
            pass
        return [row[0] for row in cursor.fetchall()]
