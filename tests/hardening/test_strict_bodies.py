"""A body field the API does not know is refused with a 422 naming it, and changes nothing."""

from typing import Any

import pytest

from contextops.api import api as ninja_api
from frames.models import Event, Frame


def _object_schemas(schema: dict, components: dict, seen: set[str]) -> list[tuple[str, dict]]:
    """Every object schema a request body may contain, each with where it was found."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        if name in seen:
            return []
        seen.add(name)
        return _object_schemas(components[name], components, seen)
    found = []
    if schema.get("type") == "object" and "properties" in schema:
        found.append((schema.get("title", "?"), schema))
    for key in ("properties", "$defs"):
        for sub in schema.get(key, {}).values():
            found += _object_schemas(sub, components, seen)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += _object_schemas(schema[key], components, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            found += _object_schemas(sub, components, seen)
    return found


def test_every_request_body_refuses_fields_it_does_not_know():
    openapi: dict[str, Any] = ninja_api.get_openapi_schema()
    components = openapi["components"]["schemas"]
    lenient = []
    bodies = 0
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is None:
                continue
            bodies += 1
            for title, schema in _object_schemas(body["schema"], components, set()):
                if schema.get("additionalProperties") is not False:
                    lenient.append(f"{method.upper()} {path}: {title}")
    assert bodies > 20
    assert not lenient, "bodies that accept unknown fields:\n" + "\n".join(sorted(set(lenient)))


@pytest.mark.parametrize(
    "field, body, loc",
    [
        ("top level", {"goal": "g", "budget": {"total": 100}, "buget": 1}, "buget"),
        ("nested", {"goal": "g", "budget": {"total": 100, "totl": 5}}, "totl"),
    ],
)
def test_a_push_with_a_misspelt_field_is_refused_naming_it(api, field, body, loc):
    session = api.post("/sessions", {"identity": {"user_name": "Ada"}}).json()
    events = Event.objects.count()
    response = api.post(f"/sessions/{session['id']}/frames", body)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "validation_error"
    assert [e["loc"][-1] for e in answer["errors"]] == [loc]
    assert loc in answer["detail"]
    assert not Frame.objects.filter(session_id=session["id"]).exists()
    assert Event.objects.count() == events


def test_a_session_with_a_misspelt_identity_field_is_refused(api):
    response = api.post("/sessions", {"identity": {"user_name": "Ada", "authorty": "admin"}})
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"][-1] == "authorty"


@pytest.mark.parametrize(
    "path, body, loc",
    [
        ("usage", {"input_tokens": True, "output_tokens": 1}, "input_tokens"),
        ("push", {"goal": "g", "budget": {"total": True}}, "total"),
    ],
)
def test_a_boolean_where_a_number_is_due_is_refused_naming_it(api, path, body, loc):
    session = api.post("/sessions", {"identity": {"user_name": "Ada"}}).json()
    root = api.post(f"/sessions/{session['id']}/frames", {"goal": "r", "budget": {"total": 9}})
    events = Event.objects.count()
    url = (
        f"/frames/{root.json()['id']}/usage"
        if path == "usage"
        else f"/sessions/{session['id']}/frames"
    )
    response = api.post(url, body)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "validation_error"
    assert [e["loc"][-1] for e in answer["errors"]] == [loc]
    assert Event.objects.count() == events
    assert Frame.objects.filter(session_id=session["id"]).count() == 1
