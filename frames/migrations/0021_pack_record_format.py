"""A pack's record keeps the format it was rendered in (verbose, dense, ultra_dense), so a
diff can say a pack changed format. Records written before have none: empty, unknown (the
session's pressure then was not kept, so no format can be told for them); the API answers
null for it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("frames", "0020_pack_record_compressed_json")]

    operations = [
        migrations.AddField(
            model_name="contextpackrecord",
            name="format",
            field=models.CharField(
                blank=True,
                default="",
                help_text="verbose, dense or ultra_dense; empty (unknown: the API answers null) "
                "for a pack recorded before formats were kept.",
                max_length=12,
            ),
            preserve_default=False,
        ),
    ]
