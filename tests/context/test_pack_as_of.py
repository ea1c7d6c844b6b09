"""POST /sessions/{id}/context-pack with as_of_seq: the pack a frame would have got right
after an earlier event ("what did the agent see when it made that call?")."""

from frames.models import ContextPackRecord, Session


def _pack(api, session_id, **body):
    body.setdefault("budget_tokens", 4000)
    response = api.post(f"/sessions/{session_id}/context-pack", body)
    assert response.status_code == 200, response.content
    return response.json()


def _seq(session_id) -> int:
    return Session.objects.values_list("last_event_seq", flat=True).get(pk=session_id)


def _setup(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 100_000)
    for content in ("The contract says 30 days.", "Refunds need a receipt."):
        response = api.post(
            f"/frames/{frame['id']}/handles",
            {"kind": "document", "priority": "medium", "content": content},
        )
        assert response.status_code == 201, response.content
    return session, frame


def _fact(api, **body):
    response = api.post("/facts", {"source": "user", **body})
    assert response.status_code == 201, response.content
    return response.json()


def _usage(api, frame):
    response = api.post(f"/frames/{frame['id']}/usage", {"input_tokens": 100, "output_tokens": 10})
    assert response.status_code == 200, response.content


def test_it_reproduces_a_recorded_pack_when_nothing_relevant_changed(api, start_session, push_ok):
    session, frame = _setup(api, start_session, push_ok)
    _fact(api, key="order", subject="order", value="approved")
    _usage(api, frame)
    recorded = _pack(api, session["id"])
    seq = _seq(session["id"])
    _usage(api, frame)  # a model call changes nothing a pack shows
    replay = _pack(api, session["id"], as_of_seq=seq)
    assert replay["as_of_seq"] == seq and replay["id"] != recorded["id"]
    a = ContextPackRecord.objects.get(pk=recorded["id"])
    b = ContextPackRecord.objects.get(pk=replay["id"])
    assert (b.included, b.dropped, b.breakdown, b.level, b.used) == (
        a.included,
        a.dropped,
        a.breakdown,
        a.level,
        a.used,
    )
    diff = api.get(f"/context-packs/{a.pk}/diff/{b.pk}").json()
    assert (diff["added"], diff["dropped"], diff["changed"]) == ([], [], [])
    assert diff["b"]["as_of_seq"] == seq and diff["a"]["as_of_seq"] is None


def test_it_differs_when_a_fact_was_superseded_in_between_and_the_diff_says_why(
    api, start_session, push_ok
):
    session, frame = _setup(api, start_session, push_ok)
    old = _fact(api, key="order_v1", subject="order", value="approved")
    _usage(api, frame)
    recorded = _pack(api, session["id"])
    seq = _seq(session["id"])
    new = _fact(api, key="order_v2", subject="order", value="cancelled", supersedes="order_v1")
    _usage(api, frame)
    now = _pack(api, session["id"])
    assert [f["key"] for f in now["facts"]] == ["order_v2"]
    replay = _pack(api, session["id"], as_of_seq=seq)
    assert [f["key"] for f in replay["facts"]] == ["order_v1"]
    assert ContextPackRecord.objects.get(pk=replay["id"]).included == (
        ContextPackRecord.objects.get(pk=recorded["id"]).included
    )
    diff = api.get(f"/context-packs/{replay['id']}/diff/{now['id']}").json()
    (dropped,) = diff["dropped"]
    assert (dropped["id"], dropped["reason"], dropped["superseded_by"]) == (
        str(old["id"]),
        "superseded",
        str(new["id"]),
    )
    assert [a["id"] for a in diff["added"]] == [str(new["id"])]


def test_a_replay_leaves_out_handles_added_later_and_shows_states_as_they_were(
    api, start_session, push_ok
):
    session, frame = _setup(api, start_session, push_ok)
    seq = _seq(session["id"])
    before = _pack(api, session["id"], as_of_seq=seq)
    later = api.post(
        f"/frames/{frame['id']}/handles",
        {"kind": "document", "priority": "medium", "content": "New."},
    ).json()
    first = before["segments"][0]["handle_id"]
    assert api.post(f"/handles/{first}/state", {"to": "offline"}).status_code == 200
    replay = _pack(api, session["id"], as_of_seq=seq)
    assert [s["handle_id"] for s in replay["segments"]] == [
        s["handle_id"] for s in before["segments"]
    ]
    assert later["id"] not in [s["handle_id"] for s in replay["segments"]]
    current = _pack(api, session["id"])
    assert first not in [s["handle_id"] for s in current["segments"]]


def test_it_refuses_an_event_the_session_has_not(api, start_session, push_ok):
    session, _ = _setup(api, start_session, push_ok)
    count = ContextPackRecord.objects.count()
    for seq in (0, -3, "x"):
        response = api.post(
            f"/sessions/{session['id']}/context-pack", {"budget_tokens": 4000, "as_of_seq": seq}
        )
        assert response.status_code == 422
    response = api.post(
        f"/sessions/{session['id']}/context-pack",
        {"budget_tokens": 4000, "as_of_seq": _seq(session["id"]) + 5},
    )
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "validation_error"
    assert body["errors"][0]["loc"] == ["body", "as_of_seq"]
    assert ContextPackRecord.objects.count() == count


def test_a_replay_reads_an_ended_session(api, start_session, push_ok):
    session, frame = _setup(api, start_session, push_ok)
    seq = _seq(session["id"])
    assert api.post(f"/sessions/{session['id']}/end").status_code == 200
    assert (
        api.post(f"/sessions/{session['id']}/context-pack", {"budget_tokens": 4000}).status_code
        == 409
    )
    replay = _pack(api, session["id"], as_of_seq=seq)
    assert replay["frame_id"] == frame["id"] and len(replay["segments"]) == 2
    assert [b["status"] for b in replay["breadcrumbs"]] == ["active"]
