"""Compaction jobs retried with backoff when the summary provider fails every attempt.

The real anthropic SDK talks to the local Messages API server; the job runs eagerly
through ``task.apply``, which follows each retry at once (the countdowns are recorded).
"""

import pytest

from contextops.llm import CONTINUATION_MESSAGE, AnthropicSummarizer, ExtractiveSummarizer
from frames.conversation.compaction import (
    CompactionRetry,
    compaction_execute,
    compaction_retry_countdown,
    compactions_requeue,
)
from frames.conversation.models import CompactionRun, Summary, Turn
from frames.conversation.tasks import compaction_run
from frames.models import ContextHandle, Event
from tests.fakes.anthropic_server import AnthropicFakeServer, Reply

from .test_compaction import conversation


@pytest.fixture
def provider(settings):
    """The Anthropic summarizer pointed at a local server, with no waiting anywhere."""

    def start(server):
        settings.CONTEXTOPS_SUMMARIZER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.CONTEXTOPS_SUMMARY_RETRY_DELAYS = [0, 0, 0]
        settings.CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN = 0
        settings.CONTEXTOPS_COMPACTION_MAX_RETRIES = 3
        return server

    return start


@pytest.fixture
def queued(api, session, django_capture_on_commit_callbacks):
    def make(**body):
        with django_capture_on_commit_callbacks(execute=False):
            response = api.post(f"/sessions/{session.id}/compactions", body)
        assert response.status_code == 202, response.content
        return response.json()["id"]

    return make


def event_types(session, prefix=""):
    return list(
        Event.objects.filter(session=session, type__startswith=prefix)
        .order_by("seq")
        .values_list("type", flat=True)
    )


def test_a_job_whose_provider_fails_is_retried_and_completes_with_a_real_summary(
    api, session, queued, provider
):
    conversation(api, session, 5)
    with provider(AnthropicFakeServer()) as server:
        server.script(
            Reply.status(529),
            Reply.status(529),
            Reply.status(500),  # the first job's three attempts
            Reply.message("Parts 0 and 1 of the feature are done."),
        )
        run_id = queued()
        compaction_run.apply(args=[run_id])
    assert len(server.message_requests) == 4
    body = api.get(f"/compactions/{run_id}").json()
    assert (body["status"], body["retries"], body["attempts"], body["error"]) == (
        "completed",
        1,
        1,
        "",
    )
    assert body["summary"] == "Parts 0 and 1 of the feature are done."
    assert body["summary_failed"] is False and body["retry_at"] is None
    # Nothing doubled by the second job.
    assert Summary.objects.filter(session=session).count() == 1
    assert ContextHandle.objects.filter(session=session, kind="summary").count() == 1
    assert list(
        Turn.objects.filter(session=session, summarized=True).values_list("index", flat=True)
    ) == [0, 1]
    assert event_types(session, "compaction.") == [
        "compaction.queued",
        "compaction.retrying",
        "compaction.completed",
    ]
    assert event_types(session, "frame.compacted") == ["frame.compacted"]


def test_a_provider_that_always_fails_is_recorded_after_the_last_retry(
    api, session, queued, provider
):
    conversation(api, session, 5)
    with provider(AnthropicFakeServer(default=Reply.status(500))) as server:
        run_id = queued()
        compaction_run.apply(args=[run_id])
    assert len(server.message_requests) == 4 * 3  # the first job and three retries
    body = api.get(f"/compactions/{run_id}").json()
    assert (body["status"], body["retries"], body["attempts"]) == ("failed", 3, 3)
    assert body["summary"] == CONTINUATION_MESSAGE and body["summary_failed"] is True
    assert "InternalServerError" in body["error"] and "failed" in body["warning"]
    assert Summary.objects.filter(session=session).count() == 1
    assert event_types(session, "compaction.") == [
        "compaction.queued",
        "compaction.retrying",
        "compaction.retrying",
        "compaction.retrying",
        "compaction.failed",
    ]
    # The continuation message still stands in for the summarized turns.
    assert event_types(session, "frame.compacted") == ["frame.compacted"]


def test_the_countdown_grows_with_each_retry(api, session, queued, provider, settings):
    conversation(api, session, 5)
    with provider(AnthropicFakeServer(default=Reply.status(529))):
        settings.CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN = 30
        run_id = queued()
        compaction_run.apply(args=[run_id])  # eager: the countdowns are not waited for
    retrying = Event.objects.filter(session=session, type="compaction.retrying").order_by("seq")
    assert [e.payload["countdown_seconds"] for e in retrying] == [30, 60, 120]
    assert [e.payload["retry"] for e in retrying] == [1, 2, 3]
    assert compaction_retry_countdown(0) == 30
    assert CompactionRun.objects.get(pk=run_id).status == "failed"


def test_a_run_waiting_for_its_retry_can_be_taken_once(api, session, queued, settings):
    """The run goes back to the queue untouched; whichever delivery comes first finishes it."""
    conversation(api, session, 5)
    settings.CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN = 60
    run_id = queued()
    with AnthropicFakeServer(default=Reply.status(529)) as server:
        failing = AnthropicSummarizer(
            api_key="k", model="claude-test", base_url=server.base_url, sleep=lambda s: None
        )
        with pytest.raises(CompactionRetry) as raised:
            compaction_execute(run_id=run_id, summarizer=failing, retry_provider_errors=True)
    assert raised.value.countdown == 60
    run = CompactionRun.objects.get(pk=run_id)
    assert (run.status, run.retries, run.started_at) == ("queued", 1, None)
    assert "OverloadedError" in run.error or "529" in run.error
    assert not Summary.objects.filter(session=session).exists()
    assert not Turn.objects.filter(session=session, summarized=True).exists()
    # The sweep leaves it alone: its retry is not due yet.
    assert compactions_requeue(older_than_seconds=0) == 0
    # A redelivered message takes it first; the retry that comes later finds nothing.
    finished = compaction_execute(run_id=run_id, summarizer=ExtractiveSummarizer())
    assert finished.status == "completed" and finished.retries == 1
    compaction_run(run_id)
    assert Summary.objects.filter(session=session).count() == 1
    assert event_types(session, "compaction.completed") == ["compaction.completed"]


def test_no_retries_records_the_failure_at_once(api, session, queued, provider, settings):
    conversation(api, session, 5)
    with provider(AnthropicFakeServer(default=Reply.status(500))) as server:
        settings.CONTEXTOPS_COMPACTION_MAX_RETRIES = 0
        run_id = queued()
        compaction_run.apply(args=[run_id])
    assert len(server.message_requests) == 3
    run = CompactionRun.objects.get(pk=run_id)
    assert (run.status, run.retries) == ("failed", 0)
