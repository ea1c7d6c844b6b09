"""Model calls as a trace: timing, model, tokens and cost of each recorded call."""

import pytest

from frames.models import Usage

pytestmark = pytest.mark.usefixtures("prices")


def test_it_keeps_each_calls_timing_and_lists_the_calls_in_order(api, start_session, push_ok):
    session = start_session(model="claude-sonnet-4-5")
    frame = push_ok(session["id"], 10_000_000)
    first = {
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        "started_at": "2026-11-26T10:00:00+00:00",
        "latency_ms": 1234,
    }
    second = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": 100,
        "model": "homegrown-7b",
        "started_at": "2026-11-26T09:59:00+00:00",
        "latency_ms": 80,
    }
    assert api.post(f"/frames/{frame['id']}/usage", first).status_code == 200
    assert api.post(f"/frames/{frame['id']}/usage", second).status_code == 200
    response = api.get(f"/sessions/{session['id']}/calls")
    assert response.status_code == 200, response.content
    page = response.json()
    assert page["count"] == 2 and page["next_offset"] is None
    early, late = page["items"]
    assert early["model"] == "homegrown-7b" and early["cost_usd"] is None
    assert early["cache_read_input_tokens"] == 100 and early["latency_ms"] == 80
    assert late["frame_id"] == frame["id"] and late["cost_usd"] == 3.0
    assert late["started_at"].startswith("2026-11-26T10:00:00") and late["latency_ms"] == 1234
    assert set(late) >= {
        "id",
        "frame_id",
        "started_at",
        "latency_ms",
        "model",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cost_usd",
    }
    paged = api.get(f"/sessions/{session['id']}/calls", {"limit": 1}).json()
    assert paged["count"] == 2 and paged["next_offset"] == 1 and len(paged["items"]) == 1


def test_the_messages_operation_keeps_timing_too(api, start_session, push_ok):
    session = start_session(model="claude-sonnet-4-5")
    push_ok(session["id"], 100_000)
    response = api.post(
        f"/sessions/{session['id']}/messages",
        {
            "messages": [
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi"},
            ],
            "usage": {
                "input_tokens": 5,
                "output_tokens": 2,
                "started_at": "2026-11-26T10:00:00Z",
                "latency_ms": 321,
            },
        },
    )
    assert response.status_code in (200, 201), response.content
    call = Usage.objects.get(session_id=session["id"])
    assert call.latency_ms == 321 and call.started_at.isoformat().startswith("2026-11-26T10:00")


def test_it_refuses_bad_timing_and_other_organizations(api, other_api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 100_000)
    bad = api.post(
        f"/frames/{frame['id']}/usage", {"input_tokens": 1, "output_tokens": 1, "latency_ms": -5}
    )
    assert bad.status_code == 422 and bad.json()["error"] == "validation_error"
    assert Usage.objects.count() == 0
    assert other_api.get(f"/sessions/{session['id']}/calls").status_code == 404


def test_it_lists_one_frames_calls_when_asked(api, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 100_000)
    child = push_ok(session["id"], 10_000, parent=root["id"])
    for frame, tokens in ((root, 1), (child, 2), (child, 3)):
        body = {"input_tokens": tokens, "output_tokens": 1}
        assert api.post(f"/frames/{frame['id']}/usage", body).status_code == 200
    url = f"/sessions/{session['id']}/calls"
    page = api.get(url, {"frame_id": child["id"]}).json()
    assert page["count"] == 2
    assert [c["input_tokens"] for c in page["items"]] == [2, 3]
    assert {c["frame_id"] for c in page["items"]} == {child["id"]}
    assert api.get(url).json()["count"] == 3
    other = start_session()
    elsewhere = push_ok(other["id"], 1_000)
    assert api.get(url, {"frame_id": elsewhere["id"]}).status_code == 404
    assert api.get(url, {"frame_id": "not-a-frame"}).status_code == 422
