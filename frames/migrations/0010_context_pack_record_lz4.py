"""A context pack's record keeps what it included and dropped: on a frame of a thousand
handles that is some 170 KB of JSON a pack. On PostgreSQL those columns are compressed
with lz4 where the server has it, which stores them in about three quarters of the time
pglz (the default) takes, at the same size, and reads them back faster.
"""

from django.db import migrations

COLUMNS = ("breakdown", "included", "dropped")


def _compression(schema_editor, method: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'",
            [method],
        )
        row = cursor.fetchone()
    if not row or not row[0]:
        return  # a server built without lz4 keeps pglz
    for column in COLUMNS:
        schema_editor.execute(
            f"ALTER TABLE frames_contextpackrecord ALTER COLUMN {column} SET COMPRESSION {method}"
        )


def lz4(apps, schema_editor):
    _compression(schema_editor, "lz4")


def pglz(apps, schema_editor):
    _compression(schema_editor, "pglz")


class Migration(migrations.Migration):
    dependencies = [("frames", "0009_handle_page_out_requested")]
    operations = [migrations.RunPython(lz4, pglz)]
