"""Full-text search of facts on PostgreSQL only (elsewhere facts are ranked with LIKE).

A stored, generated ``search_tsv`` column with a GIN index: ranking reads the stored
vector instead of computing ``to_tsvector`` for every candidate row. The model does not
declare the column (it does not exist on SQLite); ``facts.selectors`` reads it by name.
"""

from django.db import migrations

CREATE = [
    "ALTER TABLE facts_fact ADD COLUMN IF NOT EXISTS search_tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, COALESCE(search_text, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS fact_search_tsv ON facts_fact USING GIN (search_tsv)",
]
DROP = [
    "DROP INDEX IF EXISTS fact_search_tsv",
    "ALTER TABLE facts_fact DROP COLUMN IF EXISTS search_tsv",
]


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in CREATE:
            schema_editor.execute(statement)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("facts", "0001_facts_initial")]
    operations = [migrations.RunPython(create, drop)]
