"""The authorization matrix: every API operation and dashboard page x every kind of caller.

Operations come from the OpenAPI schema itself, so a new endpoint is covered the day it
is added. Path parameters are real ids of Acme's objects, and every write carries a body
that is valid for it (Acme's own agent sends the same request and gets its documented
answer), so another organization's 404 comes from the organization check, not from
validation. Callers: no key, a revoked key, another organization's admin key, Acme's
guest; on the dashboard anonymous, another organization's admin, a member, an approver
and an admin. Besides the status, nothing of Acme may show in what another organization
gets back (not an id, a key, a count or a search hit) and nothing of Acme may change.
"""

import json
import re
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver, resolve
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextops.api import api as ninja_api
from contextops.models import ApiKey
from facts.models import Fact
from frames.models import Session
from tests.hardening.snapshots import organization_rows
from tests.hardening.world import (
    ACTIONS,
    NO_ID,
    REQUESTS,
    Write,
    actions_ready,
    address,
    call,
    fill,
    request_for,
)

PUBLIC = {("GET", "/health")}
# Query parameters that select by text or by id: an outsider naming Acme's values in
# them must find nothing. ``key`` is not a filter of any list (the API refuses it); it is
# here so that a future ``?key=`` filter is covered the day it appears.
SEARCHABLE_PARAMS = {"search", "q", "subject", "key", "scope_id", "session_id", "tree_id"}
SCHEMA = ninja_api.get_openapi_schema()


def _operations() -> list[tuple[str, str]]:
    found = []
    for path, item in SCHEMA["paths"].items():
        for method in item:
            if method in {"get", "post", "put", "delete", "patch"}:
                found.append((method.upper(), path.removeprefix("/api/v1")))
    return sorted(found)


def _query_params() -> dict[tuple[str, str], list[str]]:
    return {
        (method.upper(), path.removeprefix("/api/v1")): [
            p["name"] for p in op.get("parameters", []) if p["in"] == "query"
        ]
        for path, item in SCHEMA["paths"].items()
        for method, op in item.items()
        if method in {"get", "post", "put", "delete", "patch"}
    }


OPERATIONS = _operations()
QUERY_PARAMS = _query_params()
# What an outsider puts in each query parameter: Acme's id of that kind (``{name}``, from
# the acme world) or a value that selects by time. Parameters that select nothing by
# themselves (paging, order, a status or a kind) are named with None: every parameter of
# the schema is here, so a new one must be sorted in the day it appears.
QUERY_PROBES: dict[str, str | None] = {
    "session_id": "{session_id}",
    "frame_id": "{frame_id}",
    "thread_id": "{thread_id}",
    "checkpoint_id": "{graph_checkpoint_id}",
    "destination_id": "{destination_id}",
    "tree_id": "{state_id}",
    "subject": "acme-secret-subject",
    "scope_id": "acme-secret-scope",
    "search": "acme-secret-title",
    "agent": "researcher",
    "source": "user",
    "metadata": '{"run_id": "acme-secret-run"}',
    "before": "acme-secret-checkpoint~",
    # valid time and event time: as of now, when every one of Acme's facts holds
    "valid_at": "2999-01-01T00:00:00Z",
    "at": "2999-01-01T00:00:00Z",
    "since": "2000-01-01T00:00:00Z",
    "until": "2999-01-01T00:00:00Z",
    "after": "0",
    "before_version": "99",
    "scope": "draft",
    **dict.fromkeys(
        [
            "limit",
            "offset",
            "order",
            "status",
            "pressure",
            "valid",
            "needs_review",
            "memory_type",
            "completion_status",
            "checkpoint_ns",
            "snapshots",
            "branch",
            "threshold",
            "mode",
            "wait",
            "min_age_hours",
            "max_age_hours",
        ]
    ),
}
LISTS = [op for op in OPERATIONS if op[0] == "GET" and "{" not in op[1] and op not in PUBLIC]


# Acme's world is built once for the module (``acme_once`` in conftest.py); each test runs
# in a transaction rolled back when it ends, so none sees what another changed.
@pytest.fixture
def api(acme_once, db):
    return acme_once.api_for_test()


@pytest.fixture
def acme(acme_once, db) -> dict:
    return acme_once.world_for_test()


@pytest.fixture(autouse=True)
def _jobs_recorded(jobs_sent):
    """No broker or worker here: a page-out or a compaction only records its job."""


@pytest.fixture
def globex(other_api):
    """Globex's own session, whose title shares a word with Acme's."""
    response = other_api.post(
        "/sessions", {"title": "globex shared-project", "identity": {"user_name": "Eve"}}
    )
    assert response.status_code == 201
    return response.json()


def _acme_rows() -> dict:
    """Every stored row of Acme: what must not move when an outsider calls."""
    return organization_rows("Acme")


def _leaks(response, secrets: set[str], sent: str = "") -> list[str]:
    """Secrets in the body, apart from what the caller itself put in the address."""
    text = response.content.decode(errors="replace")
    return [s for s in secrets if s in text and s not in sent]


@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_operation_refuses_a_missing_or_revoked_key(method, path, api, acme):
    client = Client()
    target = address(path, acme["ids"])
    if (method, path) in PUBLIC:
        assert call(client, method, target, None).status_code == 200
        return
    for key in (None, "cops_notakey_at-all", "Bearer-garbage"):
        response = call(client, method, target, key)
        assert response.status_code == 401, (key, response.content)
        assert response.json()["error"] == "unauthenticated"
    ApiKey.objects.filter(agent=api.agent).update(revoked_at="2026-01-01T00:00:00Z")
    revoked = call(client, method, target, api.key)
    assert revoked.status_code == 401
    assert revoked.json()["error"] == "unauthenticated"


def test_the_probes_visit_every_operation_of_the_served_schema(client):
    """The operations probed are every one the served document lists (none left out: the
    allow-list is empty), the round's new ones among them, and each query parameter is
    sorted into QUERY_PROBES."""
    served = client.get("/api/v1/openapi.json").json()
    operations = {
        (method.upper(), path.removeprefix("/api/v1"))
        for path, item in served["paths"].items()
        for method in item
        if method in {"get", "post", "put", "delete", "patch"}
    }
    assert len(OPERATIONS) == len(operations) and set(OPERATIONS) == operations
    for new_this_round in (
        ("GET", "/notifications/destinations"),
        ("GET", "/notifications/deliveries"),
        ("POST", "/notifications/destinations/{destination_id}/test"),
        ("GET", "/fact-conflicts/{conflict_id}"),
        ("POST", "/fact-conflicts/{conflict_id}/accept"),
        ("GET", "/facts/{key}/current"),
        ("GET", "/context-packs/{a}/diff/{b}"),
        ("GET", "/sessions/{session_id}/context-packs"),
        ("GET", "/context-packs/{pack_id}"),
    ):
        assert new_this_round in operations, new_this_round
    assert {p for op in OPERATIONS for p in QUERY_PARAMS[op]} <= set(QUERY_PROBES), (
        "sort the new query parameters into QUERY_PROBES",
        sorted({p for op in OPERATIONS for p in QUERY_PARAMS[op]} - set(QUERY_PROBES)),
    )


def test_every_path_parameter_names_one_of_acmes_objects(acme):
    """An id left to the placeholder would make an outsider's 404 prove nothing."""
    for method, path in OPERATIONS:
        ids = {**acme["ids"], **REQUESTS.get((method, path), Write()).ids}
        named = re.findall(r"\{(\w+)\}", path)
        assert set(named) <= set(ids), (method, path, set(named) - set(ids))


QUERIED = [(op, param) for op in OPERATIONS for param in QUERY_PARAMS[op] if QUERY_PROBES[param]]


@pytest.mark.parametrize("op,param", QUERIED, ids=[f"{m} {p} {q}" for (m, p), q in QUERIED])
def test_acmes_values_in_any_query_parameter_find_nothing(op, param, acme, api, other_api):
    """Ids and times in query strings, on every operation that takes them (valid-time
    reads, checkpoints by thread, deliveries by destination...), not only on lists."""
    method, path = op
    target, body = request_for(method, path, acme["ids"])
    value = fill(QUERY_PROBES[param], acme["ids"])
    url = f"{target}{'&' if '?' in target else '?'}{urlencode({param: value})}"
    own = call(Client(), method, url, api.key, body)
    assert own.status_code < 400 or method != "GET", (url, own.content)  # the control
    before = _acme_rows()
    response = call(Client(), method, url, other_api.key, body)
    expected = REQUESTS[method, path].other if method != "GET" else 404 if "{" in path else 200
    if (method, response.status_code) == ("GET", 404):
        expected = 404  # a list filtered by a foreign id: as unknown as a path's
    assert response.status_code == expected, (url, response.status_code, response.content)
    assert _leaks(response, acme["secrets"], sent=url + json.dumps(body)) == [], url
    if expected == 404:
        assert response.json()["error"] == "not_found"
    elif method == "GET":
        answer = response.json()
        listed = answer if isinstance(answer, list) else answer.get("items", [])
        assert listed == [] and (isinstance(answer, list) or answer.get("count", 0) == 0), url
    assert _acme_rows() == before


def test_otlp_spans_of_acmes_trace_sent_by_another_organization_stay_its_own(
    acme, api, other_api, client
):
    """The OTLP receiver is not in the schema (its bodies are OTLP's): another
    organization sending the very spans of Acme's trace gets a session of its own and
    leaves Acme's as it was."""
    from tests.otel.test_receiver import PROTOBUF, _body, _llm

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _llm(provider.get_tracer("tests"), name="chat acme-secret-model")
    body = _body(exporter)
    provider.shutdown()
    sent = client.post(
        "/v1/traces", body, content_type=PROTOBUF, HTTP_AUTHORIZATION=f"Bearer {api.key}"
    )
    assert sent.status_code == 200
    [acme_trace] = Session.objects.filter(organization=api.organization, source__kind="otel")
    before = _acme_rows()
    for path in ("/v1/traces", "/api/v1/otel/v1/traces"):
        response = client.post(
            path, body, content_type=PROTOBUF, HTTP_AUTHORIZATION=f"Bearer {other_api.key}"
        )
        assert response.status_code == 200, response.content
        assert _leaks(response, acme["secrets"]) == []
    assert _acme_rows() == before
    theirs = Session.objects.get(organization=other_api.organization, source__kind="otel")
    assert theirs.source == acme_trace.source  # the same trace, held apart
    assert theirs.api_calls_total == 1 and theirs.pk != acme_trace.pk


def test_every_write_has_a_valid_request():
    writes = {(m, p) for m, p in OPERATIONS if m != "GET"}
    assert writes == set(REQUESTS), (
        "add the missing operations to WRITES or CREATES",
        sorted(writes - set(REQUESTS)),
        sorted(set(REQUESTS) - writes),
    )


@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_another_organization_sees_nothing_of_acme_and_changes_nothing(
    method, path, api, acme, other_api, jobs_sent
):
    target, body = request_for(method, path, acme["ids"])
    before = _acme_rows()
    response = call(Client(), method, target, other_api.key, body)
    expected = REQUESTS[method, path].other if method != "GET" else 404 if "{" in path else 200
    assert response.status_code == expected, (response.status_code, response.content)
    if expected == 404:
        assert response.json()["error"] == "not_found"
    assert _leaks(response, acme["secrets"], sent=target + json.dumps(body)) == []
    assert _acme_rows() == before
    assert jobs_sent == []
    if method != "GET":
        # The control: the same request from Acme's own agent is valid and reaches its object.
        own = call(Client(), method, target, api.key, body)
        assert own.status_code == REQUESTS[method, path].own, own.content


@pytest.mark.parametrize("method,path", LISTS, ids=[f"{m} {p}" for m, p in LISTS])
def test_list_endpoints_count_only_the_callers_own_objects(method, path, acme, other_api):
    response = call(Client(), method, path, other_api.key)
    assert response.status_code == 200, response.content
    body = response.json()
    if isinstance(body, dict) and "count" in body:
        assert body["count"] == 0
        assert body["items"] == []
    if isinstance(body, list):
        assert body == []
    assert _leaks(response, acme["secrets"]) == []


def _search_terms(acme) -> list[str]:
    ids = acme["ids"]
    return [
        "acme",
        "acme-secret-title",
        "acme-secret-model",
        "researcher",  # Acme's agent
        ids["session_id"],
        ids["session_id"][:8],
        "acme-secret-subject",
        "acme_secret_fact",
        "acme-secret-scope",
        ids["state_id"],
    ]


@pytest.mark.parametrize("method,path", LISTS, ids=[f"{m} {p}" for m, p in LISTS])
def test_searching_for_acme_by_any_parameter_finds_nothing(method, path, acme, other_api, globex):
    params = [p for p in QUERY_PARAMS[method, path] if p in SEARCHABLE_PARAMS]
    if (method, path) in {("GET", "/sessions"), ("GET", "/facts")}:
        assert params, "the search parameters of this list are gone from the schema"
    for param in params:
        for term in _search_terms(acme):
            response = call(Client(), method, f"{path}?{param}={term}", other_api.key)
            assert response.status_code == 200, (param, term, response.content)
            body = response.json()
            assert body["count"] == 0 and body["items"] == [], (param, term, body)
            assert _leaks(response, acme["secrets"], sent=term) == [], (param, term)


def test_a_search_both_organizations_match_counts_only_the_callers_sessions(
    acme, api, other_api, globex
):
    theirs = other_api.get("/sessions", {"search": "shared-project"}).json()
    assert theirs["count"] == 1
    assert [s["id"] for s in theirs["items"]] == [globex["id"]]
    ours = api.get("/sessions", {"search": "shared-project"}).json()
    assert ours["count"] == 1 and ours["items"][0]["id"] == acme["ids"]["session_id"]


def test_fact_filters_and_refused_parameters_show_only_the_callers_facts(acme, api, other_api):
    own = other_api.post("/facts", {"key": "globex_fact", "value": "g", "source": "user"})
    assert own.status_code == 201
    assert api.get("/facts", {"subject": "acme-secret-subject"}).json()["count"] == 1  # control
    for params in (
        {"subject": "acme-secret-subject", "valid": "any"},
        {"scope_id": "acme-secret-scope", "valid": "any"},
        {"scope": "draft", "valid": "any"},
        {"needs_review": "false", "valid": "any", "subject": "acme-secret-draft"},
    ):
        response = other_api.get("/facts", params)
        assert response.status_code == 200
        assert response.json()["count"] == 0, params
    # Parameters /facts does not take are refused, naming them and nothing of Acme's.
    for unknown, term in (("key", "acme_secret_fact"), ("search", "acme")):
        response = other_api.get("/facts", {unknown: term, "valid": "any"})
        assert response.status_code == 422, response.content
        assert response.json()["errors"] == [
            {"loc": ["query", unknown], "msg": "Extra inputs are not permitted"}
        ]
        assert _leaks(response, acme["secrets"], sent=term) == []


def test_acme_ids_inside_another_organizations_requests_are_not_found(acme, other_api, globex):
    """Foreign ids in bodies and query strings, not only in paths."""
    ids = acme["ids"]
    answers = {
        "child of Acme's frame": other_api.post(
            f"/sessions/{globex['id']}/frames",
            {"goal": "g", "parent_frame_id": ids["frame_id"], "budget": {"total": 10}},
        ),
        "events filtered by Acme's frame": other_api.get(
            f"/sessions/{globex['id']}/events", {"frame_id": ids["frame_id"]}
        ),
        "pack of Acme's frame": other_api.post(
            f"/sessions/{globex['id']}/context-pack",
            {"budget_tokens": 2000, "frame_id": ids["frame_id"]},
        ),
        "RLM state in Acme's session": other_api.post(
            "/rlm/states", {"prompt": "p", "session_id": ids["session_id"]}
        ),
        "RLM state on Acme's frame": other_api.post(
            "/rlm/states", {"prompt": "p", "frame_id": ids["frame_id"]}
        ),
    }
    for what, response in answers.items():
        assert response.status_code == 404, (what, response.status_code, response.content)
        assert response.json()["error"] == "not_found"


def test_acme_handles_facts_and_constraints_never_reach_another_organizations_answers(
    acme, api, other_api, globex
):
    before = _acme_rows()
    frame = other_api.post(
        f"/sessions/{globex['id']}/frames", {"goal": "g", "budget": {"total": 10_000}}
    ).json()
    body = {
        "budget_tokens": 5000,
        "frame_id": frame["id"],
        "query": "acme-secret-subject acme-secret-value",
    }
    # Acme's handle is not one Globex's frame holds: refused as any unknown id is.
    forced = other_api.post(
        f"/sessions/{globex['id']}/context-pack",
        {**body, "include_handles": [acme["ids"]["handle_id"]]},
    )
    assert forced.status_code == 422, forced.content
    assert forced.json()["errors"][0]["loc"] == ["body", "include_handles"]
    assert "acme-secret" not in forced.content.decode()
    pack = other_api.post(f"/sessions/{globex['id']}/context-pack", body)
    assert pack.status_code == 200, pack.content
    answer = pack.json()
    assert answer.pop("query") == "acme-secret-subject acme-secret-value"  # echoed, as sent
    text = json.dumps(answer)
    assert [s for s in acme["secrets"] if s in text and s != acme["ids"]["handle_id"]] == []
    assert "acme-secret-content" not in text and "acme-secret-value" not in text
    # Acme's budget cap binds Acme, and nobody else.
    check = {"subject": "acme-secret-budget", "value": 1000}
    assert api.post("/constraints/check", check).json()["allowed"] is False  # control
    theirs = other_api.post("/constraints/check", check).json()
    assert theirs["allowed"] is True and theirs["checked"] == [] and theirs["violations"] == []
    # The same key in another organization is another fact; superseding Acme's is impossible.
    same_key = other_api.post(
        "/facts", {"key": "acme_secret_fact", "value": "globex value", "source": "user"}
    )
    assert same_key.status_code == 201 and same_key.json()["value"] == "globex value"
    supersede = other_api.post(
        "/facts",
        {"key": "globex_v2", "value": "v", "source": "policy", "supersedes": "acme_budget_cap"},
    )
    assert supersede.status_code == 404 and supersede.json()["error"] == "not_found"
    depend = other_api.post(
        "/facts",
        {"key": "globex_v3", "value": "v", "source": "user", "depends_on": ["acme_draft_fact"]},
    )
    assert depend.status_code == 422 and depend.json()["error"] == "validation_error"
    for response, sent in ((supersede, "acme_budget_cap"), (depend, "acme_draft_fact")):
        assert _leaks(response, acme["secrets"], sent=sent) == []
    assert _acme_rows() == before


@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_a_guest_of_the_same_organization_gets_its_documented_answer(method, path, acme, make_api):
    guest = make_api(agent="visitor", authority="guest")
    target, body = request_for(method, path, acme["ids"])
    response = call(Client(), method, target, guest.key, body)
    if method == "GET":
        expected = 200  # the guest reads everything of its organization
    else:  # the employee's answer, unless authority decides it
        write = REQUESTS[method, path]
        expected = write.guest if write.guest is not None else write.own
    assert response.status_code == expected, (response.status_code, response.content)
    if response.status_code >= 400:
        body = json.loads(response.content)
        assert set(body) >= {"error", "detail"}
    if response.status_code == 403:
        assert response.json()["error"] == REQUESTS.get((method, path), Write()).refusal


def _dashboard_urls(ids: dict) -> dict[str, bool]:
    """Dashboard pages, each with whether it names one of Acme's objects."""
    urls = {
        "/": False,
        "/inbox/": False,
        "/facts/": False,
        "/facts/conflicts/": False,
        "/rlm/": False,
        f"/sessions/{ids['session_id']}/": True,
        f"/frames/{ids['frame_id']}/": True,
        f"/frames/{ids['frame_id']}/children/": True,
        f"/frames/{ids['frame_id']}/handles/": True,
        f"/sessions/{ids['session_id']}/pressure/": True,
        f"/sessions/{ids['session_id']}/context-preview/": True,
        f"/sessions/{ids['session_id']}/context-packs/": True,
        f"/sessions/{ids['session_id']}/context-packs/all/": True,
        f"/sessions/{ids['session_id']}/changes/?after=0": True,
        f"/sessions/{ids['session_id']}/export/": True,
        f"/sessions/{ids['session_id']}/turns/": True,
        f"/sessions/{ids['session_id']}/turns/compactions/": True,
        f"/sessions/{ids['session_id']}/turns/counterfactual/": True,
        f"/sessions/{ids['session_id']}/at/?seq={ids['seq']}": True,
        f"/sessions/{ids['session_id']}/calls/": True,
        f"/sessions/{ids['session_id']}/calls/{ids['call_id']}/": True,
        "/usage/": False,
        f"/sessions/{ids['session_id']}/context-packs/diff/?a={ids['a']}&b={ids['b']}": True,
        f"/sessions/{ids['session_id']}/context-packs/{ids['a']}/": True,
        f"/facts/{ids['key']}/lineage/": True,
        f"/rlm/{ids['state_id']}/": True,
        f"/langgraph/{ids['graph_thread_pk']}/": True,
    }
    return urls


def _login(role: str, make_user) -> Client:
    client = Client()
    if role == "other_org":
        client.force_login(make_user(username="eve", org="Globex", admin=True, approver=True))
    elif role != "anonymous":
        client.force_login(
            make_user(username=role, approver=role in ("approver", "admin"), admin=role == "admin")
        )
    return client


@pytest.mark.parametrize("role", ["anonymous", "other_org", "member", "approver", "admin"])
def test_every_dashboard_page_by_role(role, acme, make_user):
    client = _login(role, make_user)
    for url, names_an_object in _dashboard_urls(acme["ids"]).items():
        response = client.get(url)
        if role == "anonymous":
            assert response.status_code == 302 and response["Location"].startswith(
                "/accounts/login/"
            ), url
        elif role == "other_org":
            assert response.status_code == (404 if names_an_object else 200), url
            assert _leaks(response, acme["secrets"], sent=url) == [], url
        else:
            assert response.status_code == 200, (url, response.status_code)
        # The same page as an htmx fragment: the same answer, and no more of Acme.
        fragment = client.get(url, HTTP_HX_REQUEST="true")
        if role == "anonymous":
            assert fragment.status_code == 302, url
        elif role == "other_org":
            assert fragment.status_code == response.status_code, url
            assert _leaks(fragment, acme["secrets"], sent=url) == [], url
        else:
            assert fragment.status_code in (200, 204), (url, fragment.status_code)
    if role in ("member", "approver", "admin"):
        inbox = client.get("/inbox/").content.decode()
        assert ("Approve" in inbox) == (role != "member")


def test_dashboard_searches_and_filters_show_another_organization_nothing(acme, make_user, globex):
    Fact.objects.filter(key="acme_secret_fact").update(needs_review=True)
    client = _login("other_org", make_user)
    for term in _search_terms(acme):
        page = client.get("/", {"q": term})
        assert page.status_code == 200
        assert "No session matches" in page.content.decode(), term
        assert _leaks(page, acme["secrets"], sent=term) == [], term
    shared = client.get("/", {"q": "shared-project"}).content.decode()
    assert "· 1 session<" in shared and "globex shared-project" in shared
    for params in (
        {"subject": "acme-secret-subject", "validity": "all"},
        {"subject": "acme-secret-draft", "validity": "all", "scope": "draft"},
        {"validity": "all", "needs_review": "1"},
        {"validity": "all", "memory_type": "user"},
    ):
        page = client.get("/facts/", params)
        html = page.content.decode()
        assert page.status_code == 200
        assert "No facts match these filters." in html, params
        assert "need review" not in html and "needs review" not in html  # Acme's count
        assert _leaks(page, acme["secrets"], sent=json.dumps(params)) == [], params
    for status in ("", "incomplete", "complete"):
        page = client.get("/rlm/", {"status": status})
        assert _leaks(page, acme["secrets"]) == [], status
    # The control: Acme's member finds what Globex cannot.
    member = _login("member", make_user)
    assert "acme-secret-title" in member.get("/", {"q": "acme"}).content.decode()
    assert "1 needs review" in member.get("/facts/").content.decode()


ROLES = {
    # role: the permissions it holds
    "anonymous": set(),
    "other_org": {"approver", "admin"},
    "member": set(),
    "approver": {"approver"},
    "admin": {"approver", "admin"},
}


@pytest.mark.parametrize("role", list(ROLES))
@pytest.mark.parametrize("action", list(ACTIONS))
def test_every_dashboard_action_by_role(action, role, acme, make_user, jobs_sent):
    ids = actions_ready(acme)
    spec = ACTIONS[action]
    client = _login(role, make_user)
    before = _acme_rows()

    response = client.post(fill(spec.url, ids), fill(spec.data, ids))

    allowed = role not in ("anonymous", "other_org") and (
        not spec.needs or spec.needs in ROLES[role]
    )
    if role == "anonymous":
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")
    elif role == "other_org":
        assert response.status_code == 404
        assert _leaks(response, acme["secrets"], sent=fill(spec.url, ids)) == []
    elif not allowed:
        assert response.status_code == 403
    else:
        assert response.status_code == 302, response.content
        assert response["Location"] == fill(spec.goes_to, ids)
    if allowed:
        assert spec.done(acme, jobs_sent), "the action did not happen"
    else:
        assert _acme_rows() == before
        assert jobs_sent == []
        assert not spec.done(acme, jobs_sent)


@pytest.mark.parametrize("role", list(ROLES))
@pytest.mark.parametrize("action", list(ACTIONS))
def test_every_dashboard_action_by_role_over_htmx(action, role, acme, make_user, jobs_sent):
    """The inbox, the handles table, the RLM page post their actions over htmx: the same
    permissions hold for a fragment as for a form post."""
    ids = actions_ready(acme)
    spec = ACTIONS[action]
    client = _login(role, make_user)
    before = _acme_rows()

    response = client.post(fill(spec.url, ids), fill(spec.data, ids), HTTP_HX_REQUEST="true")

    allowed = role not in ("anonymous", "other_org") and (
        not spec.needs or spec.needs in ROLES[role]
    )
    if role == "anonymous":
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")
    elif role == "other_org":
        assert response.status_code == 404
        assert _leaks(response, acme["secrets"], sent=fill(spec.url, ids)) == []
    elif not allowed:
        assert response.status_code in (200, 403)  # a refusal, in the fragment or not
    else:
        assert 200 <= response.status_code < 400, response.content
    if allowed:
        assert spec.done(acme, jobs_sent), "the action did not happen"
    else:
        assert _acme_rows() == before
        assert jobs_sent == []
        assert not spec.done(acme, jobs_sent)


@pytest.mark.parametrize("forgery", ["no token", "a forged token", "another site's origin"])
@pytest.mark.parametrize("action", list(ACTIONS))
def test_every_dashboard_action_refuses_a_forged_cross_site_post(
    action, forgery, acme, make_user, jobs_sent
):
    """An admin, who may do every action, is lured into posting it from another site:
    without the page's CSRF token, with one made up, or with the right cookie but
    another site's Origin. Each answers 403 and changes nothing."""
    ids = actions_ready(acme)
    spec = ACTIONS[action]
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(username="admin", approver=True, admin=True))
    client.get("/")  # the CSRF cookie, as a browser holding the dashboard open has it
    cookie = client.cookies["csrftoken"].value
    data, extra = dict(fill(spec.data, ids)), {}
    if forgery == "a forged token":
        data["csrfmiddlewaretoken"] = "x" * len(cookie)
    elif forgery == "another site's origin":
        data["csrfmiddlewaretoken"] = cookie
        extra = {"HTTP_ORIGIN": "https://evil.example", "HTTP_REFERER": "https://evil.example/"}
    before = _acme_rows()

    response = client.post(fill(spec.url, ids), data, secure=forgery.startswith("another"), **extra)

    assert response.status_code == 403, (action, forgery, response.status_code)
    assert _acme_rows() == before
    assert jobs_sent == []
    assert not spec.done(acme, jobs_sent)


def _dashboard_routes() -> set[str]:
    """Every route of the dashboard (not the API, the admin or static files)."""

    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if str(pattern.pattern).startswith(("api/", "admin/")):
                    continue
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern)

    return set(walk(get_resolver().url_patterns))


# Routes outside the matrix on purpose: logging in and out, the probes and the icon (no data).
NOT_ORGANIZATION_DATA = {"accounts/login/", "accounts/logout/", "healthz", "readyz", "favicon.ico"}
# The OTLP receiver: an API key's, not a dashboard page (its keys: tests/otel/test_receiver.py).
NOT_ORGANIZATION_DATA |= {"v1/traces", "api/v1/otel/v1/traces"}
# The notification pages: an admin's only; every role's answer is checked in
# tests/notifications/test_destinations.py (a member 403, another organization's admin 404).
ADMIN_PAGES_CHECKED_ELSEWHERE = {
    "notifications/",
    "notifications/deliveries/",
    "notifications/<uuid:destination_id>/test/",
    "notifications/<uuid:destination_id>/remove/",
}


def test_every_dashboard_route_is_in_the_matrix(acme):
    """A new page or action is covered the day it is added: it must be named here."""
    ids = actions_ready(acme)
    urls = [*_dashboard_urls(acme["ids"]), *(fill(a.url, ids) for a in ACTIONS.values())]
    covered = {resolve(url.split("?")[0]).route for url in [*urls, "/audit/"]}
    missing = _dashboard_routes() - covered - NOT_ORGANIZATION_DATA - ADMIN_PAGES_CHECKED_ELSEWHERE
    assert missing == set(), f"add these routes to the authorization matrix: {missing}"


@pytest.mark.parametrize("role", ["anonymous", "other_org", "member", "approver", "admin"])
def test_the_audit_log_by_role(role, acme, make_user, approver_client):
    """Only an organization's admins read its audit log, and only theirs."""
    ids = actions_ready(acme)
    approve = ACTIONS["inbox approve"]
    approver_client.post(fill(approve.url, ids), fill(approve.data, ids))
    client = _login(role, make_user)
    response = client.get("/audit/")
    if role == "anonymous":
        assert response.status_code == 302
    elif role == "other_org":
        assert response.status_code == 200
        assert "Approved a suspension</td>" not in response.content.decode()
        assert _leaks(response, acme["secrets"]) == []
    elif role == "admin":
        assert response.status_code == 200
        assert "Approved a suspension</td>" in response.content.decode()
    else:
        assert response.status_code == 403


def test_an_htmx_rollback_without_permission_is_refused_inside_the_fragment(acme, make_user):
    """htmx swaps only 2xx answers, so the refusal is a 200 fragment; nothing changes."""
    client = _login("approver", make_user)  # an approver of suspensions, not of rollbacks
    before = _acme_rows()
    response = client.post(
        f"/rlm/{acme['ids']['state_id']}/rollback/",
        {"checkpoint_id": acme["ids"]["checkpoint_id"]},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert "You do not have permission to roll states back." in response.content.decode()
    assert _acme_rows() == before


def _documented_body(method: str, path: str) -> dict | None:
    operation = SCHEMA["paths"]["/api/v1" + path][method.lower()]
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    return body.get("schema")


WITH_BODIES = sorted(
    op for op, write in REQUESTS.items() if write.body is not None and _documented_body(*op)
)


@pytest.mark.parametrize("method,path", WITH_BODIES, ids=[f"{m} {p}" for m, p in WITH_BODIES])
def test_every_valid_body_here_is_valid_by_the_documented_schema(method, path):
    """The bodies above are what the server accepts; the OpenAPI document must agree."""
    from jsonschema import Draft202012Validator

    components = SCHEMA["components"]
    documented = _documented_body(method, path)
    ids = {"frame_id": NO_ID, "handle_id": NO_ID, "state_id": "state-0123abcd"}
    body = fill(REQUESTS[method, path].body, {**ids, "checkpoint_id": "ckpt-0123abcd"})
    validator = Draft202012Validator({**documented, "components": components})
    errors = [
        f"{'.'.join(map(str, e.path)) or 'body'}: {e.message}" for e in validator.iter_errors(body)
    ]
    assert errors == [], f"{method} {path} documents {documented}"
