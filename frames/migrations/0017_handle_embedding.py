"""Each handle keeps the vector of its content (of its ref when it has none): float16
bytes computed when the text is written, NULL until ``manage.py embeddings_backfill`` for
handles written before."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('frames', '0016_lifecycle_label_under_pressure'),
    ]

    operations = [
        migrations.AddField(
            model_name='contexthandle',
            name='embedding',
            field=models.BinaryField(blank=True, null=True),
        ),
    ]
