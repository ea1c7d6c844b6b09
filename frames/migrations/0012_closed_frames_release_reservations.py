"""Frames closed before a pop released reservations still hold them: release them, as
every pop now does and as the event-log replay does for every frame.popped."""

from django.db import migrations

OPEN = ("active", "waiting", "suspended")


def release(apps, schema_editor):
    Frame = apps.get_model("frames", "Frame")
    closed = Frame.objects.exclude(status__in=OPEN)
    closed.exclude(budget_reserved=0).update(budget_reserved=0, reservations={})
    closed.exclude(reservations={}).update(reservations={})


class Migration(migrations.Migration):
    dependencies = [("frames", "0011_model_price_not_negative")]

    operations = [migrations.RunPython(release, migrations.RunPython.noop)]
