"""The RLM state interchange schema (docs/concepts.md#rlm-state), shipped with the app as
``seed_schema.yaml``.

The seed file is a JSON Schema written in YAML followed by prose sections (rules, scopes,
limits, an agent protocol, examples). ``seed_schema()`` keeps only the JSON Schema
keywords of its top level: the prose sections are not schema (``examples`` there is a
mapping, which the 2020-12 metaschema refuses). Everything below ``$defs`` is used as
written, quirks included: the ``type`` enum of a Variable holds YAML ``null`` (None), not
the string ``"null"``, and ``format: date-time`` is an annotation unless a format checker
for it is installed, so the import checks timestamps itself.

A violation names where in the checked document it is (``Violation.field``);
``violations_invalid`` turns a list of them into the one 422 that lists them all.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from contextops.errors import Invalid

SEED_PATH = Path(__file__).with_name("seed_schema.yaml")
SCHEMA_KEYWORDS = (
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "required",
    "properties",
    "$defs",
)


@lru_cache(maxsize=1)
def seed_document() -> dict[str, Any]:
    """The whole seed file, parsed: schema, rules, limits and examples."""
    with SEED_PATH.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def schema_from_document(document: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema part of a parsed seed document."""
    return {key: document[key] for key in SCHEMA_KEYWORDS if key in document}


@lru_cache(maxsize=1)
def seed_schema() -> dict[str, Any]:
    return schema_from_document(seed_document())


@lru_cache(maxsize=1)
def seed_validator() -> Draft202012Validator:
    schema = seed_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def seed_limits() -> dict[str, int]:
    return dict(seed_document()["limits"])


@dataclass(frozen=True)
class Violation:
    """One way a document breaks the seed schema: where in the document, and how."""

    field: tuple[str | int, ...]
    msg: str


def violations_invalid(violations: Sequence[Violation], *, detail: str = "") -> Invalid:
    """422 ``validation_error`` listing every violation; the first one's message is the
    detail unless ``detail`` says otherwise.

    The documents checked are request bodies (an imported state) or parts of one (an
    execution config), so each violation is located under ``body``: ``Invalid`` locates a
    single field by itself, a list of them is located here.
    """
    errors = [{"loc": ["body", *v.field], "msg": v.msg} for v in violations]
    return Invalid(detail or violations[0].msg, errors=errors)


def schema_errors(document: Any) -> list[Violation]:
    """Every violation of the seed schema in ``document``, in document order; empty when valid."""
    errors = sorted(seed_validator().iter_errors(document), key=lambda e: list(e.absolute_path))
    return [Violation(tuple(e.absolute_path), e.message) for e in errors]


def execution_config_check(config: Any) -> None:
    """422 listing every violation of the seed's ``ExecutionConfig`` in ``config`` (the
    input ``execution_config``)."""
    probe = {
        "version": "1.0.0",
        "state_id": "state-00000000",
        "variables": {},
        "metadata": {"execution_config": config},
    }
    violations = [
        Violation(("execution_config", *v.field[2:]), v.msg) for v in schema_errors(probe)
    ]
    if violations:
        raise violations_invalid(violations)


@lru_cache(maxsize=1)
def variable_validator() -> Draft202012Validator:
    """The seed's ``Variable`` definition on its own.

    The seed puts ``additionalProperties`` inside ``VariableStore.properties``, where it
    names a property instead of constraining the others, so the whole-document schema
    checks only ``Final`` and ``prompt``; imports check every variable with this.
    """
    schema = seed_schema()
    return Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/Variable"},
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


@lru_cache(maxsize=1)
def mutation_validator() -> Draft202012Validator:
    """The seed's ``StateMutation`` definition on its own, for the entries folded into a
    checkpoint: the document schema does not reach them (see ``interchange``)."""
    schema = seed_schema()
    return Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/StateMutation"},
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
