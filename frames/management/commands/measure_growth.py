"""How the tables grow: rows, bytes per row and rows per session, measured on this database.

On PostgreSQL a table's bytes are ``pg_total_relation_size`` (rows, indexes and TOAST,
i.e. what the disk holds); on SQLite, where that is not known, sizes are left out. With
``--agent-day`` it multiplies the measured bytes per row by the rows an agent adds in a
day of the given profile (docs/operating.md, "How the tables grow").
"""

import json
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from frames.models import Session

APPS = ("contextops", "frames", "facts", "conversation", "rlm")

# Rows an agent adds per day, per table, in terms of the day's profile (see --agent-day):
# sessions, model calls (usage rows, conversation turns), frames, handles, facts, events.
PER_DAY = {
    "frames_session": "sessions",
    "frames_frame": "frames",
    "frames_usage": "calls",
    "frames_contexthandle": "handles",
    "frames_event": "events",
    "conversation_turn": "calls",
    "conversation_message": "messages",
    "facts_fact": "facts",
    "frames_contextpackrecord": "packs",
    "conversation_tooluse": "tool_uses",
    "rlm_rlmmutation": "rlm_writes",
}


# A heap tuple's header and its line pointer, on top of the data pg_column_size measures.
TUPLE_OVERHEAD = 28
# What indexes add to a row's heap bytes in the agent-day estimate (see docs/operating.md).
INDEX_FACTOR = 2
# Rows sampled to measure a table's average row.
SAMPLE = 5000


def _table_bytes(table: str) -> int | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size(%s)", [table])
        return int(cursor.fetchone()[0])


def _row_bytes(table: str) -> int | None:
    """The average stored row (data, tuple header, line pointer; TOASTed values as stored),
    over up to SAMPLE rows: what one more row adds to the heap, whatever the table's size."""
    if connection.vendor != "postgresql":
        return None
    quoted = connection.ops.quote_name(table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT avg(pg_column_size(t.*)) FROM (SELECT * FROM {quoted} LIMIT %s) t",  # noqa: S608 - a model's table name
            [SAMPLE],
        )
        average = cursor.fetchone()[0]
    return None if average is None else round(float(average)) + TUPLE_OVERHEAD


class Command(BaseCommand):
    help = "Measure rows and bytes per row of every table; with --agent-day, bytes per agent-day."

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print JSON instead of a table."
        )
        parser.add_argument(
            "--agent-day",
            default="",
            help="A day's profile, e.g. sessions=4,calls=400,frames=120,handles=600,facts=40,"
            "messages=1600,tool_uses=400,packs=120,rlm_writes=200,events=1500; "
            "prints bytes per agent-day per table.",
        )

    def handle(self, *args, as_json: bool = False, agent_day: str = "", **options):
        profile = _profile(agent_day)
        sessions = Session.objects.count()
        rows: list[dict[str, Any]] = []
        for model in apps.get_models():
            if model._meta.app_label not in APPS or model._meta.proxy:
                continue
            table = model._meta.db_table
            count = model._default_manager.count()
            size = _table_bytes(table)
            rows.append(
                {
                    "table": table,
                    "rows": count,
                    "bytes": size,
                    "bytes_per_row": round(size / count) if size is not None and count else None,
                    "row_bytes": _row_bytes(table) if count else None,
                    "rows_per_session": round(count / sessions, 1) if sessions else None,
                }
            )
        rows.sort(key=lambda r: -(r["bytes"] or 0))
        total = 0.0
        for row in rows:
            quantity = profile.get(PER_DAY.get(row["table"], ""), 0.0)
            # Heap bytes of a row, doubled for its indexes: a table's measured bytes per row
            # (heap, indexes, TOAST) is that ratio only once it is large; small tables are
            # mostly empty pages.
            per_day = quantity * row["row_bytes"] * INDEX_FACTOR if row["row_bytes"] else None
            row["bytes_per_agent_day"] = round(per_day) if per_day is not None else None
            total += per_day or 0
        if as_json:
            self.stdout.write(
                json.dumps({"sessions": sessions, "tables": rows, "agent_day_bytes": total})
            )
            return
        self.stdout.write(f"{sessions} session(s) on {connection.vendor}")
        self.stdout.write(
            f"{'table':36} {'rows':>10} {'bytes':>14} {'bytes/row':>10} {'row bytes':>10} "
            f"{'rows/session':>13}" + (f" {'bytes/agent-day':>16}" if profile else "")
        )
        for row in rows:
            line = (
                f"{row['table']:36} {row['rows']:>10,} {_n(row['bytes']):>14} "
                f"{_n(row['bytes_per_row']):>10} {_n(row['row_bytes']):>10} "
                f"{_n(row['rows_per_session']):>13}"
            )
            if profile:
                line += f" {_n(row['bytes_per_agent_day']):>16}"
            self.stdout.write(line)
        if profile:
            self.stdout.write(f"total per agent-day: {total / 1024 / 1024:.2f} MiB")


def _profile(text: str) -> dict[str, float]:
    """``name=number,...`` as a dict; CommandError naming what is wrong otherwise."""
    known = set(PER_DAY.values())
    profile = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in known:
            raise CommandError(
                f"--agent-day: unknown quantity {name!r}; known: {', '.join(sorted(known))}."
            )
        try:
            profile[name] = float(value)
        except ValueError:
            raise CommandError(f"--agent-day: {name} needs a number, got {value!r}.") from None
    return profile


def _n(value) -> str:
    if value is None:
        return "-"
    return f"{value:,}"
