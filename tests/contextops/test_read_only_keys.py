"""Read-only keys (create_api_key --read-only): every read works, every write is a 403
``read_only_key`` that changes nothing, and the admin shows which keys are read-only."""

import io
import re
import uuid

import pytest
from django.core.management import call_command
from django.test import Client

from contextops.api import api as ninja_api
from contextops.models import ApiKey
from frames.models import Frame, Session
from tests.conftest import ApiClient

SCHEMA = ninja_api.get_openapi_schema()
# The one POST that only reads: checking a value against the constraints.
READS_BY_POST = {("POST", "/constraints/check")}
WRITES = sorted(
    (method.upper(), path.removeprefix("/api/v1"))
    for path, item in SCHEMA["paths"].items()
    for method in item
    if method in {"post", "put", "patch", "delete"}
    and (method.upper(), path.removeprefix("/api/v1")) not in READS_BY_POST
)


def _read_only_key(org: str = "Acme", agent: str = "auditor") -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "create_api_key", "--org", org, "--agent", agent, "--read-only", stdout=out, stderr=err
    )
    assert "read-only" in err.getvalue()
    return out.getvalue().strip().splitlines()[-1]


@pytest.fixture
def reader(db) -> ApiClient:
    return ApiClient(key=_read_only_key())


@pytest.fixture
def acme_session(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 5_000)
    return session, frame


def test_a_read_only_key_reads_what_its_organization_holds(reader, acme_session):
    session, frame = acme_session
    assert reader.get("/sessions").json()["count"] == 1
    assert reader.get(f"/sessions/{session['id']}").status_code == 200
    assert reader.get(f"/frames/{frame['id']}").json()["budget"]["total"] == 5_000
    assert reader.get(f"/sessions/{session['id']}/events").status_code == 200
    check = reader.post("/constraints/check", {"subject": "refund", "value": 10})
    assert check.status_code == 200, check.content


def test_its_writes_answer_read_only_key_and_change_nothing(reader, acme_session):
    session, frame = acme_session
    attempts = [
        reader.post("/sessions", {"identity": {"user_name": "Eve"}}),
        reader.post(f"/sessions/{session['id']}/frames", {"goal": "x", "budget": {"total": 10}}),
        reader.post(f"/frames/{frame['id']}/usage", {"input_tokens": 10, "output_tokens": 1}),
        reader.put(f"/sessions/{session['id']}/working-set/plan", {"value": "steal"}),
        reader.delete(f"/sessions/{session['id']}/working-set/plan"),
    ]
    for response in attempts:
        assert response.status_code == 403, response.content
        body = response.json()
        assert body["error"] == "read_only_key" and "read-only" in body["detail"]
    assert Session.objects.count() == 1 and Frame.objects.count() == 1
    assert Frame.objects.get().budget_used == 0


@pytest.mark.parametrize("method,path", WRITES, ids=[f"{m} {p}" for m, p in WRITES])
def test_every_write_operation_refuses_a_read_only_key(method, path, reader):
    concrete = re.sub(r"\{[^}]+\}", lambda _: str(uuid.uuid4()), path)
    response = reader._call(method.lower(), concrete, None if method == "DELETE" else {})
    assert response.status_code == 403, (method, path, response.content)
    assert response.json()["error"] == "read_only_key"


def test_a_full_key_of_the_same_agent_still_writes(reader, db):
    key, raw = ApiKey.issue(agent=ApiKey.objects.get().agent)
    writer = ApiClient(key=raw)
    assert writer.post("/sessions", {"identity": {"user_name": "Ada"}}).status_code == 201


def test_the_admin_shows_each_keys_scope_and_never_widens_it(reader, api, make_user):
    client = Client()
    client.force_login(make_user(username="root", admin=True))
    page = client.get("/admin/contextops/apikey/").content.decode()
    assert "Read-only: writes answer 403 read_only_key" in page
    assert "Full: reads and writes" in page
    key = ApiKey.objects.get(scope=ApiKey.Scope.READ_ONLY)
    form = client.get(f"/admin/contextops/apikey/{key.pk}/change/").content.decode()
    assert 'name="scope"' not in form  # shown, not editable
    filtered = client.get("/admin/contextops/apikey/?scope__exact=read_only").content.decode()
    assert key.prefix in filtered and api.key.split("_")[1] not in filtered
