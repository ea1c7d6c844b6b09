"""PostgreSQL only: the statements ``usage_record`` runs on its hottest path, written
once per process and executed without the ORM (the charge that takes the session's lock,
the read after it, and the usage row, frame charge and event as one statement)."""

import functools
import json
import uuid
from typing import Any

from django.db import connection
from django.utils import timezone

from contextops.rows import columns, from_rows

from ..models import Event, Frame, Session, Usage
from ..selectors import stack_order_sql

_SESSION_TOTALS = (
    ("input_tokens_total", "input_tokens"),
    ("output_tokens_total", "output_tokens"),
    ("cache_creation_tokens_total", "cache_creation_input_tokens"),
    ("cache_read_tokens_total", "cache_read_input_tokens"),
)


@functools.cache
def _usage_charge_sql(by_session: bool, scoped: bool, replay: bool) -> tuple[str, str]:
    """PostgreSQL: the charge of one call to its session's totals (the statement that takes
    the session's lock) and the read after it (the frame with its session, the top of the
    stack and, with ``replay``, the session's record of the same message), written once
    per process: what ``usage_record`` asks the ORM for elsewhere, without compiling it on
    every call."""
    qn = connection.ops.quote_name
    session_table, frame_table = qn(Session._meta.db_table), qn(Frame._meta.db_table)
    sets = ", ".join(f"{qn(total)} = {qn(total)} + %s" for total, _ in _SESSION_TOTALS)
    charge = (
        f'UPDATE {session_table} SET {sets}, "api_calls_total" = "api_calls_total" + 1,'
        ' "last_event_seq" = "last_event_seq" + 1, "updated_at" = %s'
        ' WHERE "lifecycle_state" <> %s AND "id" = '
    )
    if by_session:
        charge += "%s"
    else:
        charge += f'(SELECT "session_id" FROM {frame_table} WHERE "id" = %s' + (
            ' AND "organization_id" = %s)' if scoped else ")"
        )

    def top(status: str) -> str:
        return (
            f'(SELECT t."id" FROM {frame_table} t WHERE t."session_id" = f."session_id"'
            f' AND t."status" {status} ORDER BY {stack_order_sql("t")} LIMIT 1)'
        )

    replayed = (
        f'(SELECT u."id" FROM {qn(Usage._meta.db_table)} u WHERE u."session_id" = f."session_id"'
        ' AND u."message_id" = %s ORDER BY u."created_at", u."id" LIMIT 1)'
        if replay
        else "NULL"
    )
    read = (
        f"SELECT {columns(Frame, 'f')}, {columns(Session, 's')},"
        f" COALESCE({top('= %s')}, {top('= ANY(%s)')}), {replayed}"
        f' FROM {frame_table} f JOIN {session_table} s ON s."id" = f."session_id"'
        ' WHERE f."id" = %s' + (' AND f."organization_id" = %s' if scoped else "")
    )
    return charge, read


def usage_charge_and_read(
    counts: dict[str, int],
    *,
    session_pk: Any,
    frame_pk: uuid.UUID,
    organization: Any,
    message_id: str,
) -> tuple[int, Frame | None]:
    """PostgreSQL: charge one call (``counts``) to the session's totals, then read the frame
    (``frame_pk``, in ``organization`` when given) with its session, ``top_id`` and
    ``replayed_id`` annotated; return how many sessions the charge matched (0: ended, or
    no such frame) and the frame (None when there is none)."""
    charge, read = _usage_charge_sql(
        session_pk is not None, organization is not None, bool(message_id)
    )
    scope = [organization.pk] if organization is not None else []
    params: list[Any] = [counts[name] for _, name in _SESSION_TOTALS]
    params += [timezone.now(), Session.Lifecycle.ENDED]
    params += [session_pk] if session_pk is not None else [frame_pk, *scope]
    read_params: list[Any] = [Frame.Status.ACTIVE, list(Frame.OPEN_STATUSES)]
    read_params += [message_id] if message_id else []
    read_params += [frame_pk, *scope]
    with connection.cursor() as cursor:
        cursor.execute(charge, params)
        charged = cursor.rowcount
        cursor.execute(read, read_params)
        row = cursor.fetchone()
    if row is None:
        return charged, None
    *row, top_id, replayed_id = row
    frame, session = from_rows(row, Frame, Session)
    vars(frame).update(top_id=top_id, replayed_id=replayed_id)
    frame.session = session
    if organization is not None:
        session.organization = frame.organization = organization
    return charged, frame


def usage_charge_in_one_statement(usage: Usage, event: Event, *, spent: int) -> None:
    """PostgreSQL: store ``usage``, charge its frame (``spent`` more used, the occupancy and
    pressure level already set on ``usage.frame``) and append ``event`` with the record's id
    in its payload, as one statement (data-modifying WITHs): one round trip instead of
    three, and no ORM compilation on the hottest write."""
    assert usage.frame is not None
    qn = connection.ops.quote_name
    usage_columns = [
        "session_id",
        "frame_id",
        "model",
        "message_id",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "started_at",
        "latency_ms",
        "created_at",
    ]
    usage.created_at = event.created_at = timezone.now()
    sql = (
        f"WITH stored AS (INSERT INTO {qn(Usage._meta.db_table)}"
        f" ({', '.join(qn(c) for c in usage_columns)})"
        f" VALUES ({', '.join(['%s'] * len(usage_columns))}) RETURNING id),"
        f" charged AS (UPDATE {qn(Frame._meta.db_table)} SET"
        ' "budget_used" = "budget_used" + %s, "last_occupancy_tokens" = %s,'
        ' "pressure_level" = %s WHERE "id" = %s)'
        f" INSERT INTO {qn(Event._meta.db_table)}"
        ' ("session_id", "seq", "type", "frame_id", "actor", "payload", "created_at")'
        " SELECT %s, %s, %s, %s, %s, %s::jsonb || jsonb_build_object('usage_id', stored.id), %s"
        " FROM stored RETURNING (payload->>'usage_id')::bigint, id"
    )
    frame = usage.frame
    params = [getattr(usage, column) for column in usage_columns]
    params += [spent, frame.last_occupancy_tokens, frame.pressure_level, frame.pk]
    params += [
        event.session_id,
        event.seq,
        event.type,
        event.frame_id,
        event.actor,
        json.dumps(event.payload),
        event.created_at,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        usage.pk, event.pk = cursor.fetchone()
    event.payload["usage_id"] = usage.pk
    for stored in (usage, event):
        stored._state.adding, stored._state.db = False, connection.alias
