"""Export to and import from the RLM state interchange document (docs/concepts.md#rlm-state).

Export always validates against the seed schema. Import takes such documents back,
including the seed's own examples, which contradict the schema in a few places. The
normalization, in the order it is applied:

1. ``variables.Final: null`` (the seed's ``basic_state``; the rules say Final is "null or
   undefined" until complete) means Final is unset: it is dropped. So is a Final object
   whose ``value`` is null. An export of an incomplete state leaves Final out.
2. A checkpoint id that breaks ``^ckpt-[a-f0-9]{8}$`` (the seed's ``ckpt-init001``) gets
   the id ``ckpt-`` + the first 8 hex digits of the SHA-256 of the original id, so
   importing the same document twice gives the same id; the original id is kept on the
   checkpoint (``original_checkpoint_id``, shown on the dashboard). A mutation id that
   breaks ``^mut-[a-f0-9]{8}$`` is rewritten the same way.
3. A variable ``type`` of YAML ``null`` or the string ``"null"``: the schema's type enum
   holds YAML ``null`` (None) under ``type: string``, so no null type can validate.
   Variables of type null are exported as ``type: json`` with ``metadata.value_type:
   "null"``, and both spellings (and that form) import as type null.
4. The seed's rollback is not in the mutation ``operation`` enum: a rollback is exported
   as an ``update`` of variable ``*`` with ``metadata.reason`` ``"rollback to ckpt-..."``
   and imported back as a rollback.
5. ``metadata.completion_status`` follows Final: a document with Final set is complete;
   one without Final is never "complete" (it becomes "incomplete"); "error" and
   "cancelled" are kept. Counts in ``metadata`` are recomputed on export, except that the
   mutation count keeps the larger of the imported count and the entries imported (the
   seed's ``basic_state`` counts 3 mutations and lists 2).
6. ``prompt`` and a set ``Final`` are read-only after import, as after initialization.
7. ``session_id`` links the state to a session of the importing organization when it
   names one; otherwise it is kept as given (``sess-12345678``) and exported unchanged.

The schema gives a checkpoint only a ``snapshot_path``, so a checkpoint of a plain seed
document (the seed's ``ckpt-init001``) is listed after import but cannot be rolled back
to (409 ``checkpoint_not_restorable``). ``GET .../export?snapshots=true`` adds each
checkpoint's full snapshot as an extra ``snapshot`` property (``{completion_status,
variables: {name: Variable}}``, allowed by the schema, whose StateCheckpoint is open);
an import restores those checkpoints as restorable ones. Values above the inline limit are written to files
on import like any write; exports inline every value, file-backed ones included.

History folded out of a full log (``max_history_entries``) is not dropped from an export
either: the schema's ``history.mutations`` is the log as it stands, so a checkpoint
holding folded entries lists them as seed StateMutations (rollbacks written as in 4)
under an extra ``folded_mutations`` property, in every export. An import checks each
entry against the seed's ``StateMutation``, rewrites bad ids as in 2, keeps them on the
checkpoint (a ``history_fold`` one), and counts them in the mutation ids it continues
from, so later writes never reuse a folded id.

Every variable of a document is also checked against the seed's ``Variable`` definition
on its own, because the seed's ``VariableStore`` only constrains Final and prompt.

``import_plan`` reads a document into the rows to create; ``state_import`` writes them.
"""

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from contextops.errors import Conflict, Invalid, NotFound
from contextops.models import Organization
from frames.selectors import session_get

from .models import RlmCheckpoint, RlmMutation, RlmState, RlmVariable, Scope, VariableType
from .schema import (
    Violation,
    mutation_validator,
    schema_errors,
    variable_validator,
    violations_invalid,
)
from .selectors import StateView, state_variables, state_view
from .snapshots import (
    checkpoint_id_new,
    checkpoint_snapshots,
    mutation_from_folded,
    mutation_row,
    state_event_append,
    state_lock,
    variable_from_snapshot,
    variable_snapshot,
)
from .values import (
    CHECKPOINT_ID_PATTERN,
    FINAL,
    MAX_CHECKPOINTS,
    MAX_HISTORY_ENTRIES,
    MAX_MUTATION_SEQ,
    MAX_NAME_LENGTH,
    MAX_TTL,
    MAX_VARIABLES,
    MUTATION_ID_PATTERN,
    PROMPT,
    check_type,
    state_id_new,
    stored_value,
    value_store,
)

KNOWN_VARIABLE_METADATA = ("read_only", "scope", "ttl_seconds", "value_type")
ROLLBACK_REASON = "rollback to "
MIN_YEAR, MAX_YEAR = 1900, 9000
MAX_COUNT = 2**62

Where = tuple[str | int, ...]  # an input of the document, ``("variables", "x", "type")``


def timestamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def checkpoint_api_path(state: RlmState, checkpoint: RlmCheckpoint) -> str:
    return f"/api/v1/rlm/states/{state.state_id}/checkpoints/{checkpoint.checkpoint_id}"


# --- export -------------------------------------------------------------------------


def variable_export(variable: RlmVariable) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        **variable.extra_metadata,
        "read_only": variable.read_only,
        "scope": variable.scope,
    }
    if variable.ttl_seconds is not None:
        metadata["ttl_seconds"] = variable.ttl_seconds
    type_ = variable.type
    if type_ == VariableType.NULL:
        type_, metadata["value_type"] = VariableType.JSON, VariableType.NULL
    out: dict[str, Any] = {
        "name": variable.name,
        "value": stored_value(variable.value, variable.file_name),
        "type": type_,
    }
    if variable.description:
        out["description"] = variable.description
    if variable.source:
        out["source"] = variable.source
    out["created_at"] = timestamp(variable.created_at)
    out["updated_at"] = timestamp(variable.updated_at)
    out["access_count"] = variable.access_count
    out["metadata"] = metadata
    return out


def mutation_export(mutation: RlmMutation) -> dict[str, Any]:
    operation = mutation.operation
    metadata = dict(mutation.metadata)
    if operation == RlmMutation.Operation.ROLLBACK:
        operation = RlmMutation.Operation.UPDATE
    out: dict[str, Any] = {
        "mutation_id": mutation.mutation_id,
        "operation": operation,
        "variable_name": mutation.variable_name,
    }
    if mutation.operation != RlmMutation.Operation.CREATE:
        out["old_value"] = stored_value(mutation.old_value, mutation.old_file)
    if mutation.operation != RlmMutation.Operation.DELETE:
        out["new_value"] = stored_value(mutation.new_value, mutation.new_file)
    if mutation.source:
        out["source"] = mutation.source
    out["timestamp"] = timestamp(mutation.timestamp)
    if metadata:
        out["metadata"] = metadata
    return out


def checkpoint_export(
    state: RlmState, checkpoint: RlmCheckpoint, *, snapshot: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The checkpoint as a seed StateCheckpoint; ``snapshot`` (its full snapshot, from
    ``checkpoint_snapshots``) is added when given."""
    out: dict[str, Any] = {
        "checkpoint_id": checkpoint.checkpoint_id,
        "name": checkpoint.name,
        "timestamp": timestamp(checkpoint.timestamp),
    }
    if checkpoint.restorable:
        out["snapshot_path"] = checkpoint_api_path(state, checkpoint)
    if checkpoint.description:
        out["description"] = checkpoint.description
    if snapshot is not None:
        rows = [variable_from_snapshot(state, row) for row in snapshot["variables"]]
        out["snapshot"] = {
            "completion_status": snapshot["completion_status"],
            "variables": {v.name: variable_export(v) for v in rows},
        }
    if checkpoint.folded_mutations:
        out["folded_mutations"] = [
            mutation_export(mutation_from_folded(row)) for row in checkpoint.folded_mutations
        ]
    return out


def state_export(state: RlmState, *, with_snapshots: bool = False) -> dict[str, Any]:
    """The state as a seed document; it validates against the seed schema.

    Expired temporary variables are left out; values are inlined (loaded from files).
    A checkpoint that holds mutations folded out of the full log lists them, oldest
    first, as seed StateMutations under ``folded_mutations``, always. ``with_snapshots``
    adds each checkpoint's full snapshot as ``snapshot``: ``{completion_status,
    variables: {name: Variable}}``, so that checkpoints stay restorable through an
    import. Both are properties the seed's StateCheckpoint leaves open.
    """
    variables = state_variables(state)
    checkpoints = list(state.checkpoints.order_by("timestamp", "id"))
    snapshots = checkpoint_snapshots(state, checkpoints) if with_snapshots else {}
    document: dict[str, Any] = {"version": state.version, "state_id": state.state_id}
    if state.session_label:
        document["session_id"] = state.session_label
    if state.tree_id:
        document["tree_id"] = state.tree_id
    document["variables"] = {v.name: variable_export(v) for v in variables}
    document["history"] = {
        "mutations": [mutation_export(m) for m in state.mutations.order_by("seq")],
        "checkpoints": [
            checkpoint_export(state, c, snapshot=snapshots.get(c.pk)) for c in checkpoints
        ],
    }
    metadata: dict[str, Any] = {
        "created_at": timestamp(state.created_at),
        "last_updated_at": timestamp(state.updated_at),
        "variable_count": len(variables),
        "mutation_count": state.mutation_total,
        "checkpoint_count": len(checkpoints),
        "total_size_bytes": sum(v.size_bytes for v in variables),
        "completion_status": state.completion_status,
    }
    if state.execution_config:
        metadata["execution_config"] = state.execution_config
    document["metadata"] = metadata
    return document


# --- import -------------------------------------------------------------------------


@dataclasses.dataclass
class ImportPlan:
    version: str
    state_id: str
    session_id: str = ""
    tree_id: str = ""
    variables: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    mutations: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    checkpoints: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    mutation_count: int = 0
    completion_status: str = RlmState.Completion.INCOMPLETE
    completed_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    execution_config: dict[str, Any] = dataclasses.field(default_factory=dict)


def _hashed_id(prefix: str, original: Any) -> str:
    return prefix + hashlib.sha256(str(original).encode()).hexdigest()[:8]


def _parse_time(value: Any, field: Where) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid("A timestamp is an ISO 8601 date-time string.", field=field)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(f"{value!r} is not an ISO 8601 date-time.", field=field) from None
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise Invalid(f"A timestamp lies between the years {MIN_YEAR} and {MAX_YEAR}.", field=field)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _bounded(value: Any, limit: int, field: Where) -> Any:
    """``value`` unchanged, or 422 when it is longer (strings) or larger (integers) than a column holds."""
    too_long = isinstance(value, str) and len(value) > limit
    too_large = isinstance(value, int) and not isinstance(value, bool) and value > limit
    if too_long or too_large:
        raise Invalid(
            f"At most {limit} {'characters' if too_long else ''}".strip() + ".",
            field=field,
            limit=limit,
        )
    return value


def normalize(document: Any) -> dict[str, Any]:
    """A copy of ``document`` with the seed's quirks rewritten as described above."""
    if not isinstance(document, dict):
        raise violations_invalid([Violation((), "The document is a JSON object.")])
    doc = dict(document)
    variables = doc.get("variables")
    if isinstance(variables, dict):
        variables = dict(variables)
        final = variables.get(FINAL, ...)
        if final is None or (isinstance(final, dict) and final.get("value") is None):
            variables.pop(FINAL)
        for name, variable in list(variables.items()):
            if isinstance(variable, dict) and (
                variable.get("type") is None
                and "type" in variable
                or variable.get("type") == "null"
            ):
                given = variable.get("metadata")
                metadata = given if isinstance(given, dict) else {}
                variables[name] = {
                    **variable,
                    "type": VariableType.JSON,
                    "metadata": {**metadata, "value_type": "null"},
                }
        doc["variables"] = variables
    history = doc.get("history")
    if isinstance(history, dict):
        history = dict(history)
        if isinstance(history.get("checkpoints"), list):
            history["checkpoints"] = [_normalized_checkpoint(c) for c in history["checkpoints"]]
        if isinstance(history.get("mutations"), list):
            history["mutations"] = [_normalized_mutation(m) for m in history["mutations"]]
        doc["history"] = history
    return doc


def _normalized_checkpoint(checkpoint: Any) -> Any:
    if not isinstance(checkpoint, dict):
        return checkpoint
    checkpoint = dict(checkpoint)
    original = checkpoint.get("checkpoint_id")
    if not (isinstance(original, str) and CHECKPOINT_ID_PATTERN.fullmatch(original)):
        checkpoint["checkpoint_id"] = _hashed_id("ckpt-", original)
        checkpoint["original_checkpoint_id"] = original
    if isinstance(checkpoint.get("folded_mutations"), list):
        checkpoint["folded_mutations"] = [
            _normalized_mutation(m) for m in checkpoint["folded_mutations"]
        ]
    return checkpoint


def _normalized_mutation(mutation: Any) -> Any:
    original = mutation.get("mutation_id") if isinstance(mutation, dict) else None
    if not isinstance(mutation, dict) or (
        isinstance(original, str) and MUTATION_ID_PATTERN.fullmatch(original)
    ):
        return mutation
    return {**mutation, "mutation_id": _hashed_id("mut-", original)}


def _variable_plan_row(name: str, variable: dict[str, Any], field: Where) -> dict[str, Any]:
    violations = [
        Violation((*field, *e.absolute_path), e.message)
        for e in variable_validator().iter_errors(variable)
    ]
    if violations:
        raise violations_invalid(violations)
    if variable["name"] != name:
        raise Invalid(
            f"The variable stored under {name!r} is named {variable['name']!r}.",
            field=(*field, "name"),
        )
    if len(name) > MAX_NAME_LENGTH:
        raise Invalid(
            f"A variable name has at most {MAX_NAME_LENGTH} characters.",
            field=(*field, "name"),
            limit=MAX_NAME_LENGTH,
        )
    metadata = variable.get("metadata") or {}
    type_ = (
        VariableType.NULL if metadata.get("value_type") == VariableType.NULL else variable["type"]
    )
    check_type(type_, variable["value"], field=(*field, "type"))
    now = timezone.now()
    created_at = _parse_time(variable.get("created_at"), (*field, "created_at")) or now
    updated_at = _parse_time(variable.get("updated_at"), (*field, "updated_at")) or created_at
    scope = metadata.get("scope", Scope.SESSION)
    ttl = _bounded(metadata.get("ttl_seconds"), MAX_TTL, (*field, "metadata", "ttl_seconds"))
    if scope == Scope.TEMPORARY and ttl is None:
        raise Invalid(
            "A temporary variable needs metadata.ttl_seconds.",
            field=(*field, "metadata", "ttl_seconds"),
        )
    if scope != Scope.TEMPORARY and ttl is not None:
        raise Invalid(
            "Only temporary variables have a TTL.", field=(*field, "metadata", "ttl_seconds")
        )
    return {
        "name": name,
        "type": type_,
        "value": variable["value"],
        "description": variable.get("description", ""),
        "source": _bounded(variable.get("source", ""), 200, (*field, "source")),
        "read_only": bool(metadata.get("read_only", False)) or name in (PROMPT, FINAL),
        "scope": scope,
        "ttl_seconds": ttl,
        "expires_at": updated_at + timedelta(seconds=ttl) if ttl is not None else None,
        "access_count": _bounded(
            variable.get("access_count", 0), MAX_COUNT, (*field, "access_count")
        ),
        "extra_metadata": {k: v for k, v in metadata.items() if k not in KNOWN_VARIABLE_METADATA},
        "created_at": created_at,
        "updated_at": updated_at,
    }


def _mutation_plan_row(mutation: dict[str, Any], field: Where) -> dict[str, Any]:
    metadata = mutation.get("metadata") or {}
    operation = mutation["operation"]
    reason = metadata.get("reason")
    if (
        operation == "update"
        and mutation["variable_name"] == "*"
        and isinstance(reason, str)
        and reason.startswith(ROLLBACK_REASON)
    ):
        operation = RlmMutation.Operation.ROLLBACK
    return {
        "mutation_id": mutation["mutation_id"],
        "operation": operation,
        "variable_name": _bounded(mutation["variable_name"], 128, (*field, "variable_name")),
        "old_value": mutation.get("old_value"),
        "new_value": mutation.get("new_value"),
        "source": _bounded(mutation.get("source", ""), 200, (*field, "source")),
        "metadata": metadata,
        "timestamp": _parse_time(mutation["timestamp"], (*field, "timestamp")),
    }


def _folded_rows(folded: Any, field: Where) -> list[dict[str, Any]]:
    """A checkpoint's ``folded_mutations``, each checked against the seed's StateMutation."""
    if folded is None:
        return []
    if not isinstance(folded, list):
        raise Invalid("folded_mutations is a list of StateMutation objects.", field=field)
    violations = [
        Violation((*field, i, *e.absolute_path), e.message)
        for i, mutation in enumerate(folded)
        for e in mutation_validator().iter_errors(mutation)
    ]
    if violations:
        raise violations_invalid(violations)
    return [_mutation_plan_row(m, (*field, i)) for i, m in enumerate(folded)]


def _snapshot_rows(snapshot: Any, field: Where) -> dict[str, Any] | None:
    """An exported checkpoint snapshot as variable rows, or None when the checkpoint has none."""
    if snapshot is None:
        return None
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("variables"), dict):
        raise Invalid(
            "A checkpoint snapshot is {completion_status, variables: {...}}.", field=field
        )
    status = snapshot.get("completion_status", RlmState.Completion.INCOMPLETE)
    if status not in RlmState.Completion.values:
        raise Invalid(f"Unknown completion status {status!r}.", field=(*field, "completion_status"))
    variables = snapshot["variables"]
    if len(variables) > MAX_VARIABLES:
        raise Invalid(
            f"A snapshot holds at most {MAX_VARIABLES} variables.", field=(*field, "variables")
        )
    rows = []
    for name, variable in variables.items():
        where = (*field, "variables", name)
        if not isinstance(variable, dict):
            raise Invalid("A snapshot variable is a Variable object.", field=where)
        rows.append(_variable_plan_row(name, variable, where))
    final = next((r for r in rows if r["name"] == FINAL), None)
    return {
        "completion_status": status,
        "completed_at": final["updated_at"] if final and status == "complete" else None,
        "variables": rows,
    }


def import_plan(document: Any) -> ImportPlan:
    """Normalize, validate against the seed schema and turn ``document`` into rows to create.

    422 ``validation_error`` (with every schema violation in ``errors``) for a document
    the seed schema refuses after normalization; 409 ``variable_limit_reached``,
    ``checkpoint_limit_reached`` or ``history_limit_reached`` past the seed's limits.
    """
    doc = normalize(document)
    violations = schema_errors(doc)
    if violations:
        first = violations[0]
        where = ".".join(str(p) for p in first.field)
        raise violations_invalid(violations, detail=f"{where}: {first.msg}" if where else first.msg)
    variables = doc["variables"]
    history = doc.get("history") or {}
    mutations = history.get("mutations") or []
    checkpoints = history.get("checkpoints") or []
    metadata = doc.get("metadata") or {}
    if len(variables) > MAX_VARIABLES:
        raise Conflict(
            "variable_limit_reached",
            f"A state holds at most {MAX_VARIABLES} variables.",
            limit=MAX_VARIABLES,
        )
    if len(checkpoints) > MAX_CHECKPOINTS:
        raise Conflict(
            "checkpoint_limit_reached",
            f"A state keeps at most {MAX_CHECKPOINTS} checkpoints.",
            limit=MAX_CHECKPOINTS,
        )
    if len(mutations) > MAX_HISTORY_ENTRIES:
        raise Conflict(
            "history_limit_reached",
            f"A state's log holds at most {MAX_HISTORY_ENTRIES} mutations.",
            limit=MAX_HISTORY_ENTRIES,
        )
    checkpoint_rows = [
        {
            "checkpoint_id": c["checkpoint_id"],
            "original_checkpoint_id": str(c.get("original_checkpoint_id") or "")[:200],
            "name": _bounded(c["name"], 200, ("history", "checkpoints", i, "name")),
            "description": c.get("description", ""),
            "timestamp": _parse_time(c["timestamp"], ("history", "checkpoints", i, "timestamp")),
            "snapshot": _snapshot_rows(
                c.get("snapshot"), ("history", "checkpoints", i, "snapshot")
            ),
            "folded_mutations": _folded_rows(
                c.get("folded_mutations"), ("history", "checkpoints", i, "folded_mutations")
            ),
        }
        for i, c in enumerate(checkpoints)
    ]
    ids = [m["mutation_id"] for m in mutations] + [
        m["mutation_id"] for c in checkpoint_rows for m in c["folded_mutations"]
    ]
    if len(set(ids)) != len(ids):
        raise Invalid("Mutation ids must be unique.", field=("history", "mutations"))
    rows = [_variable_plan_row(name, v, ("variables", name)) for name, v in variables.items()]
    final = next((r for r in rows if r["name"] == FINAL), None)
    status = metadata.get("completion_status", RlmState.Completion.INCOMPLETE)
    if final is not None:
        status = RlmState.Completion.COMPLETE
    elif status == RlmState.Completion.COMPLETE:
        status = RlmState.Completion.INCOMPLETE
    return ImportPlan(
        version=_bounded(doc["version"], 32, ("version",)),
        state_id=doc["state_id"],
        session_id=_bounded(doc.get("session_id") or "", 200, ("session_id",)),
        tree_id=doc.get("tree_id") or "",
        variables=rows,
        mutations=[
            _mutation_plan_row(m, ("history", "mutations", i)) for i, m in enumerate(mutations)
        ],
        checkpoints=checkpoint_rows,
        mutation_count=_bounded(
            metadata.get("mutation_count", 0), MAX_MUTATION_SEQ, ("metadata", "mutation_count")
        ),
        completion_status=status,
        completed_at=final["updated_at"] if final else None,
        created_at=_parse_time(metadata.get("created_at"), ("metadata", "created_at")),
        updated_at=_parse_time(metadata.get("last_updated_at"), ("metadata", "last_updated_at")),
        execution_config=metadata.get("execution_config") or {},
    )


def _imported_snapshot(state: RlmState, snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    """An imported checkpoint snapshot in the stored form, large values written to files."""
    if snapshot is None:
        return None
    rows = []
    for row in snapshot["variables"]:
        stored, file_name, size = value_store(state, row["name"], row["value"])
        variable = RlmVariable(
            state=state, **{**row, "value": stored, "file_name": file_name, "size_bytes": size}
        )
        rows.append(variable_snapshot(variable))
    completed_at = snapshot["completed_at"]
    return {
        "completion_status": snapshot["completion_status"],
        "completed_at": completed_at.isoformat() if completed_at else None,
        "variables": sorted(rows, key=lambda r: r["name"]),
    }


def state_import(*, organization: Organization, document: Any, actor: str = "") -> StateView:
    """Create a state from a seed-schema document (normalized as described above).

    One transaction: the new state is answered as it stands, read before the commit.
    ``session_id`` links the state to a session of ``organization`` when it names one.
    422 for a document the seed schema or its limits refuse (see ``import_plan``); 409
    ``state_exists`` when the organization already has a state of that id.
    """
    plan = import_plan(document)
    session = None
    session_ref = plan.session_id
    if plan.session_id:
        try:
            session = session_get(organization=organization, session_id=plan.session_id)
            session_ref = ""
        except NotFound:
            session = None
    now = timezone.now()
    with transaction.atomic():
        try:
            with transaction.atomic():  # a savepoint: a taken id is a 409, not a broken transaction
                state = RlmState.objects.create(
                    organization=organization,
                    state_id=plan.state_id or state_id_new(organization),
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
        state = state_lock(state)
        variables = []
        for row in plan.variables:
            stored, file_name, size = value_store(
                state, row["name"], row["value"], field=("variables", row["name"], "value")
            )
            variables.append(
                RlmVariable(
                    state=state,
                    **{**row, "value": stored, "file_name": file_name, "size_bytes": size},
                )
            )
        RlmVariable.objects.bulk_create(variables, batch_size=500)
        # A plan row is a mutation's fields, as a folded one is below.
        mutations = [
            RlmMutation(state=state, seq=seq, **row)
            for seq, row in enumerate(plan.mutations, start=1)
        ]
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
                checkpoint_id = checkpoint_id_new(state)
                while checkpoint_id in taken:
                    checkpoint_id = checkpoint_id_new(state)
            taken.add(checkpoint_id)
            folded = [
                mutation_row(RlmMutation(seq=int(m["mutation_id"][4:], 16), **m))
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
        state_event_append(state, "rlm.state_imported", actor)
        return state_view(state)
