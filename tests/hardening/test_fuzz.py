"""Schemathesis against the project's own OpenAPI schema on a live server: every
operation, generated input, real HTTP through the real middleware stack.

No input may produce a 5xx; every error is in the documented format; every response
with a documented status validates against the schema. Path parameters are real ids of
the caller's own objects, so generated bodies reach the handlers instead of stopping at
404. ``CONTEXTOPS_FUZZ_EXAMPLES`` sets the examples per operation (``make fuzz`` runs more).
"""

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from contextops.api import api as ninja_api
from frames import services

EXAMPLES = int(os.environ.get("CONTEXTOPS_FUZZ_EXAMPLES", "10"))


# The document the server serves at /api/v1/openapi.json, without an app attached, so
# every case goes over HTTP to the live server of its test.
schema = schemathesis.openapi.from_dict(ninja_api.get_openapi_schema(path_prefix="/api/v1/"))


@pytest.fixture
def real_ids(api):
    """Ids of objects the fuzzing agent owns, for every path parameter the API has."""
    session = services.session_create(organization=api.organization, agent=api.agent, identity={})
    root = services.frame_push(session=session, goal="Fuzz root", budget_total=10**7)
    frame = services.frame_push(session=session, parent=root, goal="Fuzz child", budget_total=10**6)
    handle = services.handle_add(frame=frame, kind="document", content="Fuzzing evidence.")
    ids = {"session_id": str(session.pk), "frame_id": str(frame.pk), "handle_id": str(handle.pk)}
    ids.update(_other_ids(api, session, frame))
    return ids


def _other_ids(api, session, frame) -> dict:
    """Ids from the other apps, created through the API the way an agent would."""
    ids = {}
    fact = api.post(
        "/facts", {"key": "fuzz_fact", "subject": "fuzz", "value": "v", "source": "user"}
    )
    if fact.status_code == 201:
        ids["key"] = "fuzz_fact"
    state = api.post("/rlm/states", {"prompt": "Fuzz the API", "session_id": str(session.pk)})
    if state.status_code == 201:
        ids["state_id"] = state.json().get("id") or state.json().get("state_id")
        api.put(f"/rlm/states/{ids['state_id']}/variables/fuzz_var", {"value": 1})
        ids["name"] = "fuzz_var"
    suspension = api.post(f"/frames/{frame.pk}/suspend", {"reason": "fuzz"})
    if suspension.status_code == 201:
        ids["token"] = suspension.json()["token"]
    compaction = api.post(f"/sessions/{session.pk}/compactions", {})
    if compaction.status_code == 202:
        ids["compaction_id"] = str(compaction.json()["id"])
    upload = api.post(
        "/imports",
        {
            "file_name": "fuzz.jsonl",
            "content": '{"type":"user","message":{"role":"user","content":"Fuzz"}}\n',
        },
    )
    if upload.status_code == 202:
        ids["import_id"] = upload.json()["id"]
    return ids


def documented_error_format(ctx, response, case):
    """Every 4xx body is ``{"error": code, "detail": sentence, ...}``."""
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body, dict), body
        assert isinstance(body.get("error"), str) and body["error"], body
        assert isinstance(body.get("detail"), str) and body["detail"], body
    return None


# One pytest item per operation, each with its own id: Schemathesis' own parametrization
# gives every operation the same node id, which pytest-xdist's group scheduler folds into
# a single item, so all but one operation would silently go unfuzzed.
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_no_input_produces_a_server_error_or_an_undocumented_body(
    operation, live_server, api, real_ids
):
    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    def fuzz(case):
        for name in list(case.path_parameters or {}):
            if name in real_ids:
                case.path_parameters[name] = real_ids[name]
        if case.query and "wait" in case.query:
            case.query["wait"] = 0  # the long poll has its own tests; here it would only sleep
        case.call_and_validate(
            base_url=live_server.url,
            headers={"Authorization": f"Bearer {api.key}"},
            checks=[
                checks.not_a_server_error,
                checks.response_schema_conformance,
                documented_error_format,
            ],
        )

    fuzz()


def test_chained_calls_along_the_schemas_links_never_fail_the_server(live_server, api, real_ids):
    """Stateful: Schemathesis follows the OpenAPI links (session -> frame -> handle, fact,
    state, suspension, compaction), feeding each response's ids into the next calls."""

    class Agent(schema.as_state_machine()):
        def get_call_kwargs(self, case):
            return {
                "base_url": live_server.url,
                "headers": {"Authorization": f"Bearer {api.key}"},
            }

        def call(self, case, **kwargs):
            if case.query and "wait" in case.query:
                case.query["wait"] = 0
            return case.call(**kwargs)

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(
                response,
                checks=[
                    checks.not_a_server_error,
                    checks.response_schema_conformance,
                    documented_error_format,
                ],
            )

    Agent.run(
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=8,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
        )
    )


def test_the_schema_names_each_request_body_after_one_class_only():
    """Two body classes with the same name share one OpenAPI component, and one of them
    is then documented for both operations: the fuzzer, and every generated client,
    would send the other operation a body it refuses."""
    import inspect
    import typing

    from ninja import Schema

    from contextops.api import api

    owners: dict[str, dict[type, set[str]]] = {}

    def walk(kind, label: str, seen: set) -> None:
        if isinstance(kind, type) and issubclass(kind, Schema):
            if kind in seen:
                return
            seen.add(kind)
            owners.setdefault(kind.__name__, {}).setdefault(kind, set()).add(label)
            for field in kind.model_fields.values():
                walk(field.annotation, label, seen)
        for argument in typing.get_args(kind):  # Optional[...], list[...], unions
            walk(argument, label, seen)

    for prefix, router in api._routers:
        for path, path_view in router.path_operations.items():
            for operation in path_view.operations:
                label = f"{'/'.join(operation.methods)} {prefix}{path}"
                for parameter in inspect.signature(operation.view_func).parameters.values():
                    walk(parameter.annotation, label, set())
    shared = {
        name: {f"{cls.__module__}.{cls.__qualname__}": sorted(ops) for cls, ops in classes.items()}
        for name, classes in owners.items()
        if len(classes) > 1
    }
    assert shared == {}
