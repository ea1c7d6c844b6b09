"""The session lock: the one way a write of a session begins.

Every write of a session (frames, usage, handles, facts of its working set, turns, RLM
states) locks the session row first, then the rows it changes, parents before children.
One session's writes therefore serialize on its row, which keeps budget arithmetic exact
when many agents write at once and never deadlocks (one order everywhere); on SQLite the
IMMEDIATE transaction mode gives the same guarantee for the whole database.

Every row lock on PostgreSQL is FOR NO KEY UPDATE: writers still serialize on it, but a
row that refers to a locked one (a stored context pack to its session and frame) checks
its reference with a key-share lock, which that does not block. With FOR UPDATE such an
insert took its frame's key share, then waited on the session a writer held, while the
writer waited on the frame: a deadlock.
"""

import functools
import uuid
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef

from contextops.errors import Conflict, NotFound
from contextops.ids import parse_id, uuid_or_none
from contextops.rows import columns, from_row, from_rows

from .models import Frame, Session

SESSION_ENDED_DETAIL = "This session has ended; start a new one."


def session_require_not_ended(session: Session) -> None:
    """Conflict ``session_ended`` once the session has ended: it takes no more work."""
    if session.lifecycle_state == Session.Lifecycle.ENDED:
        raise Conflict("session_ended", SESSION_ENDED_DETAIL)


def session_lock(
    session: Session | Any, *, open_only: bool = True, organization: Any = None
) -> Session:
    """Lock the session row (a ``Session`` or its primary key) inside the caller's
    transaction and return it fresh; with ``open_only`` (the default) require it not ended.

    With ``organization``, a session of another organization (or an id that is not one)
    is NotFound, as its read would be: the lock is the request's first read of it.
    """
    if organization is None:
        pk = session.pk if isinstance(session, Session) else session
        locked = Session.objects.select_for_update(no_key=True).get(pk=pk)
    else:
        pk = parse_id(session, "No such session.")
        try:
            locked = Session.objects.select_for_update(no_key=True).get(
                pk=pk, organization=organization
            )
        except Session.DoesNotExist:
            raise NotFound("No such session.") from None
        locked.organization = organization  # the one it was found in: no query to read it
    if open_only:
        session_require_not_ended(locked)
    return locked


def frame_session_lock(frame: Frame | Any, *, organization: Any = None) -> tuple[Session, Frame]:
    """Lock the session of a frame (a ``Frame`` or its primary key) from the frame's id
    alone, in one statement; return the session, fresh, and the frame as read before the
    lock: only its ids (its parent's included) are to be trusted, the rest may have moved.

    With ``organization``, a frame of another organization (or an id that is not one) is
    NotFound, as its read would be.
    """
    pk = parse_id(frame, "No such frame.")
    scope = {} if organization is None else {"organization": organization}
    try:
        # Only the session's row is locked: PostgreSQL hands back its newest version.
        found = (
            Frame.objects.select_related("session")
            .select_for_update(no_key=True, of=("session",))
            .get(pk=pk, **scope)
        )
    except Frame.DoesNotExist:
        raise NotFound("No such frame.") from None
    return found.session, found


def frame_lock(frame: Frame | Any, *, organization: Any = None) -> Frame:
    """Lock a frame row (a ``Frame`` or its primary key); take its session's lock first.

    With ``organization``, a frame of another organization (or an id that is not one) is
    NotFound, as its read would be.
    """
    if organization is None:
        pk = frame.pk if isinstance(frame, Frame) else frame
        return Frame.objects.select_for_update(no_key=True).get(pk=pk)
    pk = parse_id(frame, "No such frame.")
    try:
        return Frame.objects.select_for_update(no_key=True).get(pk=pk, organization=organization)
    except Frame.DoesNotExist:
        raise NotFound("No such frame.") from None


def session_and_frame_lock(
    session: Session | Any, frame: Frame | Any, *, organization: Any = None
) -> tuple[Session, Frame]:
    """``session_lock(session, open_only=False)`` then ``frame_lock(frame)``: the session
    (a ``Session`` or its primary key) and a frame (one or its primary key, of any session:
    the caller checks), both locked and fresh, the session's lock taken first.

    One statement on PostgreSQL when both are found (in ``organization``, when given);
    otherwise the two locks one after the other, which raise NotFound for the session
    before the frame, as they would alone.
    """
    if connection.vendor == "postgresql":
        session_pk = uuid_or_none(session)
        frame_pk = uuid_or_none(frame)
        if session_pk is not None and frame_pk is not None:
            locked = _session_and_frame_lock_in_one_statement(session_pk, frame_pk, organization)
            if locked is not None:
                return locked
    return (
        session_lock(session, open_only=False, organization=organization),
        frame_lock(frame, organization=organization),
    )


def _session_and_frame_lock_in_one_statement(
    session_pk: uuid.UUID, frame_pk: uuid.UUID, organization: Any
) -> tuple[Session, Frame] | None:
    """PostgreSQL: both rows locked by one statement, the session's first (the order FOR
    NO KEY UPDATE OF names them); None, with nothing locked, when either is missing.

    Each locked row is handed back in its newest version, even when the statement waited
    for its lock: the statement reads nothing else."""
    scoped = organization is not None
    params: list[Any] = [session_pk, frame_pk]
    if scoped:
        params += [organization.pk, organization.pk]
    with connection.cursor() as cursor:
        cursor.execute(_session_and_frame_lock_sql(scoped), params)
        row = cursor.fetchone()
    if row is None:
        return None
    session, frame = from_rows(row, Session, Frame)
    if scoped:
        session.organization = frame.organization = organization
    return session, frame


@functools.cache
def _session_and_frame_lock_sql(scoped: bool) -> str:
    qn = connection.ops.quote_name
    sql = (
        f"SELECT {columns(Session, 's')}, {columns(Frame, 'f')}"
        f" FROM {qn(Session._meta.db_table)} s, {qn(Frame._meta.db_table)} f"
        ' WHERE s."id" = %s AND f."id" = %s'
    )
    if scoped:
        sql += ' AND s."organization_id" = %s AND f."organization_id" = %s'
    return sql + " FOR NO KEY UPDATE OF s, f"


def frame_close_lock(frame: Frame | Any, *, organization: Any = None) -> tuple[Session, Frame]:
    """Lock the session of a frame (a ``Frame`` or its primary key), then the frame and its
    parent, to close the frame; return the session and the frame, both fresh, the frame
    with its locked parent (when it has one) and what closing it needs to know annotated:
    ``open_children`` (its own) and ``open_siblings`` (its parent's other open children).

    With ``organization``, a frame of another organization (or an id that is not one) is
    NotFound, as its read would be. One statement on PostgreSQL, two elsewhere.
    """
    if connection.vendor == "postgresql":
        pk = uuid_or_none(frame)
        locked = None if pk is None else _frame_close_lock_in_one_statement(pk, organization)
        if locked is None:
            raise NotFound("No such frame.")
        return locked
    session, found = frame_session_lock(frame, organization=organization)
    return session, _frame_lock_annotated(found)


def _frame_lock_annotated(frame: Frame) -> Frame:
    """Lock ``frame`` and its parent in one statement, after its session's lock, with
    ``open_children`` and ``open_siblings`` annotated; return it, its parent cached.

    The session's lock is held, so no other writer changes the session's frames while
    this reads them: what it annotates stays true until the commit.
    """
    open_frames = Frame.objects.filter(status__in=Frame.OPEN_STATUSES)
    rows = Frame.objects.filter(pk=frame.pk).annotate(
        open_children=Exists(open_frames.filter(parent_id=OuterRef("pk"))),
        open_siblings=Exists(
            open_frames.filter(parent_id=OuterRef("parent_id")).exclude(pk=OuterRef("pk"))
        ),
    )
    if frame.parent_id is None:
        return rows.select_for_update(no_key=True).get()
    # An inner join (the parent exists), so both rows can be locked by the one statement.
    return (
        rows.filter(parent__depth__gte=0)
        .select_related("parent")
        .select_for_update(no_key=True, of=("self", "parent"))
        .get()
    )


def _frame_close_lock_in_one_statement(
    pk: uuid.UUID, organization: Any
) -> tuple[Session, Frame] | None:
    """PostgreSQL: ``frame_session_lock`` and ``_frame_lock_annotated`` as one statement;
    None when there is no such frame (in ``organization``, when given).

    A root frame joins itself as its parent, so every join is inner and every row can be
    locked. The rows are locked in the order FOR NO KEY UPDATE OF names them, the session
    first.
    One statement reads with one snapshot, taken before it waits for the session's lock:
    when another writer moved the session's log on meanwhile, the frames it reads beside
    the locked rows may be old, and they are read again, under the lock.
    """
    qn = connection.ops.quote_name
    session_table, frame_table = qn(Session._meta.db_table), qn(Frame._meta.db_table)
    open_statuses = list(Frame.OPEN_STATUSES)
    sql = (
        f"SELECT {columns(Session, 's')}, {columns(Frame, 'f')}, {columns(Frame, 'p')},"
        f" EXISTS (SELECT 1 FROM {frame_table} c"
        '  WHERE c."parent_id" = f."id" AND c."status" = ANY(%s)),'
        f" EXISTS (SELECT 1 FROM {frame_table} c"
        '  WHERE c."parent_id" = f."parent_id" AND c."id" <> f."id" AND c."status" = ANY(%s)),'
        f' s."last_event_seq" <> (SELECT x."last_event_seq" FROM {session_table} x'
        '  WHERE x."id" = s."id")'
        f" FROM {session_table} s"
        f' JOIN {frame_table} f ON f."session_id" = s."id"'
        f' JOIN {frame_table} p ON p."id" = COALESCE(f."parent_id", f."id")'
        ' WHERE f."id" = %s'
    )
    params: list[Any] = [open_statuses, open_statuses, pk]
    if organization is not None:
        sql += ' AND f."organization_id" = %s'
        params.append(organization.pk)
    sql += " FOR NO KEY UPDATE OF s, p, f"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    *row, open_children, open_siblings, log_moved = row
    session, frame = from_rows(row, Session, Frame)
    if log_moved:
        frame = _frame_lock_annotated(frame)  # under contention only: its rows are held
    else:
        vars(frame).update(open_children=open_children, open_siblings=open_siblings)
        if frame.parent_id is not None:
            frame.parent = from_row(Frame, row[-len(Frame._meta.concrete_fields) :])
    frame.session = session
    if organization is not None:
        session.organization = frame.organization = organization
    return session, frame
