"""Ranking facts for a context pack without scoring every match (PostgreSQL only).

A word found in half of the facts or more (``english`` lexemes, by the share PostgreSQL's
own statistics give the stored ``search_tsv`` column, refreshed by ANALYZE) narrows
nothing: like a stop word, it orders facts but does not select them, as MySQL's
natural-language full-text search treats a word in half the rows. ``facts_for_context``
ranks with ``ts_rank`` only the facts matching the query's other words (a few, found
through the GIN index), then takes the newest facts matching any word, then the newest
others, through an index in that order: a query of common words no longer scores every
fact of the organization.

- ``contextops_fact_narrowing(terms)``: the query terms whose words are not that common,
  as one ``tsquery`` (NULL when none is). PL/pgSQL, so each connection plans its read of
  ``pg_stats`` once.
- ``fact_current_newest``: the organization's current facts, constraints first, newest
  first (the order of the ranking's fill).
"""

from django.db import migrations

from contextops.postgres import postgresql_only

# A word in at least this share of the facts does not narrow a context pack's ranking.
COMMON_SHARE = 0.5

CREATE = [
    f"""
CREATE OR REPLACE FUNCTION contextops_fact_narrowing(terms text[]) RETURNS tsquery
LANGUAGE plpgsql STABLE AS $$
DECLARE
  common text[];
  result tsquery;
  term text;
  words tsquery;
BEGIN
  SELECT coalesce(array_agg(u.lexeme), '{{}}') INTO common
  FROM pg_stats s,
       unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS u(lexeme, share)
  WHERE s.schemaname = current_schema() AND s.tablename = 'facts_fact'
    AND s.attname = 'search_tsv' AND u.lexeme IS NOT NULL AND u.share >= {COMMON_SHARE};
  FOREACH term IN ARRAY terms LOOP
    words := plainto_tsquery('english'::regconfig, term);
    IF numnode(words) > 0
       AND NOT (tsvector_to_array(to_tsvector('english'::regconfig, term)) <@ common) THEN
      result := CASE WHEN result IS NULL THEN words ELSE result || words END;
    END IF;
  END LOOP;
  RETURN result;
END $$
""",
    "CREATE INDEX IF NOT EXISTS fact_current_newest ON facts_fact"
    " (organization_id, is_constraint DESC, created_at DESC, id DESC) WHERE is_valid",
]
DROP = [
    "DROP INDEX IF EXISTS fact_current_newest",
    "DROP FUNCTION IF EXISTS contextops_fact_narrowing(text[])",
]


class Migration(migrations.Migration):
    dependencies = [("facts", "0005_fact_edit_policy_permission")]
    operations = [postgresql_only(CREATE, DROP)]
