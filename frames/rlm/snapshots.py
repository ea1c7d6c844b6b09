"""A state's history: the locked write every change goes through, the mutation log and
what keeps it bounded, snapshots, checkpoints and rollback.

Every write runs in one transaction that first locks the state row (``state_lock``), so
concurrent writers to one state queue and every mutation gets its own ``mut-`` number
from ``RlmState.mutation_total``; none is lost. When the state belongs to a session, the
matching event is appended in the same transaction (``state_event_append``).

When the log already holds ``max_history_entries`` mutations, the oldest tenth is
folded into a ``history_fold`` checkpoint (which keeps those entries and a full snapshot)
before the next one is logged. At ``max_checkpoints`` a fold merges into the latest fold
checkpoint; with no fold checkpoint to merge into, the write is refused (409
``history_full``) rather than dropping history.

A checkpoint is a position in the log: every mutation keeps, in ``before``, the row of
each variable it changed as it was just before (null when the variable did not exist),
so the state at a position is the current one with every later mutation undone, the
earliest pre-image of each name winning. The checkpoint itself keeps only what the log
does not: the completion status and the non-zero access counts (reads are not logged).
Taking one costs the same for ten variables or a thousand; a rollback writes only the
variables changed since. Before the log folds mutations a positional checkpoint still
needs, the checkpoint gets its full snapshot, so it stays exact.

A snapshot is ``{completion_status, completed_at, variables: [row, ...]}``, one row per
variable (``variable_snapshot``) by name; a folded mutation is kept as a row too
(``mutation_row``). Temporary variables past their TTL are deleted, each with a logged
``delete`` (source ``ttl_expired``), before a write looks at the state
(``state_expired_purge``).
"""

import functools
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Case, F, Func, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models import Field as DbField
from django.db.models.sql import InsertQuery, UpdateQuery
from django.utils import timezone

from contextops.audit import audit_person_act
from contextops.errors import Conflict, Invalid, NotFound
from contextops.models import AuditEntry
from frames.events import event_append

from .models import RlmCheckpoint, RlmMutation, RlmState, RlmVariable
from .selectors import StateView, state_view
from .values import MAX_CHECKPOINTS, MAX_HISTORY_ENTRIES, MAX_MUTATION_SEQ

SNAPSHOT_FIELDS = (
    "name",
    "type",
    "value",
    "file_name",
    "size_bytes",
    "description",
    "source",
    "read_only",
    "scope",
    "ttl_seconds",
    "expires_at",
    "access_count",
    "extra_metadata",
    "created_at",
    "updated_at",
)
DATETIME_FIELDS = ("expires_at", "created_at", "updated_at")


# --- rows -----------------------------------------------------------------------------


def variable_snapshot(variable: RlmVariable) -> dict[str, Any]:
    """The variable as a checkpoint records it: its fields, times in ISO 8601."""
    row = {field: getattr(variable, field) for field in SNAPSHOT_FIELDS}
    for field in DATETIME_FIELDS:
        row[field] = row[field].isoformat() if row[field] else None
    return row


def variable_from_snapshot(state: RlmState, row: dict[str, Any]) -> RlmVariable:
    """A snapshot row as the (unsaved) variable of ``state`` it was."""
    fields = dict(row)
    for field in DATETIME_FIELDS:
        fields[field] = datetime.fromisoformat(fields[field]) if fields[field] else None
    return RlmVariable(state=state, **fields)


def state_snapshot(
    state: RlmState, undo: dict[str, dict[str, Any] | None] | None = None
) -> dict[str, Any]:
    """The state as a checkpoint records it: completion and every variable row, by name;
    with ``undo`` (pre-images by name, None for a row that did not exist) those rows as
    they were."""
    rows = _undone({v.name: variable_snapshot(v) for v in state.variables.all()}, undo or {})
    return {
        "completion_status": state.completion_status,
        "completed_at": state.completed_at.isoformat() if state.completed_at else None,
        "variables": [rows[name] for name in sorted(rows)],
    }


def mutation_row(mutation: RlmMutation) -> dict[str, Any]:
    """The mutation as a checkpoint's ``folded_mutations`` keeps it."""
    return {
        "seq": mutation.seq,
        "mutation_id": mutation.mutation_id,
        "operation": mutation.operation,
        "variable_name": mutation.variable_name,
        "old_value": mutation.old_value,
        "old_file": mutation.old_file,
        "new_value": mutation.new_value,
        "new_file": mutation.new_file,
        "source": mutation.source,
        "metadata": mutation.metadata,
        "timestamp": mutation.timestamp.isoformat(),
    }


def mutation_from_folded(row: dict[str, Any]) -> RlmMutation:
    """An entry of a checkpoint's ``folded_mutations`` as the (unsaved) mutation it was."""
    return RlmMutation(**{**row, "timestamp": datetime.fromisoformat(row["timestamp"])})


def state_position(state: RlmState, access_counts: dict[str, int] | None = None) -> dict[str, Any]:
    """What a positional checkpoint of ``state`` keeps besides its place in the log: the
    completion and the access counts that are not zero (reads are not logged), read
    here unless the caller has just read them."""
    if access_counts is None:
        access_counts = dict(
            state.variables.filter(access_count__gt=0).values_list("name", "access_count")
        )
    return {
        "completion_status": state.completion_status,
        "completed_at": state.completed_at.isoformat() if state.completed_at else None,
        "access_counts": access_counts,
    }


def _undo_rows(befores: list[Any]) -> dict[str, dict[str, Any] | None] | None:
    """The row each name had before the first of ``befores`` (pre-images, oldest first)
    that changed it; None when one of them has no pre-image (it came with an import)."""
    rows: dict[str, dict[str, Any] | None] = {}
    for before in befores:
        if before is None:
            return None
        for name, row in before.items():
            rows.setdefault(name, row)
    return rows


def _undone(
    rows: dict[str, dict[str, Any]], undo: dict[str, dict[str, Any] | None]
) -> dict[str, dict[str, Any]]:
    """``rows`` (changed in place) with each name in ``undo`` put back as it was: its
    pre-image, or gone when it had none."""
    for name, row in undo.items():
        if row is None:
            rows.pop(name, None)
        else:
            rows[name] = row
    return rows


def _snapshot_at(
    current: dict[str, dict[str, Any]], befores: list[Any], position: dict[str, Any]
) -> dict[str, Any] | None:
    """The snapshot of a positional checkpoint: ``current`` rows with ``befores`` (every
    later mutation's pre-images, oldest first) undone and its access counts put back."""
    undo = _undo_rows(befores)
    if undo is None:
        return None
    rows = _undone(dict(current), undo)
    counts = position["access_counts"]
    return {
        "completion_status": position["completion_status"],
        "completed_at": position["completed_at"],
        "variables": [{**rows[name], "access_count": counts.get(name, 0)} for name in sorted(rows)],
    }


def checkpoint_snapshots(
    state: RlmState,
    checkpoints: list[RlmCheckpoint],
    pending: dict[str, dict[str, Any] | None] | None = None,
) -> dict[int, dict[str, Any] | None]:
    """Each checkpoint's full snapshot by primary key: the stored one, or for a positional
    checkpoint the state at its position; None for one that has neither. Reads the
    variables and the log once, however many checkpoints are positional.

    ``pending`` holds the pre-images of a mutation whose rows are already written but
    which is not logged yet (the write that is folding the log): undone after every
    logged one."""
    snapshots = {c.pk: c.snapshot for c in checkpoints}
    positional = [c for c in checkpoints if c.snapshot is None and c.position is not None]
    if not positional:
        return snapshots
    current = {v.name: variable_snapshot(v) for v in state.variables.all()}
    log = list(
        state.mutations.filter(seq__gt=min(c.mutation_seq for c in positional))
        .order_by("seq")
        .values_list("seq", "before")
    )
    unlogged = [pending] if pending is not None else []
    for checkpoint in positional:
        snapshots[checkpoint.pk] = _snapshot_at(
            current,
            [before for seq, before in log if seq > checkpoint.mutation_seq] + unlogged,
            checkpoint.position or {},
        )
    return snapshots


def _positions_materialize(
    state: RlmState, *, folding_through: int, pending: dict[str, dict[str, Any] | None]
) -> None:
    """Store the full snapshot of every positional checkpoint that needs a mutation up to
    seq ``folding_through``, before the log folds those mutations away; one whose later
    history came with an import (no pre-images) is no longer restorable. ``pending`` as
    ``checkpoint_snapshots`` takes it."""
    needing = list(
        state.checkpoints.filter(
            snapshot__isnull=True, position__isnull=False, mutation_seq__lt=folding_through
        )
    )
    for checkpoint_pk, snapshot in checkpoint_snapshots(state, needing, pending).items():
        stored = {"snapshot": snapshot} if snapshot is not None else {"position": None}
        RlmCheckpoint.objects.filter(pk=checkpoint_pk).update(**stored)


def checkpoint_id_new(state: RlmState) -> str:
    """A ``ckpt-`` id no checkpoint of ``state`` has yet."""
    return _id_not_in(set(state.checkpoints.values_list("checkpoint_id", flat=True)))


def _id_not_in(taken: set[str]) -> str:
    while True:
        candidate = f"ckpt-{secrets.token_hex(4)}"
        if candidate not in taken:
            return candidate


# --- the locked write -------------------------------------------------------------------
# Each of these runs inside the caller's transaction, on a state ``state_lock`` returned.


def state_lock(state: RlmState) -> RlmState:
    """Lock the state row inside the caller's transaction; return it fresh, session and
    frame loaded.

    A state's session and frame never change once it exists, so a loaded ``state`` tells
    which of them to join: one with neither (most states) locks its row alone, which
    spares building the joins, the larger part of the query's cost. A bare copy
    (``RlmState(pk=...)``) joins both, as it cannot tell."""
    related = [
        name
        for name, known in (("session", state.session_id), ("frame", state.frame_id))
        if known is not None or state._state.adding
    ]
    locked = RlmState.objects.select_for_update(no_key=True, of=("self",))
    if related:
        locked = locked.select_related(*related)
    return locked.get(pk=state.pk)


def state_event_append(state: RlmState, type_: str, actor: str, **payload: Any) -> None:
    """Append ``type_`` to the event log of the state's session; nothing without one."""
    session = state.session
    if session is None:
        return
    frame = state.frame
    if frame is not None and frame.session_id != session.pk:
        frame = None
    event_append(
        session=session,
        type=type_,
        frame=frame,
        actor=actor,
        payload={"state_id": state.state_id, **payload},
    )


STATE_SAVE_FIELDS = (
    "mutation_total",
    "history_length",
    "completion_status",
    "completed_at",
    "updated_at",
)


@functools.cache
def _state_save_sql(vendor: str) -> str:
    """The UPDATE of ``state_save`` on ``vendor``'s engine, compiled once by the ORM (its
    parameters in ``STATE_SAVE_FIELDS`` order, then the primary key): every write runs
    it, and building it anew each time cost more than running it."""
    now = timezone.now()  # a placeholder each: None would be compiled as NULL
    query = UpdateQuery(RlmState)
    query.add_update_values(dict(zip(STATE_SAVE_FIELDS, (0, 0, "", now, now), strict=True)))
    query.add_q(Q(pk=0))
    return str(query.get_compiler(connection.alias).as_sql()[0])


def _state_save_params(state: RlmState) -> list[Any]:
    """The parameters of ``_state_save_sql`` for ``state`` as it is in memory."""
    meta = RlmState._meta
    return [
        *(
            cast(DbField, meta.get_field(name)).get_db_prep_save(getattr(state, name), connection)
            for name in STATE_SAVE_FIELDS
        ),
        state.pk,
    ]


def state_save(state: RlmState, now: datetime) -> None:
    """Store the counters and completion a write changed, and when it changed them."""
    state.updated_at = now
    with connection.cursor() as cursor:
        cursor.execute(_state_save_sql(connection.vendor), _state_save_params(state))


def _mutation_insert_saving_state(mutation: RlmMutation, state: RlmState) -> None:
    """PostgreSQL: insert ``mutation`` and run ``state_save``'s UPDATE of ``state`` in one
    statement (the UPDATE in a WITH), one round trip instead of two."""
    meta = RlmMutation._meta
    query = InsertQuery(RlmMutation)
    query.insert_values([f for f in meta.local_concrete_fields if not f.primary_key], [mutation])
    compiler = query.get_compiler(connection.alias)
    compiler.returning_fields = [meta.pk]
    ((insert_sql, insert_params),) = compiler.as_sql()
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH saved AS ({_state_save_sql(connection.vendor)}) {insert_sql}",
            [*_state_save_params(state), *insert_params],
        )
        (mutation.pk,) = cursor.fetchone()
    mutation._state.adding = False
    mutation._state.db = connection.alias


def _history_make_room(
    state: RlmState, actor: str, pending: dict[str, dict[str, Any] | None]
) -> None:
    """Fold the oldest tenth of a full log into a checkpoint before one more entry goes in.

    The entry about to go in may have written its rows already; ``pending`` holds their
    pre-images, so that every snapshot stored here is the state at ``mutation_total``,
    without that entry."""
    if state.history_length < MAX_HISTORY_ENTRIES:
        return
    batch = max(1, MAX_HISTORY_ENTRIES // 10)
    oldest = list(state.mutations.order_by("seq")[:batch])
    if not oldest:
        state.history_length = 0
        return
    folded = [mutation_row(m) for m in oldest]
    now = timezone.now()
    snapshot = state_snapshot(state, pending)
    name = f"history_fold_{oldest[0].mutation_id}_{oldest[-1].mutation_id}"
    if state.checkpoints.count() < MAX_CHECKPOINTS:
        checkpoint = RlmCheckpoint.objects.create(
            state=state,
            checkpoint_id=checkpoint_id_new(state),
            name=name,
            description=f"{len(folded)} oldest mutations folded out of the full history log.",
            kind=RlmCheckpoint.Kind.HISTORY_FOLD,
            snapshot=snapshot,
            mutation_seq=state.mutation_total,
            folded_mutations=folded,
            timestamp=now,
        )
    else:
        latest_fold = (
            state.checkpoints.filter(kind=RlmCheckpoint.Kind.HISTORY_FOLD)
            .order_by("-timestamp", "-id")
            .first()
        )
        if latest_fold is None:
            raise Conflict(
                "history_full",
                f"The history holds {MAX_HISTORY_ENTRIES} mutations and all {MAX_CHECKPOINTS} "
                "checkpoints are taken, so the oldest entries have nowhere to fold into.",
                limit=MAX_HISTORY_ENTRIES,
            )
        checkpoint = latest_fold
        checkpoint.folded_mutations = [*checkpoint.folded_mutations, *folded]
        checkpoint.snapshot = snapshot
        checkpoint.mutation_seq = state.mutation_total
        checkpoint.timestamp = now
        checkpoint.description = f"{len(checkpoint.folded_mutations)} oldest mutations folded out of the full history log."
        checkpoint.save(
            update_fields=[
                "folded_mutations",
                "snapshot",
                "mutation_seq",
                "timestamp",
                "description",
            ]
        )
    _positions_materialize(state, folding_through=oldest[-1].seq, pending=pending)
    RlmMutation.objects.filter(pk__in=[m.pk for m in oldest]).delete()
    state.history_length -= len(oldest)
    state_event_append(
        state,
        "rlm.history_folded",
        actor,
        checkpoint_id=checkpoint.checkpoint_id,
        folded=len(folded),
    )


def mutation_log(
    state: RlmState,
    *,
    operation: str,
    name: str,
    old: tuple[Any, str] = (None, ""),
    new: tuple[Any, str] = (None, ""),
    source: str = "",
    metadata: dict | None = None,
    timestamp: datetime | None = None,
    actor: str = "",
    before: dict[str, dict[str, Any] | None],
    state_saved_at: datetime | None = None,
) -> RlmMutation:
    """Log one mutation under the next ``mut-`` id, folding a full log first.

    ``old`` and ``new`` are ``(inline value, file name)``; ``before`` holds the row of
    each variable the mutation changes as it is now (``variable_snapshot``, None for
    one that does not exist yet), which is what undoes it. 409 ``history_full`` when the
    log has nowhere to fold into; 409 ``mutation_ids_exhausted`` after the last id.

    With ``state_saved_at`` the state is stored too, as ``state_save(state,
    state_saved_at)`` would (by the same statement on PostgreSQL): for a caller whose
    write changes nothing of the state's row after this entry.
    """
    _history_make_room(state, actor, before)
    if state.mutation_total >= MAX_MUTATION_SEQ:
        raise Conflict(
            "mutation_ids_exhausted",
            "This state has used every mutation id; export it and start a new one.",
        )
    state.mutation_total += 1
    state.history_length += 1
    fields = dict(
        state=state,
        seq=state.mutation_total,
        mutation_id=f"mut-{state.mutation_total:08x}",
        operation=operation,
        variable_name=name,
        old_value=old[0],
        old_file=old[1],
        new_value=new[0],
        new_file=new[1],
        source=source,
        metadata=metadata or {},
        timestamp=timestamp or timezone.now(),
        before=before,
    )
    if state_saved_at is None:
        return RlmMutation.objects.create(**fields)
    if connection.vendor != "postgresql":
        mutation = RlmMutation.objects.create(**fields)
        state_save(state, state_saved_at)
        return mutation
    state.updated_at = state_saved_at
    mutation = RlmMutation(**fields)
    _mutation_insert_saving_state(mutation, state)
    return mutation


def state_expired_purge(
    state: RlmState, now: datetime, actor: str, *, also: str | None = None
) -> RlmVariable | None:
    """Delete the state's temporary variables whose TTL ran out by ``now``, each logged.

    With ``also`` (a variable name) the same read brings that variable back: the live
    one, or None when it does not exist or has just expired.
    """
    wanted = Q(expires_at__lte=now) | Q(name=also) if also is not None else Q(expires_at__lte=now)
    found = None
    for variable in state.variables.filter(wanted):
        if not variable.is_expired(now):
            found = variable
            continue
        mutation_log(
            state,
            operation=RlmMutation.Operation.DELETE,
            name=variable.name,
            old=(variable.value, variable.file_name),
            source="ttl_expired",
            actor=actor,
            before={variable.name: variable_snapshot(variable)},
        )
        variable.delete()
    return found


# --- checkpoints and rollback -----------------------------------------------------------


def checkpoint_create(
    *, state: RlmState, name: str, description: str = "", actor: str = ""
) -> RlmCheckpoint:
    """A checkpoint at the log's current position under a new ``ckpt-`` id; 409
    ``checkpoint_limit_reached`` at the limit. Its cost does not grow with the variables:
    it stores the position, the completion and the non-zero access counts."""
    if not isinstance(name, str) or not name.strip():
        raise Invalid("A checkpoint needs a name.", field="name")
    with transaction.atomic():
        state = state_lock(state)
        now = timezone.now()
        taken = set(state.checkpoints.values_list("checkpoint_id", flat=True))
        if len(taken) >= MAX_CHECKPOINTS:
            raise Conflict(
                "checkpoint_limit_reached",
                f"A state keeps at most {MAX_CHECKPOINTS} checkpoints.",
                limit=MAX_CHECKPOINTS,
            )
        # One read finds what has expired (purged first, each logged, and the counts read
        # again then) and the non-zero access counts the checkpoint keeps.
        seen = state.variables.filter(Q(expires_at__lte=now) | Q(access_count__gt=0))
        seen_rows = list(seen.values_list("name", "access_count", "expires_at"))
        counts: dict[str, int] | None = {name: n for name, n, _ in seen_rows if n > 0}
        if any(expires is not None and expires <= now for _, _, expires in seen_rows):
            state_expired_purge(state, now, actor)
            counts = None
        checkpoint = RlmCheckpoint.objects.create(
            state=state,
            checkpoint_id=_id_not_in(taken),
            name=name,
            description=description,
            kind=RlmCheckpoint.Kind.MANUAL,
            position=state_position(state, counts),
            mutation_seq=state.mutation_total,
            timestamp=now,
        )
        state_save(state, now)
        state_event_append(
            state,
            "rlm.checkpoint_created",
            actor,
            checkpoint_id=checkpoint.checkpoint_id,
            name=name,
        )
    return checkpoint


@dataclass(frozen=True)
class Rollback:
    """What a rollback did, which is what its callers need without reading the state again.

    ``state`` is the locked row with its counters and completion as the rollback left
    them (session and frame loaded); ``changed`` names every variable the rollback
    rewrote, recreated or removed, by name; ``variable_count`` counts the rows it left
    (expired temporaries not yet purged too), as the logged mutation records it.
    """

    state: RlmState
    checkpoint_id: str
    mutation_id: str
    variable_count: int
    changed: list[str]


def _rows(variables: QuerySet[RlmVariable]) -> dict[str, dict[str, Any]]:
    """The snapshot row (``variable_snapshot``) of each variable of ``variables``, by name,
    read as values: no model instance is built."""
    rows = {}
    for values in variables.values_list(*SNAPSHOT_FIELDS):
        row = dict(zip(SNAPSHOT_FIELDS, values, strict=True))
        for field in DATETIME_FIELDS:
            row[field] = row[field].isoformat() if row[field] else None
        rows[row["name"]] = row
    return rows


def _restore_position(
    state: RlmState, checkpoint: RlmCheckpoint, count: int
) -> tuple[int, dict[str, dict[str, Any] | None]]:
    """Undo every mutation after a positional checkpoint in a fixed number of statements,
    however many variables changed: one read of the rows the log says changed, one of
    the non-zero access counts, one upsert of the changed rows as they were at the
    checkpoint, one DELETE of those created since, one UPDATE of the access counts that
    differ (each only when there is something to do). Returns how many variable rows
    there are now (``count`` before) and the pre-images."""
    undo = _undo_rows(
        list(
            state.mutations.filter(seq__gt=checkpoint.mutation_seq)
            .order_by("seq")
            .values_list("before", flat=True)
        )
    )
    if undo is None:
        raise Conflict(
            "checkpoint_not_restorable",
            "Mutations after this checkpoint came in with an import and cannot be undone.",
        )
    counts: dict[str, int] = (checkpoint.position or {})["access_counts"]
    # The rows the log changed, as they are now; and the access counts that are not zero
    # (reads are not logged), as names and numbers only: an agent may have read every
    # variable, which must not mean reading every row. A count of zero on a name the log
    # left alone goes back up only if the checkpoint's counts say so.
    found = _rows(state.variables.filter(name__in=list(undo)))
    read = dict(state.variables.filter(access_count__gt=0).values_list("name", "access_count"))
    before = {name: found.get(name) for name in undo}
    recount = {
        name: counts.get(name, 0)
        for name, n in read.items()
        if name not in undo and n != counts.get(name, 0)
    }
    recount.update({name: n for name, n in counts.items() if name not in read and name not in undo})
    # Rows the checkpoint had go back in one upsert (rewritten in place where they exist);
    # rows created since go in one DELETE.
    created = [name for name, row in undo.items() if row is None and name in found]
    if created:
        state.variables.filter(name__in=created).delete()
    restored = [
        variable_from_snapshot(state, {**row, "access_count": counts.get(name, 0)})
        for name, row in undo.items()
        if row is not None
    ]
    if restored:
        RlmVariable.objects.bulk_create(
            restored,
            update_conflicts=True,
            unique_fields=["state", "name"],
            update_fields=[field for field in SNAPSHOT_FIELDS if field != "name"],
        )
    if recount:
        state.variables.filter(name__in=list(recount)).update(
            access_count=Case(
                *(When(name=name, then=Value(n)) for name, n in recount.items()),
                output_field=RlmVariable._meta.get_field("access_count"),
            )
        )
    recreated = sum(1 for name, row in undo.items() if row is not None and name not in found)
    return count - len(created) + recreated, before


def _restore_snapshot(
    state: RlmState, snapshot: dict[str, Any]
) -> dict[str, dict[str, Any] | None]:
    """Replace every variable with a stored snapshot's rows; returns the pre-images."""
    before: dict[str, dict[str, Any] | None] = {row["name"]: None for row in snapshot["variables"]}
    before.update(_rows(state.variables.all()))
    state.variables.all().delete()
    RlmVariable.objects.bulk_create(
        [variable_from_snapshot(state, row) for row in snapshot["variables"]], batch_size=500
    )
    return before


def rollback(
    *,
    state: RlmState,
    checkpoint_id: str,
    source: str = "",
    actor: str = "",
    user: User | None = None,
) -> Rollback:
    """Restore the variables and completion status of a checkpoint exactly; log it as a mutation.

    ``user``: the person who rolled back in the dashboard; their rollback is audited too
    (an agent's, through the API, is in the session's events only).

    404 (naming ``checkpoint_id``) for an unknown checkpoint; 409
    ``checkpoint_not_restorable`` for one imported without a snapshot. A frame popped by
    a later Final stays popped. Runs in its own transaction, or in the caller's.

    Back to a positional checkpoint, only the variables changed since are written, in
    statements whose number does not grow with them or with the state; to one with a
    stored snapshot (a history fold, an import), every variable is. No variable is read
    back: the answer is what the rollback did (``Rollback``); ``state_rollback`` adds the
    state as it then stands.
    """
    with transaction.atomic():
        # The state locked with its variable count, which the logged mutation records.
        state = (
            RlmState.objects.select_for_update(no_key=True, of=("self",))
            .select_related("session", "frame")
            .annotate(
                variable_count=Subquery(
                    RlmVariable.objects.filter(state_id=OuterRef("pk"))
                    .order_by()
                    .values(n=Func(F("pk"), function="COUNT"))
                )
            )
            .get(pk=state.pk)
        )
        checkpoint = (
            state.checkpoints.filter(checkpoint_id=checkpoint_id).first()
            if isinstance(checkpoint_id, str)
            else None
        )
        if checkpoint is None:
            raise NotFound("No such checkpoint in this state.", checkpoint_id=checkpoint_id)
        if not checkpoint.restorable:
            raise Conflict(
                "checkpoint_not_restorable",
                "This checkpoint came in with an import and has no snapshot to restore.",
            )
        now = timezone.now()
        count_before: int = state.variable_count  # type: ignore[attr-defined]
        if checkpoint.snapshot is not None:
            restored = checkpoint.snapshot
            before = _restore_snapshot(state, restored)
            count = len(restored["variables"])
        else:
            restored = checkpoint.position
            count, before = _restore_position(state, checkpoint, count_before)
        mutation = mutation_log(
            state,
            operation=RlmMutation.Operation.ROLLBACK,
            name="*",
            old=({"variable_count": count_before}, ""),
            new=({"checkpoint_id": checkpoint.checkpoint_id, "variable_count": count}, ""),
            source=source or actor,
            metadata={"reason": f"rollback to {checkpoint.checkpoint_id}"},
            timestamp=now,
            actor=actor,
            before=before,
        )
        # Completion changes after the log entry, which may fold the log and store the
        # state as it stood before this rollback.
        state.completion_status = restored["completion_status"]
        state.completed_at = (
            datetime.fromisoformat(restored["completed_at"]) if restored["completed_at"] else None
        )
        state_save(state, now)
        state_event_append(
            state,
            "rlm.rolled_back",
            actor,
            checkpoint_id=checkpoint.checkpoint_id,
            mutation_id=mutation.mutation_id,
        )
        audit_person_act(
            user,
            action=AuditEntry.Action.STATE_ROLLED_BACK,
            organization_id=state.organization_id,
            target=f"RLM state {state.state_id}",
            detail={
                "checkpoint_id": checkpoint.checkpoint_id,
                "variables": count,
                "changed": len(before),
            },
        )
    return Rollback(
        state=state,
        checkpoint_id=checkpoint.checkpoint_id,
        mutation_id=mutation.mutation_id,
        variable_count=count,
        changed=sorted(before),
    )


def state_rollback(
    *,
    state: RlmState,
    checkpoint_id: str,
    source: str = "",
    actor: str = "",
    user: User | None = None,
    mutations_shown: int = 0,
) -> StateView:
    """``rollback``, answering with the state as it stands after it, read inside the same
    transaction (the state row is not read again), with the newest ``mutations_shown``
    entries of its log: what the API and the dashboard show."""
    with transaction.atomic():
        done = rollback(
            state=state, checkpoint_id=checkpoint_id, source=source, actor=actor, user=user
        )
        return state_view(done.state, mutations=mutations_shown, locked=True)
