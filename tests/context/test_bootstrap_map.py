"""Seed 003's session lifecycle: a session that persists or ends saves the map of its
resources, and the next session of the same agent is offered it while it loads."""

from frames.models import Event, ResourceMap


def _session_with_resources(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 50_000)
    handles = api.post
    runbook = handles(
        f"/frames/{frame['id']}/handles",
        {"kind": "document", "ref": "docs/runbook.md", "content": "Runbook.", "state": "cold"},
    ).json()
    handles(f"/handles/{runbook['id']}/annotations", {"note": "Step 3 is outdated."})
    hot = handles(
        f"/frames/{frame['id']}/handles", {"kind": "tool_result", "content": "Build output."}
    ).json()
    handles(f"/handles/{hot['id']}/attention", {"weight": 3})
    handles(
        f"/frames/{frame['id']}/handles",
        {"kind": "system_prompt", "priority": "critical", "content": "You are helpful."},
    )
    return session, runbook, hot


def test_an_ended_session_s_map_is_offered_to_the_agent_s_next_session(api, start_session, push_ok):
    first, runbook, hot = _session_with_resources(api, start_session, push_ok)
    assert api.post(f"/sessions/{first['id']}/end").status_code == 200
    saved = ResourceMap.objects.get(session_id=first["id"])
    assert Event.objects.get(type="session.ended").payload["resource_map_id"] == str(saved.pk)

    second = start_session()
    assert second["lifecycle_state"] == "loading"
    body = api.get(f"/sessions/{second['id']}/bootstrap").json()
    assert body["lifecycle_state"] == "bootstrap"
    offered = body["resource_map"]
    assert offered["from_session_id"] == first["id"]
    assert [r["handle_id"] for r in offered["resources"]] == [hot["id"], runbook["id"]]
    assert offered["resources"][1] == {
        "handle_id": runbook["id"],
        "name": "docs/runbook.md",
        "kind": "document",
        "priority": "medium",
        "state": "cold",
        "tokens": runbook["estimated_tokens"],
        "ref": "docs/runbook.md",
        "summary": "",
        "notes": ["Step 3 is outdated."],
    }
    assert offered["text"].splitlines() == [
        "◆ Build output. [tool_result]",
        "○ docs/runbook.md [document] — Step 3 is outdated.",
    ]
    assert api.get(f"/sessions/{second['id']}").json()["lifecycle_state"] == "bootstrap"


def test_persisting_saves_a_map_without_ending_and_the_newest_is_offered(
    api, start_session, push_ok
):
    first, _runbook, _hot = _session_with_resources(api, start_session, push_ok)
    response = api.post(f"/sessions/{first['id']}/persist")
    assert response.status_code == 200, response.content
    assert len(response.json()["resources"]) == 2
    assert api.get(f"/sessions/{first['id']}").json()["lifecycle_state"] == "active"
    assert Event.objects.filter(type="session.persisted").count() == 1

    later = start_session()
    frame = push_ok(later["id"], 1_000)
    api.post(f"/frames/{frame['id']}/handles", {"kind": "document", "ref": "new.md"})
    api.post(f"/sessions/{later['id']}/end")

    third = start_session()
    offered = api.get(f"/sessions/{third['id']}/bootstrap").json()["resource_map"]
    assert offered["from_session_id"] == later["id"]
    assert offered["text"] == "✓ new.md [document]"

    ended = api.post(f"/sessions/{later['id']}/persist")
    assert ended.status_code == 409 and ended.json()["error"] == "session_ended"


def test_another_agent_is_offered_nothing_and_another_organization_gets_404(
    api, make_api, other_api, start_session, push_ok
):
    first, _runbook, _hot = _session_with_resources(api, start_session, push_ok)
    api.post(f"/sessions/{first['id']}/end")

    colleague = make_api(agent="reviewer")
    theirs = start_session(client=colleague)
    body = colleague.get(f"/sessions/{theirs['id']}/bootstrap").json()
    assert body["resource_map"] is None

    assert other_api.get(f"/sessions/{first['id']}/bootstrap").status_code == 404
    assert other_api.post(f"/sessions/{first['id']}/persist").status_code == 404
    outsider = start_session(client=other_api)
    assert other_api.get(f"/sessions/{outsider['id']}/bootstrap").json()["resource_map"] is None


def test_critical_pressure_is_active_pressure_until_the_window_eases(api, start_session, push_ok):
    session = start_session(context_window_tokens=10_000)
    frame = push_ok(session["id"], 100_000)

    def after_call(tokens):
        body = {"input_tokens": tokens, "output_tokens": 0}
        assert api.post(f"/frames/{frame['id']}/usage", body).status_code == 200
        return api.get(f"/sessions/{session['id']}").json()["lifecycle_state"]

    assert after_call(9_000) == "active_pressure"  # 90 %: critical
    assert after_call(8_200) == "active_pressure"  # 82 %: within the hysteresis band
    assert after_call(7_000) == "active"  # 70 %: below 80 %, high
