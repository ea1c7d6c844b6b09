"""Schemathesis against the project's own OpenAPI schema on a live server: every
operation, generated input, real HTTP through the real middleware stack.

No input may produce a 5xx; every error is in the documented format; every response
with a documented status validates against the schema. Path parameters are mostly real
ids of the caller's own objects, so generated bodies reach the handlers instead of
stopping at 404; a share keeps the generated ids, for the 404 path. Every run draws a
fresh seed (``tests/fuzz_seed.py``: printed, and ``CONTEXTOPS_FUZZ_SEED`` replays it).
``CONTEXTOPS_FUZZ_EXAMPLES`` sets the examples per operation, ``CONTEXTOPS_FUZZ_SCENARIOS``
the stateful scenarios and ``CONTEXTOPS_FUZZ_STEPS`` the calls in each (``make fuzz``
runs more of all three).
"""

import os
import re
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import FlakyStrategyDefinition
from schemathesis import checks
from schemathesis.core.parameters import ParameterLocation

from contextops.api import LINK_PRODUCERS
from contextops.api import api as ninja_api
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.fuzz_seed import ENV
from tests.hardening.conftest import acme_committed_fixtures

EXAMPLES = int(os.environ.get("CONTEXTOPS_FUZZ_EXAMPLES", "10"))
SCENARIOS = int(os.environ.get("CONTEXTOPS_FUZZ_SCENARIOS", "30"))
STEPS = int(os.environ.get("CONTEXTOPS_FUZZ_STEPS", "8"))

# Out of ten values drawn for each case of an operation with path parameters, how many
# keep the generated (random) ids and so take the 404 path; the others get real ids.
# Hypothesis weights the ends of a range, so it comes to about one case in seven.
RANDOM_IDS_IN_TEN = 1

# The document the server serves at /api/v1/openapi.json, without an app attached, so
# every case goes over HTTP to the live server of its test.
schema = schemathesis.openapi.from_dict(ninja_api.get_openapi_schema(path_prefix="/api/v1/"))

# One pytest item per operation, each with its own id: Schemathesis' own parametrization
# gives every operation the same node id, which pytest-xdist's group scheduler folds into
# a single item, so all but one operation would silently go unfuzzed.
OPERATIONS = [result.ok() for result in schema.get_all_operations()]
PATH_PARAMETERS = {
    name for operation in OPERATIONS for name in re.findall(r"\{(\w+)\}", operation.path)
}


def fuzz_settings(**extra) -> settings:
    """The run's seed decides the inputs (no example database replays older ones)."""
    return settings(
        derandomize=False,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        **extra,
    )


# Acme's world is built and committed once for the module (``acme_committed`` in
# conftest.py) and every table is put back to it before each test: the fuzzed calls of one
# test (a session deleted, a key revoked) never reach the next one.
_django_db_helper, api, acme = acme_committed_fixtures()


@pytest.fixture
def real_ids(acme) -> dict[str, str]:
    """Ids of objects the fuzzing agent owns, for every path parameter the API has: Acme's
    world (tests/hardening/conftest.py), made through the API the way an agent would."""
    return {name: acme["ids"][name] for name in PATH_PARAMETERS if name in acme["ids"]}


def test_every_path_parameter_of_the_schema_has_a_real_id(real_ids):
    """An operation added with a path parameter nobody makes a real id for would be
    fuzzed into 404s only: name it in the ``acme`` fixture."""
    assert sorted(PATH_PARAMETERS - set(real_ids)) == []


def test_the_real_ids_find_real_objects(api, real_ids):
    """Every read by id answers 200 with the real ids: they name objects the caller has."""
    reads = [op.path for op in OPERATIONS if op.method == "get" and "{" in op.path]
    answers = {path: api.get(path.removeprefix("/api/v1").format(**real_ids)) for path in reads}
    assert {path: r.status_code for path, r in answers.items() if r.status_code != 200} == {}


def test_the_real_handle_id_finds_a_real_handle(api, real_ids):
    """The one path parameter no read takes."""
    response = api.post(f"/handles/{real_ids['handle_id']}/attention", {"weight": 1.5})
    assert response.status_code == 200, response.content


def documented_error_format(ctx, response, case):
    """Every 4xx body is ``{"error": code, "detail": sentence, ...}``."""
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body, dict), body
        assert isinstance(body.get("error"), str) and body["error"], body
        assert isinstance(body.get("detail"), str) and body["detail"], body
    return None


CHECKS = [checks.not_a_server_error, checks.response_schema_conformance, documented_error_format]


@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_no_input_produces_a_server_error_or_an_undocumented_body(
    operation, live_server, api, real_ids, fuzz_seed
):
    @hypothesis_seed(fuzz_seed)
    @given(case=operation.as_strategy(), draw=st.integers(min_value=1, max_value=10))
    @settings(fuzz_settings(max_examples=EXAMPLES))
    def fuzz(case, draw):
        if draw > RANDOM_IDS_IN_TEN:
            for name in list(case.path_parameters or {}):
                case.path_parameters[name] = real_ids[name]
        if case.query and "wait" in case.query:
            case.query["wait"] = 0  # the long poll has its own tests; here it would only sleep
        case.call_and_validate(
            base_url=live_server.url,
            headers={"Authorization": f"Bearer {api.key}"},
            checks=CHECKS,
        )

    fuzz()


def _scenario_ids(api) -> dict[str, str]:
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    root = frame_push(session=session, goal="Fuzz root", budget_total=10**7)
    frame = frame_push(session=session, parent=root, goal="Fuzz child", budget_total=10**6)
    handle = handle_add(frame=frame, kind="document", content="Fuzzing evidence.")
    return {"session_id": str(session.pk), "frame_id": str(frame.pk), "handle_id": str(handle.pk)}


# Operations that a stateful run must reach with an id a link carried and answer 2xx.
# Each run is a fresh random walk; this floor sits well under what CI's small runs reach.
LINKED_OPERATIONS_REACHED_AT_LEAST = 8


def test_chained_calls_along_the_schemas_links_never_fail_the_server(
    live_server, api, real_ids, fuzz_seed
):
    """Stateful: Schemathesis follows the schema's OpenAPI links (a session to its frames,
    a frame to its handles and suspension, a state to its variables, checkpoints and
    rollback, ...), feeding each answer's ids into the next calls, and gets there."""
    reached: set[str] = set()

    @hypothesis_seed(fuzz_seed)
    class Agent(schema.as_state_machine()):
        def get_call_kwargs(self, case):
            return {"base_url": live_server.url}

        def before_call(self, case):
            # The caller's key on every case, the negative ones too: a case whose header
            # Schemathesis dropped would only ever test the 401.
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {api.key}"}
            if case.query and "wait" in case.query:
                case.query["wait"] = 0

        def setup(self):
            # Each scenario its own session, frames and handle: one that a scenario ends
            # or deletes leaves the next one something to work on.
            self.ids = {**real_ids, **_scenario_ids(api)}

        def step(self, input):
            if input.transition is None:  # a first call: real ids, where no link gives one
                for name in list(input.case.path_parameters or {}):
                    input.case.path_parameters[name] = self.ids[name]
            output = super().step(input)
            linked = any(where == ParameterLocation.PATH for where, _ in input.applied_parameters)
            if linked and 200 <= output.response.status_code < 300:
                reached.add(input.case.operation.label)
            return output

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=CHECKS)

    try:
        Agent.run(settings=fuzz_settings(max_examples=SCENARIOS, stateful_step_count=STEPS))
    except FlakyStrategyDefinition:
        # Which rules are open depends on the live server's answers (a session deleted in
        # one scenario), so Hypothesis' record of earlier draws can disagree with a replay.
        # That is the generator's bookkeeping, not a server failure: a failed check raises
        # its own error (or FlakyFailure), never this; how far the scenarios got is checked.
        pass
    print(f"{len(reached)} operations reached along links:", *sorted(reached), sep="\n  ")
    assert len(reached) >= LINKED_OPERATIONS_REACHED_AT_LEAST, sorted(reached)


def test_the_served_schema_links_every_producer_to_the_operations_it_feeds(api):
    """The links are in the document clients read at /api/v1/openapi.json."""
    paths = api.client.get("/api/v1/openapi.json").json()["paths"]
    unlinked = [
        (method, path)
        for method, path in LINK_PRODUCERS
        if not any(
            response.get("links")
            for status, response in paths[path][method]["responses"].items()
            if str(status).startswith("2")
        )
    ]
    assert unlinked == []


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


def test_every_operation_that_takes_an_id_is_the_target_of_a_link():
    """Else the stateful run reaches it only with generated ids, that is with 404s."""
    paths = ninja_api.get_openapi_schema(path_prefix="/api/v1/")["paths"]
    operations = [(path, op) for path, item in paths.items() for op in item.values()]
    targets = {
        link["operationId"]
        for _, op in operations
        for response in op["responses"].values()
        for link in response.get("links", {}).values()
    }
    unlinked = [op["operationId"] for path, op in operations if "{" in path]
    assert [name for name in unlinked if name not in targets] == []


SEED_PROBE = """
import os, pathlib, pytest

@pytest.mark.parametrize("n", range(6))
def test_probe(n, fuzz_seed, worker_id):
    (pathlib.Path(os.environ["SEED_DIR"]) / f"seed-{worker_id}-{n}").write_text(str(fuzz_seed))

def test_fails(fuzz_seed):
    assert False
"""


def test_every_worker_of_a_run_fuzzes_with_the_seed_it_prints(pytester, monkeypatch):
    """The seed is drawn once, by xdist's controller, and is both workers'; a failure names it."""
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[2]))
    monkeypatch.setenv("SEED_DIR", str(pytester.path))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # a quicker start: xdist only
    pytester.makepyfile(test_probe=SEED_PROBE)
    result = pytester.runpytest_subprocess(
        "-p", "xdist.plugin", "-p", "tests.fuzz_seed", "-p", "no:cacheprovider", "-n", "2"
    )
    result.assert_outcomes(passed=6, failed=1)
    files = list(pytester.path.glob("seed-gw*"))
    assert {f.name.split("-")[1] for f in files} == {"gw0", "gw1"}
    seeds = {f.read_text() for f in files}
    assert len(seeds) == 1
    seed = seeds.pop()
    printed = f"fuzz seed: {seed} (reproduce with CONTEXTOPS_FUZZ_SEED={seed} make fuzz)"
    # In the header, in the failed test's report, and in the closing summary.
    result.stdout.fnmatch_lines([printed, "*- fuzz seed -*", printed, "*1 failed, 6 passed*"])


def test_the_seed_given_in_the_environment_is_the_runs(pytester, monkeypatch):
    monkeypatch.setenv(ENV, "12345")
    pytester.makepyfile("def test_seed(fuzz_seed):\n    assert fuzz_seed == 12345\n")
    pytester.runpytest_inprocess("-p", "tests.fuzz_seed", "-p", "no:django").assert_outcomes(
        passed=1
    )
