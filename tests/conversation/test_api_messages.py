"""POST /sessions/{id}/messages and GET /sessions/{id}/turns."""

import pytest

from frames.conversation.models import CompactionRun, Message
from frames.models import Session, Usage
from frames.services.stack import frame_pop, frame_push

from .conftest import assistant, text, tool_result, tool_use, user


def post(api, session, messages, usage=None):
    body = {"messages": messages}
    if usage is not None:
        body["usage"] = usage
    return api.post(f"/sessions/{session.id}/messages", body)


def turns(api, session, **params):
    response = api.get(f"/sessions/{session.id}/turns", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_it_groups_messages_into_turns(api, session):
    response = post(
        api,
        session,
        [
            user("Fix the failing test in app.py"),
            assistant(
                {"type": "thinking", "thinking": "Look first.", "signature": "s"},
                text("Let me look."),
                tool_use("t1", "Read", file_path="app.py"),
            ),
            tool_result("t1", "def f(): return 1"),
            assistant(
                tool_use("t2", "Edit", file_path="app.py", old_string="1", new_string="2"),
                tool_use("t3", "Bash", command="pytest"),
            ),
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t2", "content": "ok"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t3",
                        "content": [{"type": "text", "text": "4 tests pass"}],
                    },
                ],
            },
            assistant(text("Fixed; the tests pass.")),
            user("Thanks. Now add docs."),
        ],
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["messages"] == 7
    assert [t["index"] for t in body["turns"]] == [0, 1]
    listed = turns(api, session)
    first, second = listed
    assert first["user_message"] == "Fix the failing test in app.py"
    assert [c["id"] for c in first["tool_calls"]] == ["t1", "t2", "t3"]
    assert [r["tool_use_id"] for r in first["tool_results"]] == ["t1", "t2", "t3"]
    assert first["tool_results"][2]["output"] == "4 tests pass"
    assert first["assistant_response"] == "Let me look.\nFixed; the tests pass."
    assert first["tokens"] > 20
    assert first["anchor"] == {
        "type": "task-completion",
        "weight": 0.8,
        "confidence": 0.92,
        "description": "File changes implemented in app.py and tests pass",
    }
    assert (first["summarized"], first["summary_id"], first["previous_error"]) == (
        False,
        None,
        False,
    )
    assert second["user_message"] == "Thanks. Now add docs." and second["anchor"] is None
    assert Message.objects.filter(session=session).count() == 7
    assert (
        sum(m.tokens for m in Message.objects.filter(session=session))
        == first["tokens"] + second["tokens"]
    )


def test_a_tool_result_in_a_later_request_joins_its_turn(api, session):
    post(api, session, [user("Run it"), assistant(tool_use("late", "Bash", command="make"))])
    post(api, session, [user("Meanwhile, another question"), assistant(text("Sure."))])
    response = post(api, session, [tool_result("late", "make: *** error", is_error=True)])
    assert [t["index"] for t in response.json()["turns"]] == [0, 1]
    first, second = turns(api, session)
    assert first["tool_results"] == [
        {"tool_use_id": "late", "output": "make: *** error", "is_error": True}
    ]
    assert second["tool_results"] == []
    assert second["previous_error"] is True


def test_an_error_turn_then_a_fix_is_an_error_resolution_anchor(api, session):
    post(
        api,
        session,
        [
            user("Build"),
            assistant(tool_use("b1", "Bash", command="make")),
            tool_result("b1", "compile error", is_error=True),
            assistant(text("It fails.")),
        ],
    )
    post(
        api,
        session,
        [
            user("Fix it"),
            assistant(
                tool_use("e1", "Write", file_path="main.c"),
                tool_use("b2", "Bash", command="make test"),
            ),
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "e1", "content": "written"},
                    {"type": "tool_result", "tool_use_id": "b2", "content": "all tests pass"},
                ],
            },
            assistant(text("Fixed.")),
        ],
    )
    first, second = turns(api, session)
    assert first["anchor"] is None
    assert second["previous_error"] is True
    assert second["anchor"]["type"] == "error-resolution"
    assert (second["anchor"]["weight"], second["anchor"]["confidence"]) == (0.9, 0.95)
    assert second["anchor"]["description"] == "Build error fixed in main.c and tests now pass"


def test_it_records_usage_with_its_four_fields(api, session):
    usage = {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 4000,
        "model": "claude-x",
    }
    response = post(api, session, [user("Hi"), assistant(text("Hello"))], usage)
    assert response.json()["occupancy_tokens"] == 4420
    record = Usage.objects.get(session=session)
    assert (
        record.input_tokens,
        record.output_tokens,
        record.cache_creation_input_tokens,
        record.cache_read_input_tokens,
    ) == (100, 20, 300, 4000)
    assert record.frame_id is not None
    session.refresh_from_db()
    assert session.usage_totals == {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 4000,
    }
    assert turns(api, session)[0]["occupancy_tokens"] == 4420
    assert response.json()["compaction_id"] is None


def test_compaction_trigger_threshold(api, make_session, django_capture_on_commit_callbacks):
    """Occupancy counts cached input in full: 90 % of the window, not seed 002's discounted figure."""
    session = make_session(context_window_tokens=10_000)
    post(api, session, [user(f"earlier {i}") for i in range(4)])
    below = {
        "input_tokens": 10,
        "output_tokens": 90,
        "cache_read_input_tokens": 8_900,
    }  # 9,000: not above 90 %
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert (
            post(api, session, [user("a"), assistant(text("b"))], below).json()["compaction_id"]
            is None
        )
    assert callbacks == []
    # Discounted (seed 002) this call is 10 - 0.9 * 8,991 < 0 tokens; its occupancy is 9,001.
    above = {"input_tokens": 10, "output_tokens": 0, "cache_read_input_tokens": 8_991}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post(api, session, [user("c"), assistant(text("d"))], above)
    run = CompactionRun.objects.get(pk=response.json()["compaction_id"])
    assert (run.status, run.trigger, run.strategy, run.occupancy_tokens) == (
        "queued",
        "threshold",
        "anchor_point",
        9_001,
    )
    assert len(callbacks) == 1  # the job is queued only once the transaction commits
    with django_capture_on_commit_callbacks(execute=False):
        again = post(api, session, [user("e"), assistant(text("f"))], above)
    assert again.json()["compaction_id"] is None  # one open run per session
    assert CompactionRun.objects.filter(session=session).count() == 1


def test_the_same_call_appended_again_is_answered_as_the_first_time(
    api, make_session, django_capture_on_commit_callbacks
):
    session = make_session(context_window_tokens=10_000)
    post(api, session, [user(f"earlier {i}") for i in range(4)])
    call = {"input_tokens": 10, "output_tokens": 0, "cache_read_input_tokens": 8_991}
    call["message_id"] = "msg_01ReplayMe"
    messages = [user("Summarize the incident"), assistant(text("Here is the summary."))]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        first = post(api, session, messages, call)
    assert first.status_code == 200 and first.json()["compaction_id"] is not None
    listed = turns(api, session)
    # The answer was lost; the wrapper sends the same call again.
    with django_capture_on_commit_callbacks(execute=False) as again_callbacks:
        again = post(api, session, messages, call)
    assert again.status_code == 200, again.content
    assert again.json() == first.json()
    assert turns(api, session) == listed  # nothing appended twice
    assert Usage.objects.filter(session=session).count() == 1
    assert CompactionRun.objects.filter(session=session).count() == 1
    assert (len(callbacks), len(again_callbacks)) == (1, 0)  # one job
    kinds = [e["type"] for e in api.get(f"/sessions/{session.id}/events").json()]
    assert kinds.count("conversation.messages_appended") == 2  # the earlier call, then this one
    # A call recorded through the usage endpoint alone still gets its messages appended.
    frame = frame_push(session=Session.objects.get(pk=session.pk), goal="Work", budget_total=10**6)
    api.post(
        f"/frames/{frame.pk}/usage", {"input_tokens": 5, "output_tokens": 5, "message_id": "m2"}
    )
    later = post(
        api,
        session,
        [user("And the follow-up?")],
        {"input_tokens": 5, "output_tokens": 5, "message_id": "m2"},
    )
    assert later.status_code == 200 and later.json()["messages"] == 1
    assert Usage.objects.filter(session=session, message_id="m2").count() == 1


def test_the_threshold_is_per_session(api, make_session, django_capture_on_commit_callbacks):
    session = make_session(context_window_tokens=10_000, compaction_threshold=0.5)
    over = {"input_tokens": 5_001, "output_tokens": 0}
    with django_capture_on_commit_callbacks(execute=False):
        # Three turns are always kept: nothing to compact yet, so nothing is queued.
        assert (
            post(api, session, [user("a"), user("b"), user("c")], over).json()["compaction_id"]
            is None
        )
        response = post(api, session, [user("d")], over)
    assert response.json()["compaction_id"] is not None


def test_it_works_without_a_frame(api, make_session):
    session = make_session(frame=False)
    response = post(api, session, [user("Hi")], {"input_tokens": 5, "output_tokens": 1})
    assert response.status_code == 200
    assert Usage.objects.get(session=session).frame_id is None


def test_an_assistant_message_first_opens_a_turn(api, session):
    post(api, session, [assistant(text("Hello, how can I help?"))])
    (turn,) = turns(api, session)
    assert (turn["user_message"], turn["assistant_response"]) == ("", "Hello, how can I help?")


def test_it_lists_turns_after_an_index(api, session):
    post(api, session, [user(f"q{i}") for i in range(5)])
    assert [t["index"] for t in turns(api, session, after=2)] == [3, 4]
    assert [t["index"] for t in turns(api, session, limit=2)] == [0, 1]


def test_a_call_is_charged_to_the_frame_it_names(api, session):
    root = session.frames.get()
    child = frame_push(session=session, parent=root, goal="Deeper work", budget_total=100_000)
    usage = {"input_tokens": 700, "output_tokens": 50}
    body = {"messages": [user("Hi"), assistant(text("Hello"))], "usage": usage}
    # The child is the top of the stack; the call names the root, so the root pays.
    response = api.post(f"/sessions/{session.id}/messages", {**body, "frame_id": str(root.id)})
    assert response.status_code == 200, response.content
    root.refresh_from_db()
    child.refresh_from_db()
    assert (root.budget_used, child.budget_used) == (750, 0)
    assert Usage.objects.get(session=session).frame_id == root.id
    assert turns(api, session)[0]["occupancy_tokens"] == 750
    # Without frame_id the top of the stack pays, as before.
    assert api.post(f"/sessions/{session.id}/messages", body).status_code == 200
    child.refresh_from_db()
    assert child.budget_used == 750


def test_a_call_naming_a_frame_it_cannot_use_changes_nothing(api, make_session, session):
    elsewhere = make_session().frames.get()
    root = session.frames.get()
    closed = frame_push(session=session, parent=root, goal="Done", budget_total=1_000)
    frame_pop(frame=closed, status="completed")
    body = {"messages": [user("Hi")], "usage": {"input_tokens": 5, "output_tokens": 5}}
    for frame_id, status, error in (
        (elsewhere.id, 404, "not_found"),
        (closed.id, 409, "frame_not_active"),
        ("not-a-uuid", 422, "validation_error"),
    ):
        response = api.post(f"/sessions/{session.id}/messages", {**body, "frame_id": str(frame_id)})
        assert response.status_code == status, response.content
        assert response.json()["error"] == error
    assert not Usage.objects.filter(session=session).exists()
    assert turns(api, session) == []


def test_another_organization_gets_404(api, other_api, session):
    assert post(other_api, session, [user("x")]).status_code == 404
    response = other_api.get(f"/sessions/{session.id}/turns")
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert api.get("/sessions/not-a-uuid/turns").status_code == 404


@pytest.mark.parametrize(
    "body, loc",
    [
        ({"messages": []}, ["body", "messages"]),
        ({}, ["body", "messages"]),
        ({"messages": [{"role": "system", "content": "x"}]}, ["body", "messages", 0, "role"]),
        ({"messages": [{"role": "user", "content": 5}]}, ["body", "messages", 0, "content"]),
        (
            {"messages": [{"role": "user", "content": [{"text": "no type"}]}]},
            ["body", "messages", 0, "content", 0, "type"],
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "name": "Bash", "input": {}}],
                    }
                ]
            },
            ["body", "messages", 0, "content", 0, "id"],
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "x", "name": "Bash", "input": "ls"}],
                    }
                ]
            },
            ["body", "messages", 0, "content", 0, "input"],
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "x", "is_error": "yes"}],
                    }
                ]
            },
            ["body", "messages", 0, "content", 0, "is_error"],
        ),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "usage": {"input_tokens": -1, "output_tokens": 0},
            },
            ["body", "usage", "input_tokens"],
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "usage": {"output_tokens": 3}},
            ["body", "usage", "input_tokens"],
        ),
        (
            {"messages": [{"role": "user", "content": "nul \u0000 here"}]},
            ["body", "messages", 0, "content"],
        ),
    ],
)
def test_it_rejects_bad_messages_with_422(api, session, body, loc):
    response = api.post(f"/sessions/{session.id}/messages", body)
    assert response.status_code == 422, response.content
    payload = response.json()
    assert payload["error"] == "validation_error"
    assert any(e["loc"][: len(loc)] == loc for e in payload["errors"]), payload
    assert Message.objects.filter(session=session).count() == 0


def test_a_bad_message_late_in_a_request_writes_nothing(api, session):
    response = post(api, session, [user("fine"), {"role": "user", "content": [{"type": "text"}]}])
    assert response.status_code == 422
    assert turns(api, session) == []
    assert Session.objects.get(pk=session.pk).turns.count() == 0


def test_effective_token_calculation():
    """Seed 002's discount is a cost; the window holds every token, cached or not."""
    from frames.conversation.compaction import occupancy_over_threshold
    from frames.conversation.ingest import UsageFigures

    call = UsageFigures(
        input_tokens=1_000,
        output_tokens=500,
        cache_creation_input_tokens=2_000,
        cache_read_input_tokens=150_000,
    )
    assert call.seed_effective_tokens == pytest.approx(1_000 - 0.9 * 150_000)
    assert call.occupancy_tokens == 153_500

    class Window:
        compaction_threshold = 0.9
        context_window_tokens = 160_000

    assert occupancy_over_threshold(Window, call.occupancy_tokens) is True  # 153,500 > 144,000
    assert call.seed_effective_tokens < 0.9 * 160_000  # the seed's figure would never trigger
    assert occupancy_over_threshold(Window, None) is False


@pytest.mark.parametrize(
    "params, loc", [({"limit": 0}, ["query", "limit"]), ({"after": "x"}, ["query", "after"])]
)
def test_it_rejects_bad_turn_queries_with_422(api, session, params, loc):
    response = api.get(f"/sessions/{session.id}/turns", params)
    assert response.status_code == 422
    assert any(e["loc"][: len(loc)] == loc for e in response.json()["errors"])
