"""Sessions made straight with the ORM, and a helper to write facts through the API."""

import pytest

from frames.models import Session


@pytest.fixture
def make_session():
    def make(api, authority="employee", **fields):
        fields.setdefault(
            "identity",
            {"user_name": "Ada", "user_id": "u1", "authority": authority, "department": "Ops"},
        )
        fields.setdefault("environment", {"timezone": "Europe/Paris", "location": "Paris"})
        return Session.objects.create(organization=api.organization, agent=api.agent, **fields)

    return make


@pytest.fixture
def write():
    """POST /facts and return the JSON body, asserting the status (201 by default)."""

    def write(api, status=201, **body):
        body.setdefault("source", "user")
        response = api.post("/facts", body)
        assert response.status_code == status, response.content
        return response.json()

    return write
