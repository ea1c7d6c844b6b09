"""The TypedDicts of contextops_client.types against real answers of the live server."""

import types
import typing
import uuid
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from contextops_client import (
    ContextPack,
    FactWrite,
    MessagesAppended,
    Pressure,
    RlmExport,
    RlmState,
    SessionData,
    Turn,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]


def shape_errors(value: Any, hint: Any, path: str) -> list[str]:
    """Where ``value`` has other keys than the TypedDicts in ``hint`` declare, at any depth
    (through lists, dicts and ``X | None``): missing required keys and undeclared ones."""
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not an object ({hint.__name__})"]
        keys = set(value)
        declared = hint.__required_keys__ | hint.__optional_keys__
        errors = []
        if missing := hint.__required_keys__ - keys:
            errors.append(f"{path}: {hint.__name__} requires {sorted(missing)}, not answered")
        if undeclared := keys - declared:
            errors.append(f"{path}: answered {sorted(undeclared)}, not in {hint.__name__}")
        fields = get_type_hints(hint)
        for key in sorted(keys & declared):
            errors += shape_errors(value[key], fields[key], f"{path}.{key}")
        return errors
    origin, args = get_origin(hint), get_args(hint)
    if origin is list and isinstance(value, list):
        return [e for i, v in enumerate(value) for e in shape_errors(v, args[0], f"{path}[{i}]")]
    if origin is dict and isinstance(value, dict):
        return [e for k, v in value.items() for e in shape_errors(v, args[1], f"{path}[{k!r}]")]
    if origin in (typing.Union, types.UnionType) and value is not None:
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return shape_errors(value, options[0], path)
    return []


def test_it_answers_exactly_the_keys_the_typed_dicts_declare(ops):
    session = ops.session(identity={"user_name": "Ada", "authority": "employee"})
    suffix = uuid.uuid4().hex[:8]
    with ops.frame(session, goal="Compare the shapes", budget=5_000) as frame:
        fact = ops.fact_write(f"cipher_{suffix}", "TLS 1.3 only", source="user", subject="cipher")
        ops.working_set_put(session, "draft", {"sections": 3})
        frame.handle("tool_result", content="Static RSA key exchange is gone.", priority="high")
        frame.usage(input_tokens=100, output_tokens=20)
        appended = ops.messages_append(
            session,
            [
                {"role": "user", "content": "Which ciphers?"},
                {"role": "assistant", "content": [{"type": "text", "text": "TLS 1.3 only."}]},
            ],
        )
        pack = frame.context_pack(budget_tokens=4_000, query="ciphers")
        pressure = ops.pressure(session)
        state = ops.rlm_state_create("List the ciphers", session=session)
        ops.rlm_variable_put(state["state_id"], "notes", ["TLS 1.3"], type="array")
        ops.rlm_checkpoint_create(state["state_id"], "with notes")
        state = ops.rlm_state_get(state["state_id"])
        exported = ops.rlm_state_export(state["state_id"])
        turns = ops.turns(session)
        session.refresh()

    # Empty lists would check nothing inside them.
    assert pack["facts"] and pack["working_set"] and pack["segments"] and pack["breadcrumbs"]
    assert pressure["eviction_candidates"] and turns and state["checkpoints"]
    answers: list[tuple[Any, Any, str]] = [
        (fact, FactWrite, "fact_write"),
        (pack, ContextPack, "context_pack"),
        (pressure, Pressure, "pressure"),
        (appended, MessagesAppended, "messages_append"),
        (turns, list[Turn], "turns"),
        (state, RlmState, "rlm_state_get"),
        (exported, RlmExport, "rlm_state_export"),
        (session.data, SessionData, "session"),
    ]
    errors = [e for value, hint, name in answers for e in shape_errors(value, hint, name)]
    assert errors == []

    # And a drifted answer is caught, however deep the drift.
    drifted = {**pack, "ranking": []}
    del drifted["query"]
    drifted["token_summary"] = {k: v for k, v in pack["token_summary"].items() if k != "used"}
    assert shape_errors(drifted, ContextPack, "pack") == [
        "pack: ContextPack requires ['query'], not answered",
        "pack: answered ['ranking'], not in ContextPack",
        "pack.token_summary: TokenSummary requires ['used'], not answered",
    ]
