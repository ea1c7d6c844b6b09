"""Full-text search of facts on PostgreSQL only (elsewhere facts are ranked with LIKE).

A stored, generated ``search_tsv`` column with a GIN index: ranking reads the stored
vector instead of computing ``to_tsvector`` for every candidate row. The model does not
declare the column (it does not exist on SQLite); ``facts.selectors`` reads it by name.
"""

from django.db import migrations

from contextops.postgres import postgresql_only

CREATE = [
    "ALTER TABLE facts_fact ADD COLUMN IF NOT EXISTS search_tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, COALESCE(search_text, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS fact_search_tsv ON facts_fact USING GIN (search_tsv)",
]
DROP = [
    "DROP INDEX IF EXISTS fact_search_tsv",
    "ALTER TABLE facts_fact DROP COLUMN IF EXISTS search_tsv",
]


class Migration(migrations.Migration):
    dependencies = [("facts", "0001_facts_initial")]
    operations = [postgresql_only(CREATE, DROP)]
