"""A context pack's record keeps what it dropped as runs of alike items (see
``ContextPackRecord``): the model's field is renamed, its column stays ``dropped``, and
records written before keep their items, read back as they are. No change to the table."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("frames", "0014_prices_of_current_claude_models")]
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RenameField(
                    model_name="contextpackrecord", old_name="dropped", new_name="dropped_runs"
                ),
                migrations.AlterField(
                    model_name="contextpackrecord",
                    name="dropped_runs",
                    field=models.JSONField(db_column="dropped", default=list),
                ),
            ]
        )
    ]
