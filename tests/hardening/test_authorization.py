"""The authorization matrix: every API operation and dashboard page x every kind of caller.

Operations come from the OpenAPI schema itself, so a new endpoint is covered the day it
is added. Path parameters are real ids of Acme's objects. Callers: no key, a revoked
key, another organization's admin key, Acme's guest, an approver and an admin of the
dashboard. Besides the status, nothing of Acme may show in what another organization
gets back: not an id, not a key, not a count.
"""

import json
import re

import pytest
from django.test import Client

from contextops.api import api as ninja_api
from contextops.models import ApiKey
from frames import services

PUBLIC = {("GET", "/health")}
SEARCHABLE_PARAMS = {"search", "q", "subject", "key"}


def _operations() -> list[tuple[str, str]]:
    schema = ninja_api.get_openapi_schema()
    found = []
    for path, item in schema["paths"].items():
        for method in item:
            if method in {"get", "post", "put", "delete", "patch"}:
                found.append((method.upper(), path.removeprefix("/api/v1")))
    return sorted(found)


OPERATIONS = _operations()


@pytest.fixture
def acme(api):
    """Acme's objects, with the secrets a leak would reveal."""
    session = services.session_create(
        organization=api.organization,
        agent=api.agent,
        identity={"user_name": "Acme person"},
        title="acme-secret-title",
    )
    root = services.frame_push(session=session, goal="acme-secret-goal", budget_total=100_000)
    frame = services.frame_push(
        session=session, parent=root, goal="acme-child-goal", budget_total=10_000
    )
    handle = services.handle_add(frame=frame, kind="document", content="acme-secret-content")
    ids = {"session_id": str(session.pk), "frame_id": str(frame.pk), "handle_id": str(handle.pk)}
    secrets = {str(session.pk), str(frame.pk), str(root.pk), str(handle.pk), "acme-secret"}
    if (
        api.post(
            "/facts",
            {
                "key": "acme_secret_fact",
                "subject": "acme-secret-subject",
                "value": "acme-secret-value",
                "source": "user",
            },
        ).status_code
        == 201
    ):
        ids["key"] = "acme_secret_fact"
        secrets.add("acme_secret_fact")
    state = api.post("/rlm/states", {"prompt": "acme-secret-prompt", "session_id": str(session.pk)})
    if state.status_code == 201:
        ids["state_id"] = state.json().get("id") or state.json().get("state_id")
        api.put(f"/rlm/states/{ids['state_id']}/variables/acme_var", {"value": "acme-secret-var"})
        ids["name"] = "acme_var"
        secrets.add(ids["state_id"])
    suspension = api.post(
        f"/frames/{frame.pk}/suspend", {"reason": "acme-secret-reason", "requires_approval": True}
    )
    if suspension.status_code == 201:
        ids["token"] = suspension.json()["token"]
        secrets.add(ids["token"])
    compaction = api.post(f"/sessions/{session.pk}/compactions", {})
    if compaction.status_code == 202:
        ids["compaction_id"] = str(compaction.json()["id"])
    return {"ids": ids, "secrets": secrets, "session": session, "frame": frame}


def _path(template: str, ids: dict) -> str:
    def fill(match):
        name = match.group(1)
        return ids.get(name, "00000000-0000-0000-0000-000000000000")

    return re.sub(r"\{(\w+)\}", fill, template)


def _call(client: Client, method: str, path: str, key: str | None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    url = "/api/v1" + path
    if method in {"POST", "PUT", "PATCH"}:
        return getattr(client, method.lower())(
            url, data="{}", content_type="application/json", **headers
        )
    return getattr(client, method.lower())(url, **headers)


def _leaks(response, secrets: set[str], sent: str = "") -> list[str]:
    """Secrets in the body, apart from what the caller itself put in the address."""
    text = response.content.decode(errors="replace")
    return [s for s in secrets if s in text and s not in sent]


@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_operation_refuses_a_missing_or_revoked_key(method, path, api, acme):
    client = Client()
    target = _path(path, acme["ids"])
    if (method, path) in PUBLIC:
        assert _call(client, method, target, None).status_code == 200
        return
    for key in (None, "cops_notakey_at-all", "Bearer-garbage"):
        response = _call(client, method, target, key)
        assert response.status_code == 401, (key, response.content)
        assert response.json()["error"] == "unauthenticated"
    ApiKey.objects.filter(agent=api.agent).update(revoked_at="2026-01-01T00:00:00Z")
    revoked = _call(client, method, target, api.key)
    assert revoked.status_code == 401
    assert revoked.json()["error"] == "unauthenticated"


@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_another_organization_sees_nothing_of_acme(method, path, acme, other_api):
    target = _path(path, acme["ids"])
    response = _call(Client(), method, target, other_api.key)
    has_id = "{" in path
    if has_id:
        assert response.status_code in (404, 422), (response.status_code, response.content)
        if response.status_code == 404:
            assert response.json()["error"] == "not_found"
    else:
        assert response.status_code < 500
    assert _leaks(response, acme["secrets"], sent=target) == []


@pytest.mark.parametrize(
    "method,path", [op for op in OPERATIONS if op[0] == "GET" and "{" not in op[1]]
)
def test_list_endpoints_count_only_the_callers_own_objects(method, path, acme, other_api):
    response = _call(Client(), method, path, other_api.key)
    assert response.status_code == 200, response.content
    body = response.json()
    if isinstance(body, dict) and "count" in body:
        assert body["count"] == 0
    if isinstance(body, list):
        assert body == []
    assert _leaks(response, acme["secrets"]) == []


@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_a_guest_of_the_same_organization_gets_an_answer_never_an_error_page(
    method, path, acme, make_api
):
    guest = make_api(agent="visitor", authority="guest")
    response = _call(Client(), method, _path(path, acme["ids"]), guest.key)
    assert response.status_code < 500
    assert response.status_code != 401
    body = json.loads(response.content)
    if response.status_code >= 400:
        assert set(body) >= {"error", "detail"}


def _dashboard_urls(ids: dict) -> list[str]:
    urls = [
        "/",
        f"/sessions/{ids['session_id']}/",
        f"/frames/{ids['frame_id']}/",
        f"/frames/{ids['frame_id']}/children/",
        f"/frames/{ids['frame_id']}/handles/",
        f"/sessions/{ids['session_id']}/pressure/",
        f"/sessions/{ids['session_id']}/context-preview/",
        f"/sessions/{ids['session_id']}/turns/",
        "/inbox/",
        "/facts/",
        "/rlm/",
    ]
    if "key" in ids:
        urls.append(f"/facts/{ids['key']}/lineage/")
    if "state_id" in ids:
        urls.append(f"/rlm/{ids['state_id']}/")
    return urls


@pytest.mark.parametrize("role", ["anonymous", "other_org", "member", "approver", "admin"])
def test_every_dashboard_page_by_role(role, acme, make_user):
    client = Client()
    if role == "other_org":
        client.force_login(make_user(username="eve", org="Globex", admin=True, approver=True))
    elif role != "anonymous":
        client.force_login(
            make_user(username=role, approver=role in ("approver", "admin"), admin=role == "admin")
        )
    for url in _dashboard_urls(acme["ids"]):
        response = client.get(url)
        if role == "anonymous":
            assert response.status_code == 302 and response["Location"].startswith(
                "/accounts/login/"
            ), url
        elif role == "other_org":
            assert response.status_code in (200, 404), url
            assert _leaks(response, acme["secrets"], sent=url) == [], url
        else:
            assert response.status_code == 200, (url, response.status_code)
    if role in ("member", "approver", "admin"):
        inbox = client.get("/inbox/").content.decode()
        assert ("Approve" in inbox) == (role != "member")
