"""End to end on a real Celery worker: threshold crossed, job queued after commit, run, recorded, shown."""

import pytest

from frames.conversation.models import CompactionRun, Turn
from frames.models import ContextHandle
from tests.fakes.anthropic_server import AnthropicFakeServer, Reply
from tests.waiting import wait_until

from .test_compaction import conversation


def wait_for(predicate, timeout=30.0):
    return wait_until(predicate, timeout=timeout, what="the worker")


@pytest.mark.django_db(transaction=True)
def test_it_compacts_on_a_real_worker_when_the_threshold_is_crossed(
    celery_worker, api, make_session, member_client, settings
):
    session = make_session(context_window_tokens=50_000)
    conversation(api, session, 8, anchors={3})
    with AnthropicFakeServer() as server:
        server.script(
            Reply.status(529), Reply.message("Parts 0 to 2 are built; part 3 passed its tests.")
        )
        settings.CONTEXTOPS_SUMMARIZER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.CONTEXTOPS_SUMMARY_RETRY_DELAYS = [0, 0.01, 0.02]
        usage = {"input_tokens": 2_000, "output_tokens": 500, "cache_read_input_tokens": 43_000}
        response = api.post(
            f"/sessions/{session.id}/messages",
            {"messages": [{"role": "user", "content": "Keep going"}], "usage": usage},
        )
        assert response.status_code == 200
        run_id = response.json()["compaction_id"]
        assert run_id is not None
        run = wait_for(lambda: CompactionRun.objects.filter(pk=run_id, status="completed").first())
    assert (run.trigger, run.attempts, run.summarizer, run.items_summarized) == (
        "threshold",
        2,
        "anthropic",
        3,
    )
    assert run.preserved_anchor_index == 3
    assert list(
        Turn.objects.filter(session=session, summarized=True).values_list("index", flat=True)
    ) == [0, 1, 2]
    assert (
        ContextHandle.objects.get(session=session, kind="summary").content
        == "Parts 0 to 2 are built; part 3 passed its tests."
    )
    body = api.get(f"/compactions/{run_id}").json()
    assert body["status"] == "completed" and body["summary"].startswith("Parts 0 to 2")
    html = member_client.get(f"/sessions/{session.id}/turns/").content.decode()
    assert "Parts 0 to 2 are built" in html and "3 turns folded" in html and "threshold" in html


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_retries_a_job_whose_provider_failed(
    celery_worker, api, make_session, settings
):
    session = make_session()
    conversation(api, session, 5)
    with AnthropicFakeServer() as server:
        server.script(
            Reply.status(529),
            Reply.status(529),
            Reply.status(529),  # every attempt of the first job
            Reply.message("Parts 0 and 1 are built."),
        )
        settings.CONTEXTOPS_SUMMARIZER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.CONTEXTOPS_SUMMARY_RETRY_DELAYS = [0, 0, 0]
        settings.CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN = 0
        response = api.post(f"/sessions/{session.id}/compactions", {})
        assert response.status_code == 202
        run_id = response.json()["id"]
        run = wait_for(lambda: CompactionRun.objects.filter(pk=run_id, status="completed").first())
    assert (run.retries, run.attempts, run.items_summarized) == (1, 1, 2)
    assert run.summary.content == "Parts 0 and 1 are built."
    assert len(server.message_requests) == 4
    assert ContextHandle.objects.filter(session=session, kind="summary").count() == 1
