"""PATCH /sessions/{id}: the eviction policy changes while the session runs (seed 003)."""

from frames.models import Event


def _patch(api, session_id, body):
    return api._call("patch", f"/sessions/{session_id}", body)


def test_it_changes_the_eviction_policy_and_logs_it(api, start_session, push_ok):
    session = start_session()
    push_ok(session["id"], 5_000, goal="root")

    response = _patch(api, session["id"], {"eviction_policy": "size_first"})

    assert response.status_code == 200, response.content
    assert response.json()["eviction_policy"] == "size_first"
    assert response.json()["top_frame_id"] is not None
    assert api.get(f"/sessions/{session['id']}").json()["eviction_policy"] == "size_first"
    [event] = Event.objects.filter(session_id=session["id"], type="session.updated")
    assert event.payload == {"eviction_policy": "size_first", "from": {"eviction_policy": "lru"}}
    assert event.actor == "agent:researcher"

    again = _patch(api, session["id"], {"eviction_policy": "size_first"})
    assert again.status_code == 200
    assert Event.objects.filter(session_id=session["id"], type="session.updated").count() == 1


def test_it_reorders_the_eviction_candidates(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 50_000, goal="root")
    small = api.post(f"/frames/{frame['id']}/handles", {"kind": "document", "content": "tiny"})
    large = api.post(
        f"/frames/{frame['id']}/handles", {"kind": "document", "content": "word " * 2000}
    )
    api.post(f"/handles/{small.json()['id']}/attention", {"weight": 0.5})
    api.post(f"/handles/{large.json()['id']}/attention", {"weight": 0.5})

    _patch(api, session["id"], {"eviction_policy": "size_first"})
    candidates = api.get(f"/sessions/{session['id']}/pressure").json()["eviction_candidates"]

    assert candidates[0]["handle_id"] == large.json()["id"]


def test_it_refuses_what_it_cannot_change(api, start_session, other_api):
    session = start_session()
    unknown = _patch(api, session["id"], {"eviction_policy": "random"})
    assert unknown.status_code == 422
    extra = _patch(api, session["id"], {"eviction_policy": "lru", "model": "other"})
    assert extra.status_code == 422 and "model" in str(extra.json()["errors"])
    assert _patch(other_api, session["id"], {"eviction_policy": "lru"}).status_code == 404
    api.post(f"/sessions/{session['id']}/end")
    ended = _patch(api, session["id"], {"eviction_policy": "size_first"})
    assert (ended.status_code, ended.json()["error"]) == (409, "session_ended")
    assert api.get(f"/sessions/{session['id']}").json()["eviction_policy"] == "lru"
