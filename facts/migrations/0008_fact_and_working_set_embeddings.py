"""Each fact version and working-set item keeps the vector of its text (float16 bytes,
computed when it is written; NULL until ``manage.py embeddings_backfill`` for rows
written before).

On PostgreSQL where pgvector can be installed, facts also get ``embedding_vector``, a
``vector(dim)`` column PostgreSQL computes from those bytes, with an HNSW index on the
current versions (``facts.vectors``); elsewhere that step does nothing.
"""

from django.db import migrations, models


def vectors_indexed(apps, schema_editor):
    from contextops.embeddings import EmbeddingError, embedding_dim
    from facts.vectors import fact_vectors_sync

    try:
        dim = embedding_dim()
    except EmbeddingError:  # embeddings off, or a hosted model of unknown dimension
        return
    fact_vectors_sync(dim=dim, conn=schema_editor.connection)


def vectors_unindexed(apps, schema_editor):
    from facts.vectors import fact_vectors_drop

    fact_vectors_drop(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ('facts', '0007_fact_governing_subject_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='fact',
            name='embedding',
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='workingsetitem',
            name='embedding',
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.RunPython(vectors_indexed, vectors_unindexed),
    ]
