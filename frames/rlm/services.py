"""Writes to RLM states, following the seed's agent protocol step by step.

Every write runs in one transaction that first locks the state row
(``select_for_update``), so concurrent writers to one state queue and every mutation
gets its own ``mut-`` number from ``RlmState.mutation_total``; none is lost. When the
state belongs to a session, the matching event is appended in the same transaction.

Special variables: ``prompt`` is set at initialization and read-only afterwards;
``Final`` is absent (the seed's "null or undefined") until the task is complete. Writing
a non-null ``Final`` completes the state and runs the completion handlers: the state's
frame is popped as completed, a leaf's Final is returned to the parent frame's states as
``child_<hex>_final``, and the root's Final marks every state of the tree as complete.
A state attached to a frame with open children cannot set Final (the seed: "Parent can
set Final when all children complete"). Final is read-only once set.

Scopes (the seed's ``scopes``) decide which other states read a variable: writes and
deletes always act on the caller's state, but a read of a name the state does not define
resolves, narrowest first, to a ``tree`` variable of a state of the same task tree, a
``session`` variable of a state of the same session, then a ``global`` variable of any
state of the organization (``selectors.variable_resolve``). A variable of the state
itself shadows them all.

Temporary variables are their own state's only and expire ``ttl_seconds`` after their
last write: readers no longer see them, and the next write to the state deletes them
with a logged ``delete`` mutation (source ``ttl_expired``).

When the log already holds ``max_history_entries`` mutations, the oldest tenth is
folded into a ``history_fold`` checkpoint (which keeps those entries and a full snapshot)
before the next one is logged. At ``max_checkpoints`` a fold merges into the latest fold
checkpoint; with no fold checkpoint to merge into, the write is refused (409
``history_full``) rather than dropping history.
"""

import json
import re
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from contextops.errors import Conflict, Invalid, NotFound
from frames.models import Frame, Session
from frames.services import frame_pop, session_require_not_ended

from .models import RlmCheckpoint, RlmMutation, RlmState, RlmVariable, Scope, VariableType
from .schema import seed_limits

_LIMITS = seed_limits()
MAX_VARIABLES = _LIMITS["max_variables_per_state"]
MAX_NAME_LENGTH = _LIMITS["max_variable_name_length"]
MAX_INLINE_BYTES = _LIMITS["max_inline_value_size_bytes"]
MAX_HISTORY_ENTRIES = _LIMITS["max_history_entries"]
MAX_CHECKPOINTS = _LIMITS["max_checkpoints"]

NAME_PATTERN = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TREE_ID_PATTERN = re.compile(r"tree-[a-f0-9]{8}")
STATE_ID_PATTERN = re.compile(r"state-[a-f0-9]{8}")
CHECKPOINT_ID_PATTERN = re.compile(r"ckpt-[a-f0-9]{8}")
MUTATION_ID_PATTERN = re.compile(r"mut-[a-f0-9]{8}")
FINAL, PROMPT = "Final", "prompt"
STRING_TYPES = (VariableType.TEXT, VariableType.FILE_PATH, VariableType.FILE_CONTENT)
MAX_MUTATION_SEQ = 0xFFFFFFFF
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


# --- values -------------------------------------------------------------------------


def encode_value(value: Any, *, loc: list | None = None) -> bytes:
    """The value as compact UTF-8 JSON: what sizes are measured on and files hold."""
    try:
        return json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()
    except (TypeError, ValueError):
        raise Invalid(
            "The value must be JSON (no NaN or Infinity).", loc=loc or ["body", "value"]
        ) from None


def infer_type(value: Any) -> str:
    if value is None:
        return VariableType.NULL
    if isinstance(value, bool):
        return VariableType.BOOLEAN
    if isinstance(value, int | float):
        return VariableType.NUMBER
    if isinstance(value, str):
        return VariableType.TEXT
    if isinstance(value, list):
        return VariableType.ARRAY
    return VariableType.JSON


def fits_type(type_: str, value: Any) -> bool:
    """Whether ``value`` can be a ``type_`` variable; ``json`` takes anything."""
    return {
        VariableType.NUMBER: isinstance(value, int | float) and not isinstance(value, bool),
        VariableType.BOOLEAN: isinstance(value, bool),
        VariableType.NULL: value is None,
        VariableType.ARRAY: isinstance(value, list),
        VariableType.JSON: True,
    }.get(type_, isinstance(value, str))


def check_type(type_: str, value: Any, *, loc: list) -> None:
    """422 for an unknown type or a value that cannot be of ``type_``."""
    if type_ not in VariableType.values:
        raise Invalid(f"Unknown variable type {type_!r}.", loc=loc)
    if not fits_type(type_, value):
        raise Invalid(f"A {type_} variable cannot hold this value.", loc=loc)


def validate_name(name: Any, *, loc: list) -> str:
    if not isinstance(name, str) or not name:
        raise Invalid("A variable name is required.", loc=loc)
    if len(name) > MAX_NAME_LENGTH:
        raise Invalid(
            f"A variable name has at most {MAX_NAME_LENGTH} characters.",
            loc=loc,
            limit=MAX_NAME_LENGTH,
        )
    if not NAME_PATTERN.fullmatch(name):
        raise Invalid(
            "A variable name is an identifier: a letter or _, then letters, digits or _.", loc=loc
        )
    return name


def _store(
    state: RlmState, name: str, value: Any, *, loc: list | None = None
) -> tuple[Any, str, int]:
    """``(inline value, file name, size)``: above the inline limit the value goes to a file.

    Files are written once and never changed, so the log and checkpoints can point at them.
    """
    data = encode_value(value, loc=loc)
    if len(data) <= MAX_INLINE_BYTES:
        return value, "", len(data)
    path = (
        f"rlm/{state.organization_id}/{state.state_id}/variables/{name}-{secrets.token_hex(8)}.json"
    )
    return None, default_storage.save(path, ContentFile(data)), len(data)


def load_file(file_name: str) -> Any:
    with default_storage.open(file_name, "rb") as handle:
        return json.loads(handle.read().decode())


def stored_value(value: Any, file_name: str) -> Any:
    """The value a reader sees, loaded from its file when it lives in one."""
    return load_file(file_name) if file_name else value


# --- ids ----------------------------------------------------------------------------


def tree_id_for(frame: Frame) -> tuple[str, Frame]:
    """``(tree id, root frame)`` of the tree ``frame`` belongs to; the id comes from the root's UUID."""
    root = frame
    while root.parent_id is not None:
        root = Frame.objects.only("id", "parent_id").get(pk=root.parent_id)
    return f"tree-{root.pk.hex[:8]}", root


def _new_state_id(organization) -> str:
    while True:
        candidate = f"state-{secrets.token_hex(4)}"
        if not RlmState.objects.filter(organization=organization, state_id=candidate).exists():
            return candidate


def _new_checkpoint_id(state: RlmState) -> str:
    taken = set(state.checkpoints.values_list("checkpoint_id", flat=True))
    while True:
        candidate = f"ckpt-{secrets.token_hex(4)}"
        if candidate not in taken:
            return candidate


# --- locking, logging, events ---------------------------------------------------------


def _locked(state: RlmState) -> RlmState:
    return (
        RlmState.objects.select_for_update(of=("self",))
        .select_related("session", "frame")
        .get(pk=state.pk)
    )


def _event(state: RlmState, type_: str, actor: str, **payload: Any) -> None:
    if state.session_id is None:
        return
    from frames.events import event_append

    frame = state.frame if state.frame_id and state.frame.session_id == state.session_id else None
    event_append(
        session=state.session,
        type=type_,
        frame=frame,
        actor=actor,
        payload={"state_id": state.state_id, **payload},
    )


def _mutation_dict(mutation: RlmMutation) -> dict[str, Any]:
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


def _make_room_in_history(state: RlmState, actor: str) -> None:
    """Fold the oldest tenth of a full log into a checkpoint before one more entry goes in."""
    if state.history_length < MAX_HISTORY_ENTRIES:
        return
    batch = max(1, MAX_HISTORY_ENTRIES // 10)
    oldest = list(state.mutations.order_by("seq")[:batch])
    if not oldest:
        state.history_length = 0
        return
    folded = [_mutation_dict(m) for m in oldest]
    now = timezone.now()
    snapshot = _snapshot(state)
    name = f"history_fold_{oldest[0].mutation_id}_{oldest[-1].mutation_id}"
    if state.checkpoints.count() < MAX_CHECKPOINTS:
        checkpoint = RlmCheckpoint.objects.create(
            state=state,
            checkpoint_id=_new_checkpoint_id(state),
            name=name,
            description=f"{len(folded)} oldest mutations folded out of the full history log.",
            kind=RlmCheckpoint.Kind.HISTORY_FOLD,
            snapshot=snapshot,
            mutation_seq=state.mutation_total,
            folded_mutations=folded,
            timestamp=now,
        )
    else:
        checkpoint = (
            state.checkpoints.filter(kind=RlmCheckpoint.Kind.HISTORY_FOLD)
            .order_by("-timestamp", "-id")
            .first()
        )
        if checkpoint is None:
            raise Conflict(
                "history_full",
                f"The history holds {MAX_HISTORY_ENTRIES} mutations and all {MAX_CHECKPOINTS} "
                "checkpoints are taken, so the oldest entries have nowhere to fold into.",
                limit=MAX_HISTORY_ENTRIES,
            )
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
    RlmMutation.objects.filter(pk__in=[m.pk for m in oldest]).delete()
    state.history_length -= len(oldest)
    _event(
        state,
        "rlm.history_folded",
        actor,
        checkpoint_id=checkpoint.checkpoint_id,
        folded=len(folded),
    )


def _log(
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
) -> RlmMutation:
    _make_room_in_history(state, actor)
    if state.mutation_total >= MAX_MUTATION_SEQ:
        raise Conflict(
            "mutation_ids_exhausted",
            "This state has used every mutation id; export it and start a new one.",
        )
    state.mutation_total += 1
    state.history_length += 1
    return RlmMutation.objects.create(
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
    )


def _save_state(state: RlmState, now: datetime) -> None:
    state.updated_at = now
    RlmState.objects.filter(pk=state.pk).update(
        mutation_total=state.mutation_total,
        history_length=state.history_length,
        completion_status=state.completion_status,
        completed_at=state.completed_at,
        updated_at=now,
    )


def _purge_expired(state: RlmState, now: datetime, actor: str) -> None:
    for variable in state.variables.filter(expires_at__lte=now):
        _log(
            state,
            operation=RlmMutation.Operation.DELETE,
            name=variable.name,
            old=(variable.value, variable.file_name),
            source="ttl_expired",
            actor=actor,
        )
        variable.delete()


# --- snapshots ----------------------------------------------------------------------


def _variable_snapshot(variable: RlmVariable) -> dict[str, Any]:
    row = {field: getattr(variable, field) for field in SNAPSHOT_FIELDS}
    for field in DATETIME_FIELDS:
        row[field] = row[field].isoformat() if row[field] else None
    return row


def _snapshot(state: RlmState) -> dict[str, Any]:
    return {
        "completion_status": state.completion_status,
        "completed_at": state.completed_at.isoformat() if state.completed_at else None,
        "variables": [_variable_snapshot(v) for v in state.variables.order_by("name")],
    }


def snapshot_variables(state: RlmState) -> list[dict[str, Any]]:
    """The variables of ``state`` exactly as a checkpoint would record them, by name."""
    return _snapshot(state)["variables"]


def variable_from_snapshot(state: RlmState, row: dict[str, Any]) -> RlmVariable:
    fields = dict(row)
    for field in DATETIME_FIELDS:
        fields[field] = datetime.fromisoformat(fields[field]) if fields[field] else None
    return RlmVariable(state=state, **fields)


# --- the protocol -------------------------------------------------------------------


def _check_session_and_frame(*, organization, session: Session | None, frame: Frame | None) -> None:
    if session is not None and session.organization_id != organization.pk:
        raise NotFound("No such session.")
    if frame is not None and frame.organization_id != organization.pk:
        raise NotFound("No such frame.")
    if session is not None and frame is not None and frame.session_id != session.pk:
        raise Invalid("The frame belongs to another session.", field="frame_id")
    if session is not None or frame is not None:
        session_require_not_ended(session or frame.session)


def state_initialize(
    *,
    organization,
    prompt: str,
    session: Session | None = None,
    frame: Frame | None = None,
    tree_id: str = "",
    execution_config: dict | None = None,
    actor: str = "",
) -> RlmState:
    """Create a state: new id, read-only ``prompt``, no ``Final``, an initial checkpoint."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise Invalid("The prompt is required.", field="prompt")
    _check_session_and_frame(organization=organization, session=session, frame=frame)
    root = None
    if frame is not None:
        session = session or frame.session
        frame_tree, root = tree_id_for(frame)
        if tree_id and tree_id != frame_tree:
            raise Invalid(f"The frame belongs to tree {frame_tree}.", field="tree_id")
        tree_id = frame_tree
    if tree_id and not TREE_ID_PATTERN.fullmatch(tree_id):
        raise Invalid("A tree id is tree- and 8 hex digits.", field="tree_id")
    now = timezone.now()
    with transaction.atomic():
        state = RlmState.objects.create(
            organization=organization,
            state_id=_new_state_id(organization),
            session=session,
            tree_id=tree_id,
            root_frame=root,
            frame=frame,
            execution_config=execution_config or {},
            created_at=now,
            updated_at=now,
        )
        state = _locked(state)
        value, file_name, size = _store(state, PROMPT, prompt, loc=["body", "prompt"])
        RlmVariable.objects.create(
            state=state,
            name=PROMPT,
            type=VariableType.TEXT,
            value=value,
            file_name=file_name,
            size_bytes=size,
            source="user_input",
            read_only=True,
            created_at=now,
            updated_at=now,
        )
        _log(
            state,
            operation="create",
            name=PROMPT,
            new=(value, file_name),
            source="user_input",
            timestamp=now,
            actor=actor,
        )
        RlmCheckpoint.objects.create(
            state=state,
            checkpoint_id=_new_checkpoint_id(state),
            name="initial_state",
            description="State initialized with user prompt",
            kind=RlmCheckpoint.Kind.INITIAL,
            snapshot=_snapshot(state),
            mutation_seq=state.mutation_total,
            timestamp=now,
        )
        _save_state(state, now)
        _event(state, "rlm.state_initialized", actor)
    return state


def variable_read(*, state: RlmState, name: str) -> tuple[RlmVariable, Any]:
    """``(variable, value)``: the access count goes up by one, the value comes from its file if needed.

    A name the state does not define resolves through the scopes of other states of the
    organization (``selectors.variable_resolve``); the variable returned then belongs to
    that state (``variable.state``), and its access count is the one that goes up.
    NotFound when no variable of that name is visible to this state.
    """
    from .selectors import variable_resolve

    variable = variable_resolve(state=state, name=name)
    if variable is None:
        raise NotFound(f"No variable {name!r} in this state or any state sharing it.")
    RlmVariable.objects.filter(pk=variable.pk).update(access_count=F("access_count") + 1)
    variable.access_count += 1
    return variable, stored_value(variable.value, variable.file_name)


def completion_check(*, state: RlmState) -> dict[str, Any]:
    """``{complete, completion_status, final}``: complete when ``Final`` is set (non-null)."""
    final = state.variables.filter(name=FINAL).first()
    value = stored_value(final.value, final.file_name) if final else None
    return {
        "complete": final is not None and value is not None,
        "completion_status": state.completion_status,
        "final": value,
    }


def _write_locked(
    state: RlmState,
    *,
    name: str,
    value: Any,
    type_: str | None,
    description: str | None,
    source: str,
    read_only: bool | None,
    scope: str | None,
    ttl_seconds: int | None,
    actor: str,
    now: datetime,
) -> RlmVariable:
    loc = ["body", "value"]
    existing = state.variables.filter(name=name).first()
    if existing is not None and existing.read_only:
        raise Conflict("read_only_variable", f"{name!r} is read-only.", variable=name)
    if name == FINAL and value is None:
        raise Invalid(
            "Final stays unset until the task is complete; set it to the answer.", loc=loc
        )
    if existing is None and state.variables.count() >= MAX_VARIABLES:
        raise Conflict(
            "variable_limit_reached",
            f"A state holds at most {MAX_VARIABLES} variables; delete one first.",
            limit=MAX_VARIABLES,
        )
    if type_ is None:
        keep = existing is not None and fits_type(existing.type, value)
        type_ = existing.type if keep else infer_type(value)
    check_type(type_, value, loc=["body", "type"])
    scope = scope or (existing.scope if existing is not None else Scope.SESSION)
    if scope not in Scope.values:
        raise Invalid(f"Unknown scope {scope!r}.", field="scope")
    if scope == Scope.TEMPORARY:
        ttl_seconds = (
            ttl_seconds if ttl_seconds is not None else (existing.ttl_seconds if existing else None)
        )
        if ttl_seconds is None:
            raise Invalid("A temporary variable needs ttl_seconds.", field="ttl_seconds")
    elif ttl_seconds is not None:
        raise Invalid("Only temporary variables have a TTL.", field="ttl_seconds")
    if ttl_seconds is not None and ttl_seconds < 0:
        raise Invalid("ttl_seconds cannot be negative.", field="ttl_seconds")
    if name == FINAL and state.frame_id:
        open_children = Frame.objects.filter(
            parent_id=state.frame_id, status__in=Frame.OPEN_STATUSES
        )
        if open_children.exists():
            raise Conflict(
                "children_incomplete",
                "This state's frame still has open children; Final is set when all of them complete.",
            )
    old = (existing.value, existing.file_name) if existing is not None else (None, "")
    stored, file_name, size = _store(state, name, value, loc=loc)
    variable = existing or RlmVariable(state=state, name=name, created_at=now)
    variable.type = type_
    variable.value = stored
    variable.file_name = file_name
    variable.size_bytes = size
    if description is not None:
        variable.description = description
    variable.source = source or variable.source
    variable.read_only = bool(read_only) if read_only is not None else variable.read_only
    variable.scope = scope
    variable.ttl_seconds = ttl_seconds
    variable.expires_at = now + timedelta(seconds=ttl_seconds) if ttl_seconds is not None else None
    variable.updated_at = now
    if name in (FINAL, PROMPT):
        variable.read_only = True  # prompt once it exists, Final once it is set
    variable.save()
    mutation = _log(
        state,
        operation="update" if existing is not None else "create",
        name=name,
        old=old,
        new=(stored, file_name),
        source=source,
        timestamp=now,
        actor=actor,
    )
    _event(state, "rlm.variable_written", actor, name=name, mutation_id=mutation.mutation_id)
    if name == FINAL:
        _complete(state, value=value, type_=type_, now=now, actor=actor)
    return variable


def variable_write(
    *,
    state: RlmState,
    name: str,
    value: Any,
    type: str | None = None,
    description: str | None = None,
    source: str = "",
    read_only: bool | None = None,
    scope: str | None = None,
    ttl_seconds: int | None = None,
    actor: str = "",
) -> RlmVariable:
    """Create or update ``name`` and log the mutation; writing ``Final`` completes the state.

    409 ``read_only_variable`` for ``prompt``, a set ``Final`` or any read-only variable;
    409 ``variable_limit_reached`` past the seed's variable limit; 422 for a bad name,
    a value that does not fit its type, or a null ``Final``.
    """
    validate_name(name, loc=["path", "name"])
    with transaction.atomic():
        state = _locked(state)
        now = timezone.now()
        _purge_expired(state, now, actor)
        variable = _write_locked(
            state,
            name=name,
            value=value,
            type_=type,
            description=description,
            source=source,
            read_only=read_only,
            scope=scope,
            ttl_seconds=ttl_seconds,
            actor=actor,
            now=now,
        )
        _save_state(state, now)
    return variable


def variable_delete(
    *, state: RlmState, name: str, source: str = "", actor: str = ""
) -> RlmMutation:
    """Delete ``name`` with a logged ``delete`` mutation; 409 for read-only, 404 when absent."""
    validate_name(name, loc=["path", "name"])
    with transaction.atomic():
        state = _locked(state)
        now = timezone.now()
        _purge_expired(state, now, actor)
        variable = state.variables.filter(name=name).first()
        if variable is None:
            raise NotFound(f"No variable {name!r} in this state.")
        if variable.read_only:
            raise Conflict("read_only_variable", f"{name!r} is read-only.", variable=name)
        mutation = _log(
            state,
            operation="delete",
            name=name,
            old=(variable.value, variable.file_name),
            source=source,
            timestamp=now,
            actor=actor,
        )
        variable.delete()
        _save_state(state, now)
        _event(state, "rlm.variable_deleted", actor, name=name, mutation_id=mutation.mutation_id)
    return mutation


def checkpoint_create(
    *, state: RlmState, name: str, description: str = "", actor: str = ""
) -> RlmCheckpoint:
    """A full snapshot under a new ``ckpt-`` id; 409 ``checkpoint_limit_reached`` at the limit."""
    if not isinstance(name, str) or not name.strip():
        raise Invalid("A checkpoint needs a name.", field="name")
    with transaction.atomic():
        state = _locked(state)
        now = timezone.now()
        if state.checkpoints.count() >= MAX_CHECKPOINTS:
            raise Conflict(
                "checkpoint_limit_reached",
                f"A state keeps at most {MAX_CHECKPOINTS} checkpoints.",
                limit=MAX_CHECKPOINTS,
            )
        _purge_expired(state, now, actor)
        checkpoint = RlmCheckpoint.objects.create(
            state=state,
            checkpoint_id=_new_checkpoint_id(state),
            name=name,
            description=description,
            kind=RlmCheckpoint.Kind.MANUAL,
            snapshot=_snapshot(state),
            mutation_seq=state.mutation_total,
            timestamp=now,
        )
        _save_state(state, now)
        _event(
            state,
            "rlm.checkpoint_created",
            actor,
            checkpoint_id=checkpoint.checkpoint_id,
            name=name,
        )
    return checkpoint


def state_rollback(
    *, state: RlmState, checkpoint_id: str, source: str = "", actor: str = ""
) -> RlmState:
    """Restore the variables and completion status of a checkpoint exactly; log it as a mutation.

    404 for an unknown checkpoint; 409 ``checkpoint_not_restorable`` for one imported
    without a snapshot. A frame popped by a later Final stays popped.
    """
    with transaction.atomic():
        state = _locked(state)
        checkpoint = (
            state.checkpoints.filter(checkpoint_id=checkpoint_id).first()
            if isinstance(checkpoint_id, str)
            else None
        )
        if checkpoint is None:
            raise NotFound("No such checkpoint in this state.")
        if checkpoint.snapshot is None:
            raise Conflict(
                "checkpoint_not_restorable",
                "This checkpoint came in with an import and has no snapshot to restore.",
            )
        now = timezone.now()
        before = state.variables.count()
        snapshot = checkpoint.snapshot
        state.variables.all().delete()
        RlmVariable.objects.bulk_create(
            [variable_from_snapshot(state, row) for row in snapshot["variables"]], batch_size=500
        )
        state.completion_status = snapshot["completion_status"]
        state.completed_at = (
            datetime.fromisoformat(snapshot["completed_at"]) if snapshot["completed_at"] else None
        )
        mutation = _log(
            state,
            operation=RlmMutation.Operation.ROLLBACK,
            name="*",
            old=({"variable_count": before}, ""),
            new=(
                {
                    "checkpoint_id": checkpoint.checkpoint_id,
                    "variable_count": len(snapshot["variables"]),
                },
                "",
            ),
            source=source or actor,
            metadata={"reason": f"rollback to {checkpoint.checkpoint_id}"},
            timestamp=now,
            actor=actor,
        )
        _save_state(state, now)
        _event(
            state,
            "rlm.rolled_back",
            actor,
            checkpoint_id=checkpoint.checkpoint_id,
            mutation_id=mutation.mutation_id,
        )
    return state


# --- completion ---------------------------------------------------------------------


def _complete(state: RlmState, *, value: Any, type_: str, now: datetime, actor: str) -> None:
    """The completion handlers of ``Final``: pop the frame, return the answer up, end the tree."""
    state.completion_status = RlmState.Completion.COMPLETE
    state.completed_at = now
    payload: dict[str, Any] = {}
    frame = state.frame
    if frame is not None:
        frame.refresh_from_db(fields=["status", "parent"])
        if frame.status in (Frame.Status.ACTIVE, Frame.Status.WAITING):
            frame_pop(
                frame=frame, status="completed", result_refs=[f"rlm:{state.state_id}"], actor=actor
            )
            payload["frame_popped"] = str(frame.pk)
        if frame.parent_id is not None:
            payload["returned_to"] = _return_to_parent(
                state, frame, value=value, type_=type_, now=now, actor=actor
            )
        elif state.tree_id:
            RlmState.objects.filter(
                organization_id=state.organization_id, tree_id=state.tree_id
            ).update(tree_completed_at=now)
            state.tree_completed_at = now
            payload["tree_completed"] = state.tree_id
    _event(state, "rlm.completed", actor, **payload)


def _return_to_parent(
    state: RlmState, frame: Frame, *, value: Any, type_: str, now: datetime, actor: str
) -> list[str]:
    """Write a leaf's Final into every state of its parent frame as ``child_<hex>_final``."""
    returned = []
    name = f"child_{state.state_id.removeprefix('state-')}_final"
    parents = RlmState.objects.filter(
        organization_id=state.organization_id, frame_id=frame.parent_id
    ).exclude(pk=state.pk)
    for parent_id in parents.values_list("pk", flat=True):
        parent = _locked(RlmState(pk=parent_id))
        try:
            with transaction.atomic():
                _write_locked(
                    parent,
                    name=name,
                    value=value,
                    type_=type_,
                    description=f"Final of child state {state.state_id} (frame {frame.pk}).",
                    source=state.state_id,
                    read_only=None,
                    scope=None,
                    ttl_seconds=None,
                    actor=actor,
                    now=now,
                )
                _save_state(parent, now)
        except Conflict:
            continue  # a full or read-only parent keeps its state; the child is still complete
        returned.append(parent.state_id)
    return returned


# --- import -------------------------------------------------------------------------


def _imported_snapshot(state: RlmState, snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    """An imported checkpoint snapshot in the stored form, large values written to files."""
    if snapshot is None:
        return None
    rows = []
    for row in snapshot["variables"]:
        stored, file_name, size = _store(state, row["name"], row["value"])
        variable = RlmVariable(
            state=state, **{**row, "value": stored, "file_name": file_name, "size_bytes": size}
        )
        rows.append(_variable_snapshot(variable))
    completed_at = snapshot["completed_at"]
    return {
        "completion_status": snapshot["completion_status"],
        "completed_at": completed_at.isoformat() if completed_at else None,
        "variables": sorted(rows, key=lambda r: r["name"]),
    }


def state_import(*, organization, document: Any, actor: str = "") -> RlmState:
    """Create a state from a seed-schema document (see ``interchange`` for the normalization)."""
    from . import interchange

    plan = interchange.import_plan(document)
    session = None
    session_ref = plan.session_id
    if plan.session_id:
        from frames.selectors import session_get

        try:
            session = session_get(organization=organization, session_id=plan.session_id)
            session_ref = ""
        except NotFound:
            session = None
    now = timezone.now()
    try:
        with transaction.atomic():
            state = RlmState.objects.create(
                organization=organization,
                state_id=plan.state_id or _new_state_id(organization),
                version=plan.version,
                session=session,
                session_ref=session_ref,
                tree_id=plan.tree_id,
                completion_status=plan.completion_status,
                completed_at=plan.completed_at,
                execution_config=plan.execution_config,
                created_at=plan.created_at or now,
                updated_at=plan.updated_at or now,
            )
    except IntegrityError:
        raise Conflict(
            "state_exists",
            f"A state {plan.state_id} already exists in this organization.",
            state_id=plan.state_id,
        ) from None
    with transaction.atomic():
        state = _locked(state)
        variables = []
        for row in plan.variables:
            stored, file_name, size = _store(
                state, row["name"], row["value"], loc=["body", "variables", row["name"], "value"]
            )
            variables.append(
                RlmVariable(
                    state=state,
                    **{**row, "value": stored, "file_name": file_name, "size_bytes": size},
                )
            )
        RlmVariable.objects.bulk_create(variables, batch_size=500)
        mutations = []
        for seq, row in enumerate(plan.mutations, start=1):
            mutations.append(
                RlmMutation(
                    state=state,
                    seq=seq,
                    mutation_id=row["mutation_id"],
                    operation=row["operation"],
                    variable_name=row["variable_name"],
                    old_value=row["old_value"],
                    new_value=row["new_value"],
                    source=row["source"],
                    metadata=row["metadata"],
                    timestamp=row["timestamp"],
                )
            )
        RlmMutation.objects.bulk_create(mutations, batch_size=500)
        id_seqs = [int(m.mutation_id[4:], 16) for m in mutations]
        state.mutation_total = max([plan.mutation_count, len(mutations), *id_seqs])
        state.history_length = len(mutations)
        folded_ids = [m["mutation_id"] for c in plan.checkpoints for m in c["folded_mutations"]]
        state.mutation_total = max(
            state.mutation_total,
            len(mutations) + len(folded_ids),
            *(int(mutation_id[4:], 16) for mutation_id in folded_ids),
        )
        taken: set[str] = set()
        checkpoints = []
        for row in plan.checkpoints:
            checkpoint_id = row["checkpoint_id"]
            if checkpoint_id in taken:
                checkpoint_id = _new_checkpoint_id(state)
                while checkpoint_id in taken:
                    checkpoint_id = _new_checkpoint_id(state)
            taken.add(checkpoint_id)
            folded = [
                _mutation_dict(RlmMutation(seq=int(m["mutation_id"][4:], 16), **m))
                for m in row["folded_mutations"]
            ]
            checkpoints.append(
                RlmCheckpoint(
                    state=state,
                    checkpoint_id=checkpoint_id,
                    original_checkpoint_id=row["original_checkpoint_id"],
                    name=row["name"],
                    description=row["description"],
                    kind=RlmCheckpoint.Kind.HISTORY_FOLD if folded else RlmCheckpoint.Kind.IMPORTED,
                    snapshot=_imported_snapshot(state, row["snapshot"]),
                    mutation_seq=max((m["seq"] for m in folded), default=0),
                    folded_mutations=folded,
                    timestamp=row["timestamp"],
                )
            )
        RlmCheckpoint.objects.bulk_create(checkpoints)
        RlmState.objects.filter(pk=state.pk).update(
            mutation_total=state.mutation_total, history_length=state.history_length
        )
        _event(state, "rlm.state_imported", actor)
    return state


def temporaries_purge(*, now: datetime | None = None, actor: str = "system:ttl") -> int:
    """Delete every temporary variable whose TTL has run out, each logged as a mutation.

    Readers never see an expired variable (every read and write purges its state first);
    this sweep removes the rows of states nobody touches any more. Returns how many went.
    """
    now = now or timezone.now()
    purged = 0
    state_ids = (
        RlmVariable.objects.filter(expires_at__lte=now)
        .values_list("state_id", flat=True)
        .distinct()
    )
    for state_id in list(state_ids[:1000]):
        with transaction.atomic():
            state = _locked(RlmState(pk=state_id))
            before = state.variables.count()
            _purge_expired(state, now, actor)
            purged += before - state.variables.count()
            _save_state(state, now)
    return purged
