"""Bad input of every kind gets a documented error, changes nothing, and never a 500."""

import json

import pytest
from django.test import Client

from frames.models import Event, Frame

INJECTIONS = [
    "'; DROP TABLE frames_frame; --",
    '" OR 1=1 --',
    "{{ settings.SECRET_KEY }}",
    "{% debug %}",
    "<script>document.title='pwned'</script>",
    "<img src=x onerror=alert(1)>",
    "../../etc/passwd",
    "\u202etxt.exe",
    "😀" * 50,
]


@pytest.fixture
def session(api):
    response = api.post("/sessions", {"identity": {"user_name": "Ada"}})
    return response.json()


def _raw(api, path, data: bytes, **extra):
    return api.client.post(
        "/api/v1" + path,
        data=data,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
        **extra,
    )


def test_an_oversized_body_is_refused_from_its_length_before_it_is_read(api, session, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = _raw(api, f"/sessions/{session['id']}/frames", b"x" * 2000)
    assert response.status_code == 413
    assert response.json() == {
        "error": "too_large",
        "detail": "The body is 2000 bytes; the limit is 1000.",
        "limit": 1000,
    }


def test_deeply_nested_json_is_refused(api, session):
    deep = "[" * 5000 + "]" * 5000
    body = f'{{"goal": "deep", "budget": {{"total": 10}}, "inputs": {{"x": {deep}}}}}'.encode()
    response = _raw(api, f"/sessions/{session['id']}/frames", body)
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"
    assert not Frame.objects.filter(goal="deep").exists()


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe\xfd", b'{"goal": "\xc3\x28", "budget": {"total": 1}}', b"{", b"null", b'"text"'],
)
def test_bodies_that_are_not_a_json_object_are_refused(api, session, data):
    response = _raw(api, f"/sessions/{session['id']}/frames", data)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"


@pytest.mark.parametrize(
    "budget",
    [
        {"total": -5},
        {"total": 10**30},
        {"total": 1.5},
        {"total": None},
        {"total": 10, "max_subframe_depth": -1},
    ],
)
def test_impossible_budgets_are_field_errors(api, session, budget):
    response = api.post(f"/sessions/{session['id']}/frames", {"goal": "g", "budget": budget})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][:2] == ["body", "budget"]


def test_unknown_enum_values_are_field_errors(api, session):
    frame = api.post(
        f"/sessions/{session['id']}/frames", {"goal": "g", "budget": {"total": 100}}
    ).json()
    for path, body in (
        (f"/frames/{frame['id']}/handles", {"kind": "telepathy", "content": "x"}),
        (f"/frames/{frame['id']}/pop", {"status": "exploded"}),
        ("/sessions", {"eviction_policy": "random"}),
    ):
        response = api.post(path, body)
        assert response.status_code == 422, path
        assert response.json()["error"] == "validation_error"


def test_nul_characters_anywhere_in_the_address_are_refused(api, member_client):
    assert api.get("/sessions/%00").status_code == 422
    assert api.get("/sessions", {"search": "a\x00b"}).status_code == 422
    assert member_client.get("/", {"q": "\x00"}).status_code == 400


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_strings_are_stored_verbatim_and_rendered_inert(
    api, session, member_client, text, settings
):
    frame = api.post(
        f"/sessions/{session['id']}/frames",
        {"goal": text, "budget": {"total": 100}, "inputs": {"note": text}},
    )
    assert frame.status_code == 201
    assert api.get(f"/frames/{frame.json()['id']}").json()["goal"] == text
    assert Frame.objects.count() == 1  # the DROP TABLE did nothing
    page = member_client.get(f"/frames/{frame.json()['id']}/").content.decode()
    assert "<script>document.title" not in page and "<img src=x" not in page
    assert settings.SECRET_KEY not in page
    if text.startswith("{"):
        assert text in page  # shown as typed, never evaluated


def test_a_failed_write_leaves_no_event_behind(api, session):
    before = Event.objects.count()
    api.post(f"/sessions/{session['id']}/frames", {"goal": "g", "budget": {"total": -1}})
    api.post(
        f"/sessions/{session['id']}/frames",
        {
            "goal": "g",
            "parent_frame_id": "00000000-0000-0000-0000-000000000000",
            "budget": {"total": 1},
        },
    )
    assert Event.objects.count() == before


def test_errors_on_unknown_api_paths_and_methods_are_json(api):
    missing = api.get("/no/such/path")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    wrong = api.client.delete("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {api.key}")
    assert wrong.status_code == 405 and json.loads(wrong.content)["error"]


def test_the_dashboard_never_answers_html_errors_with_a_stack_trace(member_client):
    assert member_client.get("/sessions/not-a-uuid/").status_code == 404
    assert Client().get("/frames/00000000-0000-0000-0000-000000000000/").status_code == 302


@pytest.mark.parametrize(
    "path",
    [
        "/sessions?offset=",
        "/facts?offset=",
        "/rlm/states?offset=",
        "/sessions/{session}/events?after=",
    ],
)
def test_numbers_too_large_for_any_column_are_refused_not_crashed_on(api, session, path):
    response = api.get(path.replace("{session}", session["id"]) + "3107061920617448092866061533184")
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
