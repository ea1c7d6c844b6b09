"""Valid time on every fact version: ``valid_from`` and ``valid_until``.

The backfill walks each chain in version order: a version holds from its observation
(else from when it was written), never before the version it superseded, until the next
version starts holding; a withdrawn head held until it was withdrawn; a current head is
open. Proposals, outdated and discarded writes never held: they keep the write time and
stay closed at it.
"""

import itertools

import django.utils.timezone
from django.db import migrations, models

TIMELINE = ("active", "superseded", "invalidated")


def valid_time_backfill(apps, schema_editor):
    Fact = apps.get_model("facts", "Fact")
    rows = Fact.objects.order_by("chain", "version").only(
        "id", "chain", "version", "status", "observed_at", "created_at", "updated_at"
    )
    batch = []
    for _, versions in itertools.groupby(rows.iterator(chunk_size=2000), key=lambda f: f.chain):
        previous = None
        for fact in versions:
            start = fact.observed_at or fact.created_at
            on_timeline = fact.status in TIMELINE
            if previous is not None and on_timeline:
                start = max(start, previous.valid_from)
                previous.valid_until = start
            fact.valid_from, fact.valid_until = start, None
            if fact.status == "invalidated":
                fact.valid_until = max(fact.updated_at, start)
            elif not on_timeline:
                fact.valid_until = start
            else:
                previous = fact
            batch.append(fact)
        if len(batch) >= 2000:
            Fact.objects.bulk_update(batch, ["valid_from", "valid_until"])
            batch = []
    Fact.objects.bulk_update(batch, ["valid_from", "valid_until"])


class Migration(migrations.Migration):

    dependencies = [
        ("facts", "0008_fact_and_working_set_embeddings"),
    ]

    operations = [
        migrations.AddField(
            model_name="fact",
            name="valid_from",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddField(
            model_name="fact",
            name="valid_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(valid_time_backfill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(fields=["chain", "valid_from"], name="fact_chain_valid_from"),
        ),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(fields=["organization", "valid_from"], name="fact_valid_from"),
        ),
        migrations.AddConstraint(
            model_name="fact",
            constraint=models.CheckConstraint(
                condition=models.Q(valid_until__isnull=True)
                | models.Q(valid_until__gte=models.F("valid_from")),
                name="fact_valid_interval_ordered",
            ),
        ),
    ]
