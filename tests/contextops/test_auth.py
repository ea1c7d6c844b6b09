import logging

import pytest
from django.utils import timezone

from contextops.models import ApiKey
from tests.conftest import ApiClient


def test_it_answers_health_without_a_key(client):
    assert client.get("/api/v1/health").json() == {"status": "ok"}


def test_it_refuses_a_missing_key_with_json(db):
    response = ApiClient(key="").get("/sessions/00000000-0000-0000-0000-000000000000")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"


def test_it_refuses_a_malformed_key(db):
    response = ApiClient(key="not-a-key").get("/health-check-does-not-matter")
    assert response.status_code in (401, 404)
    assert response["Content-Type"].startswith("application/json")


def test_it_refuses_a_revoked_key(api):
    ApiKey.objects.filter(agent=api.agent).update(revoked_at=timezone.now())
    response = api.post("/sessions", {"identity": {}})
    assert response.status_code == 401
    assert response.json() == {
        "error": "unauthenticated",
        "detail": "The API key has been revoked.",
    }


def test_it_answers_json_404_for_unknown_api_paths(api):
    response = api.get("/no/such/thing")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_it_stores_only_a_hash_of_the_key(api):
    key = ApiKey.objects.get(agent=api.agent)
    assert api.key.split("_", 2)[2] not in (key.hashed_secret, key.prefix)


@pytest.mark.parametrize("scheme", ["Token", "Basic", "ApiKey", "bearer"])
def test_a_key_under_another_scheme_is_refused_and_never_logged(api, settings, caplog, scheme):
    """Only ``Bearer`` carries a key; a key sent under another scheme (as other tools
    expect) is a 401, and the key appears in no log line, even with DEBUG on."""
    settings.DEBUG = True
    caplog.set_level(logging.DEBUG)
    response = api.client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"{scheme} {api.key}")
    if scheme == "bearer":  # the scheme is case-insensitive (RFC 9110)
        assert response.status_code == 200
    else:
        assert response.status_code == 401
        assert response.json()["error"] == "unauthenticated"
    secret = api.key.split("_", 2)[2]
    assert not [r for r in caplog.records if secret in r.getMessage()]
