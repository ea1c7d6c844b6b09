"""A context pack's record keeps what it included and dropped as zlib-compressed JSON in
a binary column (``CompressedJSONField``): PostgreSQL no longer parses some hundred
kilobytes into ``jsonb`` per pack. The JSON already there is kept as its text, which the
field reads back as it reads its own. ``dropped_runs`` becomes ``dropped_stored``: new
records keep items, not runs (the column is still ``dropped``).
"""

import orjson
from django.db import migrations

import frames.models.context


def _field_pair(apps, name: str):
    """(model, field as it was, field as it becomes), the model as before the step."""
    model = apps.get_model("frames", "ContextPackRecord")
    old = model._meta.get_field(name)
    new = frames.models.context.CompressedJSONField(default=list, db_column=old.column)
    new.set_attributes_from_name(name)
    new.model = model
    return model, old, new


def _forward(name: str):
    def forward(apps, schema_editor):
        model, old, new = _field_pair(apps, name)
        if schema_editor.connection.vendor != "postgresql":
            schema_editor.alter_field(model, old, new)  # the table remade, each value copied
            return
        column = old.column
        schema_editor.execute(
            f"ALTER TABLE {model._meta.db_table} ALTER COLUMN {column} TYPE bytea"
            f" USING convert_to({column}::text, 'UTF8'), ALTER COLUMN {column} SET STORAGE EXTERNAL"
        )

    return forward


def _backward(name: str):
    """Compressed values cannot be opened in SQL: they are read here, the column turned
    back to JSON holding ``[]``, and the values written back as JSON text."""

    def backward(apps, schema_editor):
        model, old, new = _field_pair(apps, name)
        table, column = model._meta.db_table, old.column
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f"SELECT id, {column} FROM {table}")
            rows = [
                (pk, frames.models.context.json_decompressed(value))
                for pk, value in cursor.fetchall()
            ]
        if schema_editor.connection.vendor == "postgresql":
            # The rows the step before wrote back leave deferred checks pending, and a
            # table with pending checks cannot be altered: they are run now.
            schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            schema_editor.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} SET STORAGE EXTENDED,"
                f" ALTER COLUMN {column} TYPE jsonb USING '[]'::jsonb"
            )
        else:  # the remade table's JSON check must pass the values it copies
            with schema_editor.connection.cursor() as cursor:
                cursor.execute(f"UPDATE {table} SET {column} = '[]'")
            schema_editor.alter_field(model, new, old)
        with schema_editor.connection.cursor() as cursor:
            for pk, value in rows:
                cursor.execute(
                    f"UPDATE {table} SET {column} = %s WHERE id = %s",
                    [orjson.dumps(value).decode(), pk],
                )

    return backward


def _compressed(name: str, **options) -> migrations.SeparateDatabaseAndState:
    """One column at a time: SQLite remakes the table from the model as the step finds it."""
    return migrations.SeparateDatabaseAndState(
        database_operations=[migrations.RunPython(_forward(name), _backward(name))],
        state_operations=[
            migrations.AlterField(
                model_name="contextpackrecord",
                name=name,
                field=frames.models.context.CompressedJSONField(default=list, **options),
            )
        ],
    )


class Migration(migrations.Migration):
    dependencies = [("frames", "0019_pack_record_json_by_orjson")]

    operations = [
        _compressed("included"),
        _compressed("dropped_runs", db_column="dropped"),
        migrations.RenameField(
            model_name="contextpackrecord", old_name="dropped_runs", new_name="dropped_stored"
        ),
    ]
