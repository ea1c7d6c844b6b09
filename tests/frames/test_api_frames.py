"""Sessions, frames, budgets, handles, resume and events through the JSON API."""

import uuid

import pytest
from django.core.management import call_command

from frames.models import ContextHandle, Session
from frames.projections import projection_diff
from frames.suspensions.selectors import suspension_get
from frames.suspensions.services import suspension_reject


def test_it_reproduces_the_seed_budget_propagation_example_figure_for_figure(
    api, start_session, push_ok
):
    session = start_session()
    root = push_ok(session["id"], 8000, goal="Answer the customer")
    for purpose, amount in (("brief_context", 500), ("breadcrumbs", 200)):
        response = api.post(f"/frames/{root['id']}/reserve", {"purpose": purpose, "amount": amount})
        assert response.status_code == 200, response.content
    child = push_ok(session["id"], 3000, parent=root["id"], goal="Look up the order")
    api.post(f"/frames/{root['id']}/usage", {"input_tokens": 1500, "output_tokens": 500})
    api.post(f"/frames/{child['id']}/usage", {"input_tokens": 2000, "output_tokens": 500})

    budget = api.get(f"/frames/{root['id']}").json()["budget"]
    assert budget == {
        "total": 8000,
        "used": 2000,
        "reserved": 700,
        "subcall_allocation": 3000,
        "available": 2300,
        "overrun": 0,
        "max_subframe_depth": 8,
        "reservations": {"brief_context": 500, "breadcrumbs": 200},
    }

    popped = api.post(
        f"/frames/{child['id']}/pop", {"status": "completed", "result_refs": ["order:42"]}
    )
    assert popped.status_code == 200
    assert popped.json()["status"] == "completed"
    budget = api.get(f"/frames/{root['id']}").json()["budget"]
    assert (budget["used"], budget["subcall_allocation"], budget["available"]) == (4500, 0, 2800)


def _popped(api, session_id, frame_id):
    events = api.get(f"/sessions/{session_id}/events").json()
    return next(e for e in events if e["type"] == "frame.popped" and e["frame_id"] == frame_id)


def test_a_popped_frame_releases_its_reservations_and_shows_what_it_returned(
    api, member_client, start_session, push_ok, capsys
):
    session = start_session()
    root = push_ok(session["id"], 8000, goal="Answer the customer")
    api.post(f"/frames/{root['id']}/reserve", {"purpose": "brief_context", "amount": 700})
    child = push_ok(session["id"], 3000, parent=root["id"], goal="Look up the order")
    api.post(f"/frames/{child['id']}/reserve", {"purpose": "evidence", "amount": 500})
    api.post(f"/frames/{child['id']}/usage", {"input_tokens": 1200, "output_tokens": 400})
    parent_before = api.get(f"/frames/{root['id']}").json()["budget"]["available"]

    answer = api.post(f"/frames/{child['id']}/pop", {"status": "completed"}).json()
    popped = _popped(api, session["id"], child["id"])
    assert popped["payload"]["returned"] == 1400
    for budget in (answer["budget"], api.get(f"/frames/{child['id']}").json()["budget"]):
        assert budget["available"] == popped["payload"]["returned"]
        assert (budget["reserved"], budget["reservations"]) == (0, {})
    assert popped["payload"]["released"] == {"evidence": 500}
    parent_after = api.get(f"/frames/{root['id']}").json()["budget"]["available"]
    assert parent_after - parent_before == popped["payload"]["returned"]
    page = member_client.get(f"/frames/{child['id']}/").content.decode()
    assert "available 1,400" in page and "Reserved for:" not in page

    api.post(f"/frames/{root['id']}/pop", {"status": "completed"})
    root_popped = _popped(api, session["id"], root["id"])
    budget = api.get(f"/frames/{root['id']}").json()["budget"]
    assert (budget["reserved"], budget["available"]) == (0, root_popped["payload"]["returned"])
    assert root_popped["payload"]["released"] == {"brief_context": 700}
    call_command("rebuild_projections", "--verify")
    assert "match the event log" in capsys.readouterr().out


def test_it_answers_insufficient_tokens_with_requested_and_available(start_session, push_ok, push):
    session = start_session()
    root = push_ok(session["id"], 1000)
    push_ok(session["id"], 700, parent=root["id"])
    response = push(session["id"], 400, parent=root["id"])
    assert response.status_code == 409
    assert response.json() | {"detail": ""} == {
        "error": "insufficient_tokens",
        "detail": "",
        "requested": 400,
        "available": 300,
    }


def test_a_child_may_take_exactly_what_its_parent_has_left_and_not_a_token_more(
    start_session, push_ok, push, api
):
    session = start_session()
    root = push_ok(session["id"], 1000)
    push_ok(session["id"], 700, parent=root["id"])
    over = push(session["id"], 301, parent=root["id"])
    assert over.status_code == 409 and over.json()["available"] == 300
    push_ok(session["id"], 300, parent=root["id"])
    assert api.get(f"/frames/{root['id']}").json()["budget"]["available"] == 0
    assert push(session["id"], 1, parent=root["id"]).status_code == 409


@pytest.mark.parametrize("amount", [0, -5])
def test_it_refuses_to_reserve_no_tokens_and_logs_nothing(api, start_session, push_ok, amount):
    session = start_session()
    root = push_ok(session["id"], 8000)
    before = api.get(f"/sessions/{session['id']}/events").json()

    response = api.post(f"/frames/{root['id']}/reserve", {"purpose": "x", "amount": amount})

    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "validation_error" and answer["detail"]
    assert [error["loc"] for error in answer["errors"]] == [["body", "amount"]]
    assert api.get(f"/sessions/{session['id']}/events").json() == before
    budget = api.get(f"/frames/{root['id']}").json()["budget"]
    assert (budget["reserved"], budget["reservations"], budget["available"]) == (0, {}, 8000)


def test_it_limits_depth_and_lets_a_child_only_lower_the_limit(start_session, push_ok, push):
    session = start_session()
    root = push_ok(session["id"], 10_000, max_subframe_depth=1)
    child = push_ok(session["id"], 1000, parent=root["id"])
    assert child["budget"]["max_subframe_depth"] == 1
    too_deep = push(session["id"], 100, parent=child["id"])
    assert too_deep.status_code == 409
    assert too_deep.json()["error"] == "max_depth_exceeded"
    raised = push(session["id"], 100, parent=root["id"], max_subframe_depth=5)
    assert raised.status_code == 422
    assert raised.json()["error"] == "validation_error"


def test_a_parent_waits_while_its_child_works_and_resumes_after(api, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 5000)
    child = push_ok(session["id"], 1000, parent=root["id"])
    assert api.get(f"/frames/{root['id']}").json()["status"] == "waiting"
    assert api.get(f"/sessions/{session['id']}").json()["top_frame_id"] == child["id"]
    api.post(f"/frames/{child['id']}/pop", {"status": "failed"})
    assert api.get(f"/frames/{root['id']}").json()["status"] == "active"
    assert api.get(f"/sessions/{session['id']}").json()["top_frame_id"] == root["id"]


def test_it_refuses_to_pop_twice_or_to_pop_a_parent_with_open_children(api, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 5000)
    child = push_ok(session["id"], 1000, parent=root["id"])
    response = api.post(f"/frames/{root['id']}/pop", {"status": "completed"})
    assert response.status_code == 409
    assert response.json()["error"] == "frame_has_open_children"
    assert api.post(f"/frames/{child['id']}/pop", {"status": "completed"}).status_code == 200
    again = api.post(f"/frames/{child['id']}/pop", {"status": "completed"})
    assert again.status_code == 409
    assert again.json()["error"] == "frame_not_active"
    usage = api.post(f"/frames/{child['id']}/usage", {"input_tokens": 1, "output_tokens": 1})
    assert usage.json()["error"] == "frame_not_active"


def test_a_retried_usage_record_of_the_same_message_is_charged_once(api, start_session, push_ok):
    session = start_session(context_window_tokens=10_000)
    root = push_ok(session["id"], 50_000)
    call = {"input_tokens": 300, "output_tokens": 40, "message_id": "msg_01XFDUDYJgAACzvnptvVoYEL"}
    first = api.post(f"/frames/{root['id']}/usage", call)
    assert first.status_code == 200 and first.json()["budget"]["used"] == 340
    # The answer was lost; the agent sends the same record again, even after popping.
    child = push_ok(session["id"], 1_000, parent=root["id"])
    api.post(f"/frames/{child['id']}/pop", {"status": "completed"})
    for frame in (root, child):
        again = api.post(f"/frames/{frame['id']}/usage", call)
        assert again.status_code == 200, again.content
    assert api.get(f"/frames/{root['id']}").json()["budget"]["used"] == 340
    body = api.get(f"/sessions/{session['id']}").json()
    assert body["usage_totals"]["input_tokens"] == 300
    kinds = [e["type"] for e in api.get(f"/sessions/{session['id']}/events").json()]
    assert kinds.count("usage.recorded") == 1
    # Another message is another call; records without an id are never merged.
    api.post(f"/frames/{root['id']}/usage", {**call, "message_id": "msg_02"})
    api.post(f"/frames/{root['id']}/usage", {"input_tokens": 1, "output_tokens": 1})
    api.post(f"/frames/{root['id']}/usage", {"input_tokens": 1, "output_tokens": 1})
    assert api.get(f"/frames/{root['id']}").json()["budget"]["used"] == 684
    # The same message id in another session is that session's own call.
    other = start_session()
    other_root = push_ok(other["id"], 1_000)
    assert api.post(f"/frames/{other_root['id']}/usage", call).json()["budget"]["used"] == 340
    # Once the session has ended, a retry is still answered; a new call is refused.
    assert api.post(f"/sessions/{session['id']}/end").status_code == 200
    assert api.post(f"/frames/{root['id']}/usage", call).status_code == 200
    late = api.post(f"/frames/{root['id']}/usage", {**call, "message_id": "msg_03"})
    assert (late.status_code, late.json()["error"]) == (409, "session_ended")


def test_it_sums_usage_over_every_frame_into_the_session_totals(api, start_session, push_ok):
    session = start_session(context_window_tokens=10_000)
    root = push_ok(session["id"], 50_000)
    child = push_ok(session["id"], 10_000, parent=root["id"])
    api.post(
        f"/frames/{root['id']}/usage",
        {
            "input_tokens": 100,
            "output_tokens": 50,
            "cache_creation_input_tokens": 1000,
            "cache_read_input_tokens": 0,
        },
    )
    api.post(
        f"/frames/{child['id']}/usage",
        {
            "input_tokens": 20,
            "output_tokens": 30,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 8000,
        },
    )
    body = api.get(f"/sessions/{session['id']}").json()
    assert body["usage_totals"] == {
        "input_tokens": 120,
        "output_tokens": 80,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 8000,
    }
    # Cost uses the cache discount: 120 + 80 + 1.25 x 1000 + 0.1 x 8000 = 2250, while the
    # window and the budget count every token (9,200 spent across the two frames).
    assert body["effective_tokens"] == 2250
    # The child is on top; its latest call fills 8050 of 10000 tokens: high pressure.
    assert body["pressure"] == {"level": "high", "utilization": 0.805}
    assert api.get(f"/frames/{child['id']}").json()["budget"]["used"] == 8050


def test_it_counts_a_handle_once_and_stores_the_count(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 5000)
    response = api.post(
        f"/frames/{frame['id']}/handles",
        {
            "kind": "tool_result",
            "priority": "high",
            "content": "The order 42 shipped on Monday.",
            "category": "orders",
        },
    )
    assert response.status_code == 201
    body = response.json()
    assert body["estimated_tokens"] > 3
    assert body["state"] == "loaded"
    bad = api.post(
        f"/frames/{frame['id']}/handles",
        {"kind": "tool_result", "priority": "urgent", "content": "x"},
    )
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["loc"][-1] == "priority"
    # Neither content nor a ref is no handle at all; an empty tool output is content.
    empty = api.post(f"/frames/{frame['id']}/handles", {"kind": "message", "priority": "high"})
    assert empty.status_code == 422, empty.content
    assert "content or a ref" in empty.json()["errors"][0]["msg"]
    blank = api.post(f"/frames/{frame['id']}/handles", {"kind": "tool_result", "content": ""})
    assert blank.status_code == 201, blank.content
    assert ContextHandle.objects.filter(frame_id=frame["id"]).count() == 2


@pytest.mark.parametrize(
    "body",
    [
        {"goal": "x", "budget": {"total": -1}},
        {"goal": "x", "budget": {"total": "many"}},
        {"goal": "", "budget": {"total": 10}},
        {"goal": "x" * 10_001, "budget": {"total": 10}},
        {"goal": "x", "budget": {"total": 10**12}},
        {"goal": "x"},
        {"goal": "nul\u0000byte", "budget": {"total": 10}},
        [1, 2, 3],
    ],
)
def test_it_answers_malformed_frames_with_field_errors(api, start_session, body):
    session = start_session()
    response = api.post(f"/sessions/{session['id']}/frames", body)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert response.json()["errors"]
    assert api.get(f"/sessions/{session['id']}/events").json()[-1]["type"] == "session.created"


def test_it_refuses_an_unknown_time_zone_at_session_start(api):
    before = api.get("/sessions").json()["count"]
    response = api.post("/sessions", {"environment": {"timezone": "Mars/Olympus_Mons"}})
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert response.json()["errors"][0]["loc"][-1] == "timezone"
    assert api.get("/sessions").json()["count"] == before
    good = api.post("/sessions", {"environment": {"timezone": "Asia/Tokyo"}})
    assert good.status_code == 201
    assert api.get(f"/sessions/{good.json()['id']}/environment").json()["timezone"] == "Asia/Tokyo"


def test_it_answers_a_body_that_is_not_json_or_not_utf8(api, start_session):
    session = start_session()
    for raw in (b"{not json", b'{"goal": "\xff\xfe", "budget": {"total": 1}}'):
        response = api.client.post(
            f"/api/v1/sessions/{session['id']}/frames",
            data=raw,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {api.key}",
        )
        assert response.status_code == 422
        assert response.json()["error"] == "validation_error"


def test_it_hides_another_organizations_sessions_and_frames(api, other_api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 1000)
    for path in (
        f"/sessions/{session['id']}",
        f"/frames/{frame['id']}",
        f"/sessions/{session['id']}/events",
    ):
        response = other_api.get(path)
        assert response.status_code == 404
        assert response.json()["error"] == "not_found"
    assert other_api.post(f"/frames/{frame['id']}/pop", {"status": "completed"}).status_code == 404
    assert (
        other_api.post(
            f"/sessions/{session['id']}/frames", {"goal": "x", "budget": {"total": 1}}
        ).status_code
        == 404
    )
    assert other_api.get("/sessions").json()["count"] == 0
    assert api.get(f"/frames/{frame['id']}").json()["status"] == "active"


def test_it_refuses_a_parent_from_another_organization(
    api, other_api, start_session, push_ok, push
):
    theirs = push_ok(start_session(client=other_api)["id"], 1000, client=other_api)
    ours = start_session()
    response = push(ours["id"], 100, parent=theirs["id"])
    assert response.status_code == 404


def test_it_answers_404_for_ids_that_are_not_ids(api):
    assert api.get("/sessions/not-a-uuid").status_code == 404
    assert api.get(f"/frames/{uuid.uuid4()}").status_code == 404


def test_identity_is_read_only_and_cannot_claim_more_authority_than_the_key(api, start_session):
    session = start_session()
    response = api.put(f"/sessions/{session['id']}/identity", {"authority": "policy"})
    assert response.status_code == 409
    assert response.json()["error"] == "identity_read_only"
    claim = api.post("/sessions", {"identity": {"user_name": "Eve", "authority": "admin"}})
    assert claim.status_code == 403
    assert claim.json()["error"] == "authority_too_low"


def test_resume_rebuilds_the_stack_and_finds_pending_work(api, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 10_000, goal="Plan the trip")
    child = push_ok(session["id"], 3000, parent=root["id"], goal="Book the hotel")
    api.post(
        f"/frames/{child['id']}/handles",
        {
            "kind": "tool_call",
            "content": "search_hotels(paris)",
            "tool_call_id": "t1",
            "category": "search_hotels",
        },
    )
    api.post(
        f"/frames/{child['id']}/handles",
        {
            "kind": "tool_call",
            "content": "weather(paris)",
            "tool_call_id": "t2",
            "category": "weather",
        },
    )
    api.post(
        f"/frames/{child['id']}/handles",
        {"kind": "tool_result", "content": "sunny", "tool_call_id": "t2"},
    )

    body = api.get(f"/sessions/{session['id']}/resume").json()
    assert body["current_frame"]["id"] == child["id"]
    assert [f["id"] for f in body["frame_stack"]] == [root["id"], child["id"]]
    assert {(p["frame_id"], p["work_type"]) for p in body["pending_work"]} == {
        (root["id"], "waiting_for_subcall"),
        (child["id"], "tool_in_progress"),
    }
    assert "search_hotels" in " ".join(p["description"] for p in body["pending_work"])
    assert body["recovery_summary"]["frames_recovered"] == 2
    last = api.get(f"/sessions/{session['id']}/events").json()[-1]
    assert (last["type"], last["frame_id"]) == ("actor.resumed", child["id"])
    assert last["payload"] == {"pending_work": 2}


def test_events_come_in_order_and_page_with_after(api, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 1000)
    api.post(f"/frames/{root['id']}/usage", {"input_tokens": 5, "output_tokens": 5})
    api.post(f"/frames/{root['id']}/pop", {"status": "completed"})
    events = api.get(f"/sessions/{session['id']}/events").json()
    assert [e["type"] for e in events] == [
        "session.created",
        "frame.pushed",
        "session.activated",
        "usage.recorded",
        "frame.popped",
    ]
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    later = api.get(f"/sessions/{session['id']}/events", {"after": 3}).json()
    assert [e["seq"] for e in later] == [4, 5]


def test_the_lifecycle_follows_what_the_agent_does(api, start_session, push_ok):
    """Seed 003: loading until the agent reads its context back, bootstrap while it takes
    its first context, active from its first frame, ended (through persisting) at the end."""
    session = start_session()
    sid = session["id"]

    def state():
        return api.get(f"/sessions/{sid}").json()["lifecycle_state"]

    assert session["lifecycle_state"] == state() == "loading"
    assert api.post(f"/sessions/{sid}/context-pack", {"budget_tokens": 1000}).status_code == 200
    assert state() == "bootstrap"
    api.post(f"/sessions/{sid}/context-pack", {"budget_tokens": 1000})
    push_ok(sid, 1000)
    assert state() == "active"
    api.get(f"/sessions/{sid}/resume")  # a resume later on changes nothing
    assert state() == "active"
    assert api.post(f"/sessions/{sid}/end").json()["lifecycle_state"] == "ended"
    kinds = [e["type"] for e in api.get(f"/sessions/{sid}/events").json()]
    assert kinds.count("session.bootstrapped") == 1
    assert kinds.index("session.bootstrapped") < kinds.index("session.activated")
    assert kinds.index("session.persisting") < kinds.index("session.ended")


def test_ending_a_session_cancels_its_open_frames(api, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 1000)
    ended = api.post(f"/sessions/{session['id']}/end")
    assert ended.json()["lifecycle_state"] == "ended"
    assert api.get(f"/frames/{root['id']}").json()["status"] == "cancelled"
    response = api.post(
        f"/sessions/{session['id']}/frames", {"goal": "more", "budget": {"total": 1}}
    )
    assert response.status_code == 409
    assert response.json()["error"] == "session_ended"


def test_sessions_list_newest_first_and_searchable(api, start_session):
    start_session(title="Quarterly report")
    start_session(title="Refund for order 42")
    listing = api.get("/sessions").json()
    assert [s["title"] for s in listing["items"]] == ["Refund for order 42", "Quarterly report"]
    assert [s["title"] for s in api.get("/sessions", {"search": "quarter"}).json()["items"]] == [
        "Quarterly report"
    ]


def test_an_open_frame_records_results_before_it_pops(api, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 10_000)
    child = push_ok(session["id"], 1_000, parent=root["id"])
    added = api.post(f"/frames/{child['id']}/results", {"result_refs": ["file:report.md"]})
    assert added.status_code == 200, added.content
    assert added.json()["result_refs"] == ["file:report.md"]
    api.post(f"/frames/{child['id']}/results", {"result_refs": [{"fact": "q3_revenue"}]})
    popped = api.post(
        f"/frames/{child['id']}/pop", {"status": "completed", "result_refs": ["summary"]}
    ).json()
    assert popped["result_refs"] == ["file:report.md", {"fact": "q3_revenue"}, "summary"]
    events = api.get(f"/sessions/{session['id']}/events").json()
    added_events = [e for e in events if e["type"] == "frame.result_added"]
    assert [e["payload"]["result_refs"] for e in added_events] == [
        ["file:report.md"],
        [{"fact": "q3_revenue"}],
    ]
    assert projection_diff(Session.objects.get(pk=session["id"])) == []
    # A closed frame takes no more; an empty list or too many are field errors.
    closed = api.post(f"/frames/{child['id']}/results", {"result_refs": ["late"]})
    assert (closed.status_code, closed.json()["error"]) == (409, "frame_not_active")
    empty = api.post(f"/frames/{root['id']}/results", {"result_refs": []})
    assert empty.status_code == 422 and empty.json()["errors"][0]["loc"][-1] == "result_refs"
    api.post(f"/frames/{root['id']}/results", {"result_refs": list(range(1000))})
    over = api.post(f"/frames/{root['id']}/results", {"result_refs": ["one more"]})
    assert over.status_code == 422, over.content
    assert over.json()["errors"][0]["loc"] == ["body", "result_refs"]
    assert len(api.get(f"/frames/{root['id']}").json()["result_refs"]) == 1000
    # The cap is on what is added while the frame works: its pop still brings its own.
    done = api.post(f"/frames/{root['id']}/pop", {"status": "completed", "result_refs": ["end"]})
    assert done.status_code == 200 and done.json()["result_refs"][-1] == "end"


def test_a_person_can_reject_a_frame_that_holds_all_the_results_it_may_add(
    api, start_session, push_ok, make_user
):
    session = start_session()
    root = push_ok(session["id"], 10_000)
    api.post(f"/frames/{root['id']}/results", {"result_refs": list(range(1000))})
    token = api.post(
        f"/frames/{root['id']}/suspend", {"reason": "Publish?", "requires_approval": True}
    ).json()["token"]
    suspension = suspension_get(organization=api.organization, token=token)
    suspension_reject(
        suspension=suspension, user=make_user(username="grace", approver=True), note="No."
    )
    frame = api.get(f"/frames/{root['id']}").json()
    assert frame["status"] == "failed"
    assert frame["result_refs"][-1] == {"rejected": "No."}


def test_an_ended_session_takes_no_more_work(api, start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 10_000)
    api.post(
        f"/sessions/{session['id']}/messages", {"messages": [{"role": "user", "content": "Hi"}]}
    )
    assert api.post(f"/sessions/{session['id']}/end").status_code == 200
    sid = session["id"]
    writes = {
        "frame push": api.post(f"/sessions/{sid}/frames", {"goal": "More", "budget": {"total": 1}}),
        "usage": api.post(f"/frames/{root['id']}/usage", {"input_tokens": 1, "output_tokens": 1}),
        "messages": api.post(
            f"/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "Still there?"}]}
        ),
        "compaction": api.post(f"/sessions/{sid}/compactions", {}),
        "context pack": api.post(f"/sessions/{sid}/context-pack", {"budget_tokens": 1000}),
        "working set": api.put(f"/sessions/{sid}/working-set/k", {"value": 1}),
        "environment": api.put(f"/sessions/{sid}/environment", {"location": "Paris"}),
        "RLM state": api.post("/rlm/states", {"prompt": "Solve", "session_id": sid}),
    }
    answers = {name: (r.status_code, r.json().get("error")) for name, r in writes.items()}
    assert answers == {name: (409, "session_ended") for name in writes}
    # Reading it is still fine.
    assert api.get(f"/sessions/{sid}/turns").status_code == 200
    assert api.get(f"/sessions/{sid}").json()["lifecycle_state"] == "ended"


def test_it_lists_a_sessions_frames_in_push_order_by_page_and_status(
    api, other_api, start_session, push_ok, django_assert_max_num_queries
):
    session = start_session()
    sid = session["id"]
    root = push_ok(sid, 10_000, goal="Plan")
    child = push_ok(sid, 1_000, parent=root["id"], goal="Read the RFC")
    api.post(
        f"/frames/{child['id']}/pop", {"status": "failed", "failure_reason": "404 from the site"}
    )
    push_ok(sid, 1_000, parent=root["id"], goal="Write the summary")
    with django_assert_max_num_queries(6):
        listed = api.get(f"/sessions/{sid}/frames").json()
    assert [f["goal"] for f in listed["items"]] == ["Plan", "Read the RFC", "Write the summary"]
    assert (listed["count"], listed["next_offset"]) == (3, None)
    assert listed["items"][1]["failure_reason"] == "404 from the site"
    assert listed["items"][1]["parent_frame_id"] == root["id"]
    page = api.get(f"/sessions/{sid}/frames", {"limit": 1, "offset": 1}).json()
    assert ([f["goal"] for f in page["items"]], page["next_offset"]) == (["Read the RFC"], 2)
    failed = api.get(f"/sessions/{sid}/frames", {"status": "failed"}).json()
    assert [f["id"] for f in failed["items"]] == [child["id"]]
    bad = api.get(f"/sessions/{sid}/frames", {"status": "lost"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["query", "status"]
    assert other_api.get(f"/sessions/{sid}/frames").status_code == 404
