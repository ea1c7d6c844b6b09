"""Prices of the Claude models released since the table was first loaded, as Anthropic
publishes them (per million tokens: input, output, cache write 5 minutes, cache write 1
hour, cache read). A price an admin has already entered is left as it is."""

from importlib import import_module

from django.db import migrations

PRICES = [
    ("anthropic", "claude-opus-4-6", "5", "25", "6.25", "10", "0.50"),
    ("anthropic", "claude-sonnet-4-6", "3", "15", "3.75", "6", "0.30"),
]


def prices_load(apps, schema_editor):
    first = import_module("frames.migrations.0008_dashboard")
    first.prices_put(apps, PRICES, keep_existing=True)


class Migration(migrations.Migration):
    dependencies = [
        ("frames", "0013_frame_failure_reason_in_words"),
    ]

    operations = [
        migrations.RunPython(prices_load, migrations.RunPython.noop),
    ]
