"""Resume lists the tool calls a conversation recorded without their result (seed 000 §5.3)."""


def tool_call(call_id, name):
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": {}}],
    }


def tool_result(call_id):
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "done"}],
    }


def test_it_lists_a_recorded_tool_call_without_result_until_the_result_arrives(
    api, start_session, push_ok
):
    session = start_session()
    frame = push_ok(session["id"], 10_000)
    messages = [
        {"role": "user", "content": "Book a hotel and check the weather."},
        tool_call("toolu_1", "search_hotels"),
        tool_result("toolu_1"),
        tool_call("toolu_2", "weather_lookup"),
    ]
    response = api.post(f"/sessions/{session['id']}/messages", {"messages": messages})
    assert response.status_code == 200, response.content

    pending = api.get(f"/sessions/{session['id']}/resume").json()["pending_work"]
    assert pending == [
        {
            "frame_id": frame["id"],
            "work_type": "tool_in_progress",
            "description": "Tool 'weather_lookup' incomplete",
        }
    ]

    api.post(f"/sessions/{session['id']}/messages", {"messages": [tool_result("toolu_2")]})
    assert api.get(f"/sessions/{session['id']}/resume").json()["pending_work"] == []


def test_a_waiting_frame_s_tool_calls_are_not_in_progress(api, start_session, push_ok):
    session = start_session()
    parent = push_ok(session["id"], 10_000)
    api.post(
        f"/sessions/{session['id']}/messages",
        {"messages": [{"role": "user", "content": "Go."}, tool_call("toolu_9", "delegate")]},
    )
    push_ok(session["id"], 1_000, parent=parent["id"])
    pending = api.get(f"/sessions/{session['id']}/resume").json()["pending_work"]
    assert [p["work_type"] for p in pending] == ["waiting_for_subcall"]
