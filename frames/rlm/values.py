"""What an RLM state holds and how: the seed's limits, ids, variable names, types and values.

The limits come from the seed schema's ``limits`` section (``schema.seed_limits``). A
value is measured as compact UTF-8 JSON (``encode_value``); above the inline limit it is
written once to a file of Django's default storage and never changed, so the mutation log
and checkpoints can point at it (``value_store``); readers get it back with
``stored_value``. Errors name the input they are about (``field``), never where a request
carried it.
"""

import json
import re
import secrets
from collections.abc import Sequence
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from contextops.errors import Invalid
from contextops.models import Organization

from .models import RlmState, VariableType
from .schema import seed_limits

_LIMITS = seed_limits()
MAX_VARIABLES = _LIMITS["max_variables_per_state"]
MAX_NAME_LENGTH = _LIMITS["max_variable_name_length"]
MAX_INLINE_BYTES = _LIMITS["max_inline_value_size_bytes"]
MAX_HISTORY_ENTRIES = _LIMITS["max_history_entries"]
MAX_CHECKPOINTS = _LIMITS["max_checkpoints"]
MAX_MUTATION_SEQ = 0xFFFFFFFF  # ``mut-`` ids have 8 hex digits
MAX_TTL = 2**31 - 1  # ``ttl_seconds`` is a 32-bit column

NAME_PATTERN = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TREE_ID_PATTERN = re.compile(r"tree-[a-f0-9]{8}")
STATE_ID_PATTERN = re.compile(r"state-[a-f0-9]{8}")
CHECKPOINT_ID_PATTERN = re.compile(r"ckpt-[a-f0-9]{8}")
MUTATION_ID_PATTERN = re.compile(r"mut-[a-f0-9]{8}")
FINAL, PROMPT = "Final", "prompt"

# An input an error is about, in the caller's words: ``"value"``, ``("variables", "x", "type")``.
FieldPath = str | Sequence[str | int]


# --- ids ----------------------------------------------------------------------------


def state_id_new(organization: Organization) -> str:
    """A ``state-`` id no state of ``organization`` has yet."""
    while True:
        candidate = f"state-{secrets.token_hex(4)}"
        if not RlmState.objects.filter(organization=organization, state_id=candidate).exists():
            return candidate


# --- names and types ----------------------------------------------------------------


def validate_name(name: Any, *, field: FieldPath) -> str:
    """``name`` when it is a variable name the seed allows; 422 on ``field`` otherwise."""
    if not isinstance(name, str) or not name:
        raise Invalid("A variable name is required.", field=field)
    if len(name) > MAX_NAME_LENGTH:
        raise Invalid(
            f"A variable name has at most {MAX_NAME_LENGTH} characters.",
            field=field,
            limit=MAX_NAME_LENGTH,
        )
    if not NAME_PATTERN.fullmatch(name):
        raise Invalid(
            "A variable name is an identifier: a letter or _, then letters, digits or _.",
            field=field,
        )
    return name


def infer_type(value: Any) -> str:
    """The variable type a value gets when its writer names none."""
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
    fits: dict[str, bool] = {
        VariableType.NUMBER: isinstance(value, int | float) and not isinstance(value, bool),
        VariableType.BOOLEAN: isinstance(value, bool),
        VariableType.NULL: value is None,
        VariableType.ARRAY: isinstance(value, list),
        VariableType.JSON: True,
    }
    return fits.get(type_, isinstance(value, str))


def check_type(type_: str, value: Any, *, field: FieldPath) -> None:
    """422 on ``field`` for an unknown type or a value that cannot be of ``type_``."""
    if type_ not in VariableType.values:
        raise Invalid(f"Unknown variable type {type_!r}.", field=field)
    if not fits_type(type_, value):
        raise Invalid(f"A {type_} variable cannot hold this value.", field=field)


# --- values -------------------------------------------------------------------------


def encode_value(value: Any, *, field: FieldPath = "value") -> bytes:
    """The value as compact UTF-8 JSON: what sizes are measured on and files hold.

    422 on ``field`` for what JSON cannot hold (NaN, Infinity, objects).
    """
    try:
        return json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()
    except (TypeError, ValueError):
        raise Invalid("The value must be JSON (no NaN or Infinity).", field=field) from None


def value_store(
    state: RlmState, name: str, value: Any, *, field: FieldPath = "value"
) -> tuple[Any, str, int]:
    """``(inline value, file name, size)``: above the inline limit the value goes to a file.

    Files are written once and never changed, so the log and checkpoints can point at them.
    """
    data = encode_value(value, field=field)
    if len(data) <= MAX_INLINE_BYTES:
        return value, "", len(data)
    path = (
        f"rlm/{state.organization_id}/{state.state_id}/variables/{name}-{secrets.token_hex(8)}.json"
    )
    return None, default_storage.save(path, ContentFile(data)), len(data)


def load_file(file_name: str) -> Any:
    """The JSON value a value file holds."""
    with default_storage.open(file_name, "rb") as handle:
        return json.loads(handle.read().decode())


def stored_value(value: Any, file_name: str) -> Any:
    """The value a reader sees, loaded from its file when it lives in one."""
    return load_file(file_name) if file_name else value
