"""POST /frames/{id}/compact: the seed 000 §5.4 strategies over a frame's handles, the
registry of custom strategies, and what compaction never does (drop critical content,
delete anything)."""

import pytest
from django.core.management import call_command

from frames.models import ContextHandle, Event

STRATEGIES = {
    "tool_output_first": "tests.context.strategies.tool_output_first",
    "everything": "tests.context.strategies.everything",
    "broken": "tests.context.strategies.broken",
}


def sentences(label, count):
    return " ".join(f"{label} sentence {i} tells one more detail." for i in range(count))


@pytest.fixture
def frame_id(api, start_session, push_ok):
    session = start_session()
    return push_ok(session["id"], 100_000)["id"]


@pytest.fixture
def add(api, frame_id):
    def add(priority="medium", content=None, kind="document", **body):
        body = {"kind": kind, "priority": priority, "content": content or sentences(kind, 40)}
        response = api.post(f"/frames/{frame_id}/handles", body)
        assert response.status_code == 201, response.content
        return response.json()

    return add


def compact(api, frame_id, **body):
    return api.post(f"/frames/{frame_id}/compact", body)


def state(handle):
    return ContextHandle.objects.get(pk=handle["id"]).state


def test_it_drops_the_lowest_priority_first_and_never_critical_content(api, frame_id, add):
    system = add("critical", kind="system_prompt")
    background = add("background")
    low = add("low")
    high = add("high")
    total = sum(h["estimated_tokens"] for h in (system, background, low, high))
    target = total - background["estimated_tokens"] - 1

    response = compact(api, frame_id, target_tokens=target, strategy="priority_based")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["original_tokens"] == total
    assert body["final_tokens"] == total - background["estimated_tokens"] - low["estimated_tokens"]
    assert (body["items_removed"], body["items_summarized"]) == (2, 0)
    assert body["removed"] == [background["id"], low["id"]]
    assert body["compaction_level"] == "moderate"
    assert [state(h) for h in (system, background, low, high)] == [
        "loaded",
        "indexed",
        "indexed",
        "loaded",
    ]

    # Even a target of zero leaves the critical prompt in the window.
    body = compact(api, frame_id, target_tokens=0, strategy="priority_based").json()
    assert body["final_tokens"] == system["estimated_tokens"]
    assert state(system) == "loaded" and state(high) == "indexed"


def test_removed_handles_leave_the_pack_and_come_back_whole(api, frame_id, add):
    keep = add("critical", kind="system_prompt")
    gone = add("low", content=sentences("Appendix", 40))
    compact(api, frame_id, target_tokens=keep["estimated_tokens"], strategy="priority_based")

    session_id = api.get(f"/frames/{frame_id}").json()["session_id"]
    pack = api.post(f"/sessions/{session_id}/context-pack", {"budget_tokens": 20_000}).json()
    assert [s["handle_id"] for s in pack["segments"]] == [keep["id"]]

    page = api.post(f"/handles/{gone['id']}/page-in?mode=full").json()
    assert page["content"] == sentences("Appendix", 40)
    assert page["handle"]["state"] == "loaded"


def test_summarize_oldest_pages_out_older_handles_with_a_summary(api, frame_id, add):
    old = [add("medium", content=sentences(f"Old{i}", 60)) for i in range(3)]
    recent = add("medium", content=sentences("Recent", 60))
    total = sum(h["estimated_tokens"] for h in (*old, recent))

    body = compact(
        api, frame_id, target_tokens=total // 2, strategy="summarize_oldest", message_count=1
    ).json()
    assert body["items_summarized"] >= 2 and body["items_removed"] == 0
    assert body["summarized"] == [h["id"] for h in old][: body["items_summarized"]]
    assert body["final_tokens"] <= total // 2 < body["original_tokens"] == total
    summarized = ContextHandle.objects.get(pk=old[0]["id"])
    assert summarized.state == "indexed"
    assert summarized.summary.startswith("Old0 sentence 0")
    assert summarized.content == sentences("Old0", 60)  # nothing deleted
    assert state(recent) == "loaded"


def test_truncate_at_keeps_the_newest_handles(api, frame_id, add):
    handles = [add("medium") for _ in range(4)]
    body = compact(api, frame_id, target_tokens=0, strategy="truncate_at", message_count=1).json()
    assert body["removed"] == [h["id"] for h in handles[:3]]
    assert [state(h) for h in handles] == ["indexed"] * 3 + ["loaded"]

    response = compact(api, frame_id, target_tokens=0, strategy="truncate_at")
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "message_count"]


def test_a_window_within_target_is_left_alone(api, frame_id, add):
    handle = add("low")
    body = compact(api, frame_id, target_tokens=10_000, strategy="priority_based").json()
    assert body["compaction_level"] == "none"
    assert body["original_tokens"] == body["final_tokens"] == handle["estimated_tokens"]
    assert state(handle) == "loaded"


def test_it_appends_frame_compacted_and_the_projections_still_agree(api, frame_id, add, capsys):
    add("low")
    body = compact(api, frame_id, target_tokens=0, strategy="priority_based").json()
    event = Event.objects.get(type="frame.compacted", frame_id=frame_id)
    assert event.payload["removed"] == body["removed"]
    assert event.payload["final_tokens"] == body["final_tokens"] == 0
    call_command("rebuild_projections", "--verify")
    assert "match the event log" in capsys.readouterr().out


def test_an_unknown_strategy_answers_422_listing_the_available_ones(
    api, frame_id, add, start_session, settings
):
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = STRATEGIES
    handle = add("low")
    response = compact(api, frame_id, target_tokens=0, strategy="magic")
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "validation_error"
    assert body["available"] == [
        "priority_based",
        "summarize_oldest",
        "truncate_at",
        "tool_output_first",
        "everything",
        "broken",
    ]
    assert body["errors"][0]["loc"] == ["body", "strategy"]
    assert state(handle) == "loaded"
    assert not Event.objects.filter(type="frame.compacted").exists()

    session = start_session()
    response = api.post(f"/sessions/{session['id']}/compactions", {"strategy": "magic"})
    assert response.status_code == 422
    assert response.json()["available"] == [
        "anchor_point",
        "priority_based",
        "summarize_oldest",
        "truncate_at",
        "tool_output_first",
        "everything",
        "broken",
    ]


def test_a_registered_strategy_compacts_a_frame(api, frame_id, add, settings):
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = STRATEGIES
    doc = add("low")
    call = add("medium", kind="tool_call")
    result = add("medium", kind="tool_result")
    body = compact(
        api, frame_id, target_tokens=doc["estimated_tokens"], strategy="tool_output_first"
    ).json()
    assert body["strategy"] == "tool_output_first"
    assert body["removed"] == [call["id"], result["id"]]
    assert state(doc) == "loaded"


def test_no_strategy_can_take_critical_content_out(api, frame_id, add, settings):
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = STRATEGIES
    system = add("critical", kind="system_prompt")
    other = add("low")
    body = compact(api, frame_id, target_tokens=0, strategy="everything").json()
    assert body["removed"] == [other["id"]]
    assert state(system) == "loaded"


def test_a_failing_strategy_changes_nothing(api, frame_id, add, settings):
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = STRATEGIES
    handle = add("low")
    response = compact(api, frame_id, target_tokens=0, strategy="broken")
    assert response.status_code == 409
    assert response.json()["error"] == "strategy_failed"
    assert state(handle) == "loaded"


def test_a_strategy_path_that_does_not_import_is_not_offered(api, frame_id, settings):
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = {"typo": "tests.context.strategies.nope"}
    response = compact(api, frame_id, target_tokens=0, strategy="typo")
    assert response.status_code == 422
    assert "typo" not in response.json()["available"]


@pytest.mark.parametrize(
    "body, loc",
    [
        ({"strategy": "priority_based"}, ["body", "target_tokens"]),
        ({"target_tokens": -1, "strategy": "priority_based"}, ["body", "target_tokens"]),
        ({"target_tokens": 1}, ["body", "strategy"]),
        ({"target_tokens": 1, "strategy": "truncate_at", "message_count": -1}, ["body"]),
        ({"target_tokens": 1, "strategy": "priority_based", "level": "x"}, ["body"]),
    ],
)
def test_it_rejects_bad_bodies(api, frame_id, add, body, loc):
    handle = add("low")
    response = compact(api, frame_id, **body)
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"][: len(loc)] == loc
    assert state(handle) == "loaded"


def test_another_organization_gets_404_and_a_closed_frame_409(api, other_api, frame_id, add):
    handle = add("low")
    body = {"target_tokens": 0, "strategy": "priority_based"}
    assert other_api.post(f"/frames/{frame_id}/compact", body).status_code == 404
    assert state(handle) == "loaded"
    api.post(f"/frames/{frame_id}/pop", {"status": "completed"})
    response = api.post(f"/frames/{frame_id}/compact", body)
    assert response.status_code == 409 and response.json()["error"] == "frame_not_active"


def test_the_openapi_schema_lists_the_strategies_registered_now(api, settings):
    def strategy_enum(schema_name):
        schemas = api.client.get("/api/v1/openapi.json").json()["components"]["schemas"]
        return schemas[schema_name]["properties"]["strategy"]["enum"]

    assert strategy_enum("FrameCompactIn") == ["priority_based", "summarize_oldest", "truncate_at"]
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = {
        "tool_output_first": STRATEGIES["tool_output_first"]
    }
    assert strategy_enum("FrameCompactIn")[-1] == "tool_output_first"
    assert strategy_enum("CompactionIn")[-1] == "tool_output_first"
