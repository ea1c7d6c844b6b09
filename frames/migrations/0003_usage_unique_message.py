from django.db import migrations, models


def _earlier_records_keep_their_message_id(apps, schema_editor):
    """Records stored before message ids were unique per session: the first keeps its id,
    a later record of the same message keeps its tokens and loses only the id."""
    Usage = apps.get_model("frames", "Usage")
    seen = set()
    repeats = []
    for pk, session_id, message_id in (
        Usage.objects.exclude(message_id="")
        .order_by("created_at", "id")
        .values_list("pk", "session_id", "message_id")
        .iterator()
    ):
        if (session_id, message_id) in seen:
            repeats.append(pk)
        seen.add((session_id, message_id))
    for start in range(0, len(repeats), 500):  # within any database's parameter limit
        Usage.objects.filter(pk__in=repeats[start : start + 500]).update(message_id="")


class Migration(migrations.Migration):
    dependencies = [
        ("frames", "0002_context_pack_record"),
    ]

    operations = [
        migrations.RunPython(_earlier_records_keep_their_message_id, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="usage",
            constraint=models.UniqueConstraint(
                condition=models.Q(("message_id", ""), _negated=True),
                fields=("session", "message_id"),
                name="usage_unique_message",
            ),
        ),
    ]
