"""Compaction runs: the API, the service the job calls, idempotency, the summary handle, revert."""

import pytest

from contextops.errors import Conflict
from contextops.llm import CONTINUATION_MESSAGE, AnthropicSummarizer, ExtractiveSummarizer
from frames.conversation.compaction import compaction_execute, compaction_request
from frames.conversation.models import CompactionRun, Summary, Turn
from frames.conversation.tasks import compaction_run
from frames.models import ContextHandle, Event
from tests.fakes.anthropic_server import AnthropicFakeServer, Reply

from .conftest import assistant, text, tool_use, user


def conversation(api, session, count, anchors=(), errors=()):
    """``count`` turns; the turns at ``anchors`` edit a file and see the tests pass, the
    turns at ``errors`` run a build that fails."""
    for i in range(count):
        messages = [
            user(f"Step {i}: please work on part {i} of the feature " + "with some detail " * 20)
        ]
        if i in errors:
            messages += [
                assistant(tool_use(f"b{i}", "Bash", command="make")),
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"b{i}",
                            "content": f"make: *** [part{i}] Error 2",
                            "is_error": True,
                        }
                    ],
                },
            ]
        if i in anchors:
            messages += [
                assistant(
                    tool_use(f"e{i}", "Edit", file_path=f"part{i}.py"),
                    tool_use(f"t{i}", "Bash", command="pytest"),
                ),
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"e{i}", "content": "edited"},
                        {"type": "tool_result", "tool_use_id": f"t{i}", "content": "12 tests pass"},
                    ],
                },
            ]
        messages.append(assistant(text(f"Done with part {i}. " + "Explanation. " * 30)))
        response = api.post(f"/sessions/{session.id}/messages", {"messages": messages})
        assert response.status_code == 200, response.content


@pytest.fixture
def queued(api, session, django_capture_on_commit_callbacks):
    def make(**body):
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            response = api.post(f"/sessions/{session.id}/compactions", body)
        assert response.status_code == 202, response.content
        assert len(callbacks) == 1
        return response.json()["id"]

    return make


def test_it_answers_202_and_queues_after_commit(api, session, queued):
    conversation(api, session, 2)
    run_id = queued()
    body = api.get(f"/compactions/{run_id}").json()
    assert body["status"] == "queued" and body["strategy"] == "anchor_point"
    for key in (
        "id",
        "status",
        "strategy",
        "level",
        "original_tokens",
        "final_tokens",
        "items_removed",
        "items_summarized",
        "compression_ratio",
        "summary",
        "warning",
    ):
        assert key in body


def test_anchor_point_compaction_summarizes_before_the_latest_older_anchor(api, session, queued):
    conversation(api, session, 10, anchors={2, 5, 8})
    before = {t.index: t.tokens for t in Turn.objects.filter(session=session)}
    run_id = queued()
    run = compaction_execute(run_id=run_id, summarizer=ExtractiveSummarizer())
    assert run.status == "completed"
    body = api.get(f"/compactions/{run_id}").json()
    assert body["items_summarized"] == 5 and body["items_removed"] == 0
    assert body["original_tokens"] == sum(before.values())
    summary = Summary.objects.get(pk=body["summary_id"])
    assert body["final_tokens"] == sum(before[i] for i in range(5, 10)) + summary.tokens
    assert body["compression_ratio"] == pytest.approx(
        1 - body["final_tokens"] / body["original_tokens"], abs=1e-4
    )
    assert body["level"] in ("moderate", "light", "aggressive")
    assert body["summary"].startswith("Summary of turns 0–4")
    listed = api.get(f"/sessions/{session.id}/turns").json()
    assert [t["summarized"] for t in listed] == [True] * 5 + [False] * 5
    assert {t["summary_id"] for t in listed[:5]} == {body["summary_id"]}
    assert Turn.objects.filter(session=session).count() == 10  # never deleted
    handle = ContextHandle.objects.get(session=session, kind="summary")
    assert handle.content == body["summary"] and str(summary.handle_id) == str(handle.pk)
    assert body["warning"] is not None and "below 60%" in body["warning"]  # 50 % of the turns only


@pytest.mark.parametrize("window, large", [(200_000, False), (2_000, True)])
def test_it_calls_the_window_still_large_only_when_it_is(api, make_session, window, large):
    session = make_session(context_window_tokens=window)
    conversation(api, session, 10)
    run = compaction_request(session=session, strategy="summarize_oldest", keep_turns=8)
    run = compaction_execute(run_id=run.pk, summarizer=ExtractiveSummarizer())
    assert run.compression_ratio < 0.6 and "below 60%" in run.warning
    # Some 1,300 tokens left: a sliver of a 200,000-token window, most of a 2,000-token one.
    assert 1_000 < run.final_tokens < 1_600
    assert ("still large" in run.warning) is large
    assert ("consider starting a fresh conversation" in run.warning) is large


def test_a_second_delivery_does_nothing(api, session, queued):
    conversation(api, session, 6)
    run_id = queued()
    compaction_run(run_id)  # the task function itself
    first = CompactionRun.objects.get(pk=run_id)
    assert first.status == "completed" and first.items_summarized == 3
    assert compaction_execute(run_id=run_id, summarizer=ExtractiveSummarizer()) is None
    compaction_run(run_id)
    assert Summary.objects.filter(session=session).count() == 1
    assert ContextHandle.objects.filter(session=session, kind="summary").count() == 1
    assert CompactionRun.objects.get(pk=run_id).finished_at == first.finished_at


def test_a_second_compaction_folds_the_first_summary_in(api, session, queued):
    conversation(api, session, 6)
    compaction_execute(run_id=queued(), summarizer=ExtractiveSummarizer())
    conversation(api, session, 4)
    run = compaction_execute(run_id=queued(), summarizer=ExtractiveSummarizer())
    assert run.items_summarized == 4  # turns 3..6 of the 7 still in the window
    assert set(
        Turn.objects.filter(session=session, summarized=True).values_list("summary", flat=True)
    ) == {run.summary_id}
    first = Summary.objects.exclude(pk=run.summary_id).get()
    assert run.original_tokens == first.tokens + sum(
        t.tokens for t in Turn.objects.filter(session=session, index__gte=3)
    )


def test_it_uses_the_anthropic_summary_through_the_real_sdk(api, session, queued):
    conversation(api, session, 5)
    with AnthropicFakeServer() as server:
        server.script(Reply.status(529), Reply.message("We built parts 0 and 1 of the feature."))
        summarizer = AnthropicSummarizer(
            api_key="k", model="claude-test", base_url=server.base_url, sleep=lambda s: None
        )
        run = compaction_execute(run_id=queued(), summarizer=summarizer)
    assert (run.status, run.attempts, run.summarizer) == ("completed", 2, "anthropic")
    assert run.summary.content == "We built parts 0 and 1 of the feature."
    assert "Step 0" in server.message_requests[-1].body["messages"][0]["content"]


def test_a_summary_that_fails_every_attempt_is_recorded_as_a_failure(api, session, queued):
    conversation(api, session, 5)
    with AnthropicFakeServer(default=Reply.status(500)) as server:
        summarizer = AnthropicSummarizer(
            api_key="k", model="claude-test", base_url=server.base_url, sleep=lambda s: None
        )
        run_id = queued()
        compaction_execute(run_id=run_id, summarizer=summarizer)
    body = api.get(f"/compactions/{run_id}").json()
    assert body["status"] == "failed" and body["attempts"] == 3
    assert body["summary"] == CONTINUATION_MESSAGE and body["summary_failed"] is True
    assert "InternalServerError" in body["error"]
    assert "failed" in body["warning"]


def test_summarize_oldest_and_truncate_at(api, session, queued):
    conversation(api, session, 8)
    run = compaction_execute(
        run_id=queued(strategy="summarize_oldest", keep_turns=6), summarizer=ExtractiveSummarizer()
    )
    assert (run.strategy, run.items_summarized, run.items_removed) == ("summarize_oldest", 2, 0)
    run = compaction_execute(
        run_id=queued(strategy="truncate_at", keep_turns=2), summarizer=ExtractiveSummarizer()
    )
    assert (run.items_summarized, run.items_removed) == (0, 4)
    assert Turn.objects.filter(session=session, truncated=True).count() == 4
    assert run.final_tokens < run.original_tokens


def test_priority_based_keeps_anchors_and_errors_and_summarizes_plain_turns_first(
    api, session, queued
):
    # Turn 2 is an anchor, turn 5 has a failed build; 7, 8 and 9 are the recent turns.
    conversation(api, session, 10, anchors={2}, errors={5})
    tokens = {t.index: t.tokens for t in Turn.objects.filter(session=session)}
    plain = [0, 1, 3, 4, 6]
    target = sum(tokens.values()) - sum(tokens[i] for i in plain)  # room for 2, 5 and 7..9
    run_id = queued(strategy="priority_based", target_tokens=target)
    run = compaction_execute(run_id=run_id, summarizer=ExtractiveSummarizer())
    body = api.get(f"/compactions/{run_id}").json()
    assert (body["status"], body["strategy"], body["items_summarized"]) == (
        "completed",
        "priority_based",
        5,
    )
    assert body["preserved_anchor_index"] == 2
    listed = api.get(f"/sessions/{session.id}/turns").json()
    assert [t["index"] for t in listed if t["summarized"]] == plain
    assert [t["index"] for t in listed if not t["summarized"]] == [2, 5, 7, 8, 9]
    assert body["summary"].startswith("Summary of turns 0–6 (5 turns)")
    assert body["final_tokens"] == target + run.summary.tokens
    assert Turn.objects.filter(session=session).count() == 10  # never deleted


def test_priority_based_summarizes_the_error_turn_before_the_anchor(api, session, queued):
    conversation(api, session, 10, anchors={2}, errors={5})
    tokens = {t.index: t.tokens for t in Turn.objects.filter(session=session)}
    # Room for the anchor and the recent turns only: every plain turn and the error go.
    target = tokens[2] + tokens[7] + tokens[8] + tokens[9]
    run = compaction_execute(
        run_id=queued(strategy="priority_based", target_tokens=target),
        summarizer=ExtractiveSummarizer(),
    )
    summarized = Turn.objects.filter(session=session, summarized=True)
    assert sorted(summarized.values_list("index", flat=True)) == [0, 1, 3, 4, 5, 6]
    assert run.preserved_anchor_index == 2
    # Tighter than the recent turns alone: the anchor goes too, the last three never do.
    conversation(api, session, 1)
    run = compaction_execute(
        run_id=queued(strategy="priority_based", target_tokens=1),
        summarizer=ExtractiveSummarizer(),
    )
    assert list(
        Turn.objects.filter(session=session, summarized=False).values_list("index", flat=True)
    ) == [8, 9, 10]
    assert run.preserved_anchor_index is None


def test_priority_based_without_a_target_aims_at_the_quality_bar(api, session, queued):
    conversation(api, session, 12, anchors={2})
    run = compaction_execute(
        run_id=queued(strategy="priority_based"), summarizer=ExtractiveSummarizer()
    )
    in_window = Turn.objects.filter(session=session, summarized=False)
    kept = sum(in_window.values_list("tokens", flat=True))
    assert kept <= 0.4 * run.original_tokens
    assert 2 in in_window.values_list("index", flat=True)  # the anchor stays


def test_a_completed_run_appends_frame_compacted_for_the_top_frame(api, session, queued):
    conversation(api, session, 6)
    run = compaction_execute(run_id=queued(), summarizer=ExtractiveSummarizer())
    frame = session.frames.get()
    events = list(Event.objects.filter(session=session).order_by("seq"))
    compacted = [e for e in events if e.type == "frame.compacted"]
    assert len(compacted) == 1
    event = compacted[0]
    assert event.frame_id == frame.pk and event.actor == "worker"
    handle = ContextHandle.objects.get(session=session, kind="summary")
    assert event.payload == {
        "compaction_id": str(run.pk),
        "strategy": "anchor_point",
        "compaction_level": run.level,
        "original_tokens": run.original_tokens,
        "final_tokens": run.final_tokens,
        "items_removed": 0,
        "items_summarized": 3,
        "summary_id": str(run.summary_id),
        "handle_id": str(handle.pk),
    }
    # Written with the run: the handle, the frame event and the run's own event in a row.
    tail = [e.type for e in events[-3:]]
    assert tail == ["frame.handle_added", "frame.compacted", "compaction.completed"]
    assert compaction_execute(run_id=run.pk, summarizer=ExtractiveSummarizer()) is None
    assert Event.objects.filter(session=session, type="frame.compacted").count() == 1


def test_a_truncation_appends_frame_compacted_and_a_no_op_does_not(api, session, queued):
    conversation(api, session, 3)
    compaction_execute(run_id=queued(), summarizer=ExtractiveSummarizer())  # nothing to do
    assert not Event.objects.filter(session=session, type="frame.compacted").exists()
    conversation(api, session, 2)
    run = compaction_execute(
        run_id=queued(strategy="truncate_at", keep_turns=1), summarizer=ExtractiveSummarizer()
    )
    event = Event.objects.get(session=session, type="frame.compacted")
    assert event.payload["items_removed"] == 4 and event.payload["summary_id"] is None
    assert event.payload["compaction_id"] == str(run.pk)


def test_nothing_to_summarize_completes_with_level_none(api, session, queued):
    conversation(api, session, 3)
    run = compaction_execute(run_id=queued(), summarizer=ExtractiveSummarizer())
    assert (run.status, run.level, run.items_summarized, run.compression_ratio) == (
        "completed",
        "none",
        0,
        0.0,
    )
    assert run.original_tokens == run.final_tokens


def test_a_run_can_be_reverted(api, session, queued):
    conversation(api, session, 6)
    run_id = queued()
    compaction_execute(run_id=run_id, summarizer=ExtractiveSummarizer())
    response = api.post(f"/compactions/{run_id}/revert")
    assert response.status_code == 200 and response.json()["status"] == "reverted"
    assert not Turn.objects.filter(session=session, summarized=True).exists()
    assert Summary.objects.filter(session=session).count() == 1  # kept, no longer in use
    again = api.post(f"/compactions/{run_id}/revert")
    assert again.status_code == 409 and again.json()["error"] == "compaction_not_revertible"


def test_only_one_compaction_at_a_time(api, session, queued):
    conversation(api, session, 2)
    run_id = queued()
    response = api.post(f"/sessions/{session.id}/compactions", {})
    assert response.status_code == 409
    assert response.json() | {"detail": ""} == {
        "error": "compaction_in_progress",
        "detail": "",
        "compaction_id": run_id,
    }


def test_a_session_without_turns_has_nothing_to_compact(
    api, session, django_capture_on_commit_callbacks
):
    seq = Event.objects.filter(session=session).count()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post(f"/sessions/{session.id}/compactions", {})
    assert response.status_code == 409, response.content
    assert response.json() == {
        "error": "nothing_to_compact",
        "detail": "This session has no turns yet: there is nothing to compact.",
    }
    # Nothing queued, nothing logged, no job sent.
    assert not CompactionRun.objects.filter(session=session).exists()
    assert Event.objects.filter(session=session).count() == seq
    assert callbacks == []
    # The service the dashboard calls refuses it too.
    with pytest.raises(Conflict) as refused:
        compaction_request(session=session, strategy="truncate_at", keep_turns=0)
    assert refused.value.code == "nothing_to_compact"
    assert not CompactionRun.objects.filter(session=session).exists()


def test_a_session_whose_turns_are_all_out_of_the_window_has_nothing_to_compact(
    api, session, queued
):
    conversation(api, session, 4)
    compaction_execute(
        run_id=queued(strategy="truncate_at", keep_turns=0), summarizer=ExtractiveSummarizer()
    )
    assert not Turn.objects.filter(session=session, truncated=False).exists()
    response = api.post(f"/sessions/{session.id}/compactions", {})
    assert response.status_code == 409 and response.json() == {
        "error": "nothing_to_compact",
        "detail": "Every turn of this session is out of the window already: there is nothing to compact.",
    }
    assert CompactionRun.objects.filter(session=session).count() == 1


def test_an_ended_session_takes_no_compaction_and_nothing_changes(
    api, session, django_capture_on_commit_callbacks
):
    conversation(api, session, 6)
    assert api.post(f"/sessions/{session.id}/end").status_code == 200
    seq = Event.objects.filter(session=session).count()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post(f"/sessions/{session.id}/compactions", {})
    assert response.status_code == 409 and response.json()["error"] == "session_ended"
    assert not CompactionRun.objects.filter(session=session).exists()
    assert not Turn.objects.filter(session=session, summarized=True).exists()
    assert Event.objects.filter(session=session).count() == seq
    assert callbacks == []


@pytest.mark.parametrize(
    "body, loc",
    [
        ({"strategy": "magic"}, ["body", "strategy"]),
        ({"target_tokens": 0}, ["body", "target_tokens"]),
        ({"keep_turns": -1}, ["body", "keep_turns"]),
        ({"strategy": "truncate_at"}, ["body", "keep_turns"]),
        ({"strategy": "priority_based", "target_tokens": -5}, ["body", "target_tokens"]),
    ],
)
def test_it_rejects_bad_compaction_requests(api, session, body, loc):
    response = api.post(f"/sessions/{session.id}/compactions", body)
    assert response.status_code == 422, response.content
    assert any(e["loc"][: len(loc)] == loc for e in response.json()["errors"])
    assert not CompactionRun.objects.exists()


def test_another_organization_gets_404(api, other_api, session, queued):
    conversation(api, session, 2)
    run_id = queued()
    assert other_api.post(f"/sessions/{session.id}/compactions", {}).status_code == 404
    assert other_api.get(f"/compactions/{run_id}").status_code == 404
    assert other_api.post(f"/compactions/{run_id}/revert").status_code == 404
    assert api.get("/compactions/nope").status_code == 404
