"""A query parameter the API does not declare is refused with a 422 naming it, and changes
nothing, as a body field it does not know is (test_strict_bodies.py).

``GET /sessions?stauts=active`` would otherwise answer every session, and an agent would
never learn of its typo. Operations come from the OpenAPI schema, so a new endpoint is
covered the day it is added; each is sent the valid request of the authorization matrix
(tests/hardening/world.py) with one parameter too many.
"""

import pytest
from django.test import Client

from contextops.api import api as ninja_api
from frames.models import Event, Frame
from tests.hardening.snapshots import organization_rows
from tests.hardening.world import REQUESTS, call, request_for

SCHEMA = ninja_api.get_openapi_schema()
TYPO = "limt"  # a parameter no operation declares: ``limit`` misspelt


def _operations() -> list[tuple[str, str]]:
    return sorted(
        (method.upper(), path.removeprefix("/api/v1"))
        for path, item in SCHEMA["paths"].items()
        for method in item
        if method in {"get", "post", "put", "delete", "patch"}
    )


def _declared(method: str, path: str) -> set[str]:
    operation = SCHEMA["paths"]["/api/v1" + path][method.lower()]
    return {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}


OPERATIONS = _operations()


# Acme's world is built once for the module (``acme_once`` in conftest.py); each test runs
# in a transaction rolled back when it ends, so none sees what another changed.
@pytest.fixture
def api(acme_once, db):
    return acme_once.api_for_test()


@pytest.fixture
def acme(acme_once, db) -> dict:
    return acme_once.world_for_test()


def _refused_naming(response, *names: str) -> None:
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "validation_error", answer
    assert answer["errors"] == [
        {"loc": ["query", name], "msg": "Extra inputs are not permitted"} for name in names
    ], answer
    assert answer["detail"] == f"{names[0]}: Extra inputs are not permitted", answer


def test_no_operation_declares_the_typo():
    assert len(OPERATIONS) > 80
    assert [op for op in OPERATIONS if TYPO in _declared(*op)] == []


@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_operation_refuses_a_query_parameter_it_does_not_declare(
    method, path, api, acme, jobs_sent
):
    target, body = request_for(method, path, acme["ids"])
    before = organization_rows("Acme")
    key = None if (method, path) == ("GET", "/health") else api.key
    typo = f"{target}{'&' if '?' in target else '?'}{TYPO}=5"
    _refused_naming(call(Client(), method, typo, key, body), TYPO)
    assert organization_rows("Acme") == before
    assert jobs_sent == []
    if method != "GET":
        # The control: without the parameter too many, the same request is Acme's own
        # valid write and gets its documented answer.
        own = call(Client(), method, target, key, body)
        assert own.status_code == REQUESTS[method, path].own, own.content


def test_a_misspelt_filter_of_a_list_is_refused_naming_it(api, start_session):
    start_session()
    assert api.get("/sessions", {"status": "ended"}).json()["count"] == 0  # the filter works
    _refused_naming(api.get("/sessions", {"stauts": "ended"}), "stauts")
    _refused_naming(api.get("/sessions", {"limt": "1", "ofset": "1"}), "limt", "ofset")
    _refused_naming(api.get("/facts", {"key": "some_fact"}), "key")


def test_a_declared_value_is_checked_before_the_unknown_names(api):
    response = api.get("/sessions", {"limit": "0", "limt": "5"})
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["errors"]] == [["query", "limit"]]


def test_a_get_one_endpoint_refuses_parameters_it_takes_none_of(api, start_session):
    session = start_session()
    assert api.get(f"/sessions/{session['id']}").status_code == 200
    _refused_naming(api.get(f"/sessions/{session['id']}", {"verbose": "1"}), "verbose")
    # A path parameter is not a query parameter.
    _refused_naming(
        api.get(f"/sessions/{session['id']}", {"session_id": session["id"]}), "session_id"
    )


def test_a_write_with_an_unknown_parameter_changes_nothing(api, start_session):
    session = start_session()
    events = Event.objects.count()
    frames = f"/sessions/{session['id']}/frames"
    body = {"goal": "g", "budget": {"total": 100}}
    _refused_naming(api.post(frames + "?dry_run=true", body), "dry_run")
    assert not Frame.objects.filter(session_id=session["id"]).exists()
    assert Event.objects.count() == events
    assert api.post(frames, body).status_code == 201  # the control


def test_the_key_is_checked_before_the_parameters(api):
    response = Client().get(f"/api/v1/sessions?{TYPO}=5")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"


def test_the_dashboard_still_takes_parameters_the_api_would_refuse(member_client):
    response = member_client.get("/?stauts=active")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
