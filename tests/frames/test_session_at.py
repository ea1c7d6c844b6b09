"""GET /sessions/{id}/at/{seq}: the session as it stood after one event, from the log."""

from frames.models import Event


def _seq_after(session_id, kind, nth=0):
    return list(
        Event.objects.filter(session_id=session_id, type=kind)
        .order_by("seq")
        .values_list("seq", flat=True)
    )[nth]


def test_it_omits_later_frames_and_shows_the_budgets_of_that_moment(api, start_session, push_ok):
    session = start_session(context_window_tokens=10_000)
    root = push_ok(session["id"], 50_000, goal="Root")
    api.post(f"/frames/{root['id']}/usage", {"input_tokens": 6_000, "output_tokens": 0})
    moment = _seq_after(session["id"], "usage.recorded")
    child = push_ok(session["id"], 5_000, parent=root["id"], goal="Later child")
    api.post(f"/frames/{root['id']}/reserve", {"purpose": "answer", "amount": 1000})

    response = api.get(f"/sessions/{session['id']}/at/{moment}")
    assert response.status_code == 200, response.content
    at = response.json()
    assert at["seq"] == moment
    assert [f["id"] for f in at["frames"]] == [root["id"]]
    frame = at["frames"][0]
    assert frame["status"] == "active" and frame["goal"] == "Root"
    assert frame["budget"] == {
        "total": 50_000,
        "used": 6_000,
        "reserved": 0,
        "subcall_allocation": 0,
        "available": 44_000,
        "overrun": 0,
    }
    assert at["top_frame_id"] == root["id"]
    assert at["pressure"] == {"level": "medium", "utilization": 0.6}
    assert at["usage_totals"]["input_tokens"] == 6_000

    now = api.get(f"/sessions/{session['id']}/at/{at['last_event_seq']}").json()
    assert [f["id"] for f in now["frames"]] == [root["id"], child["id"]]
    assert now["frames"][0]["status"] == "waiting"
    assert now["frames"][0]["budget"]["subcall_allocation"] == 5_000
    assert now["top_frame_id"] == child["id"]


def test_it_answers_404_past_the_last_event_and_for_other_organizations(
    api, other_api, start_session
):
    session = start_session()
    last = api.get(f"/sessions/{session['id']}").json()["last_event_seq"]
    assert api.get(f"/sessions/{session['id']}/at/{last + 1}").status_code == 404
    assert other_api.get(f"/sessions/{session['id']}/at/{last}").status_code == 404
    assert api.get(f"/sessions/{session['id']}/at/-1").status_code == 422
    assert api.get(f"/sessions/{session['id']}/at/0").json()["frames"] == []


def test_the_history_page_shows_the_tree_at_that_point(api, member_client, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 50_000, goal="Root goal")
    moment = _seq_after(session["id"], "frame.pushed")
    push_ok(session["id"], 5_000, parent=root["id"], goal="Later child")
    page = member_client.get(f"/sessions/{session['id']}/at/", {"seq": moment})
    html = page.content.decode()
    assert page.status_code == 200
    assert "Root goal" in html and "Later child" not in html and "used 0 / 50,000" in html
    fragment = member_client.get(f"/sessions/{session['id']}/at/", HTTP_HX_REQUEST="true")
    text = fragment.content.decode()
    assert "<html" not in text and "Later child" in text and 'id="session-history"' in text


def test_a_pushed_child_keeps_the_window_its_parent_left_until_its_own_call(
    api, start_session, push_ok
):
    """Opening a subtask does not empty the agent's window: the gauge, the session's level
    and the pack's format stay where the parent's latest call left them, live and as
    the history replays them, until the child reports a call of its own."""
    session = start_session(context_window_tokens=10_000)
    root = push_ok(session["id"], 50_000, goal="Root")
    api.post(f"/frames/{root['id']}/usage", {"input_tokens": 9_000, "output_tokens": 200})
    child = push_ok(session["id"], 5_000, parent=root["id"], goal="Child")

    body = api.get(f"/sessions/{session['id']}").json()
    assert body["top_frame_id"] == child["id"]
    assert body["pressure"]["level"] == "critical"
    assert body["pressure"]["utilization"] == 0.92
    assert api.get(f"/frames/{child['id']}").json()["pressure_level"] == "critical"
    at = api.get(f"/sessions/{session['id']}/at/{body['last_event_seq']}").json()
    assert at["top_frame_id"] == child["id"]
    assert at["pressure"] == {"level": "critical", "utilization": 0.92}
    pack = api.post(f"/sessions/{session['id']}/context-pack", {"budget_tokens": 2_000}).json()
    assert pack["format"] == "ultra_dense"

    # The child's own first call measures the window again.
    api.post(f"/frames/{child['id']}/usage", {"input_tokens": 1_000, "output_tokens": 0})
    body = api.get(f"/sessions/{session['id']}").json()
    assert body["pressure"]["level"] == "low" and body["pressure"]["utilization"] == 0.1
    at = api.get(f"/sessions/{session['id']}/at/{body['last_event_seq']}").json()
    assert at["pressure"] == {"level": "low", "utilization": 0.1}
