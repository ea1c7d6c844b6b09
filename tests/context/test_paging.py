"""Page-out through a real worker, page-in, attention, and the extractive summary."""

import pytest

from contextops.tokens import count_tokens
from frames.context.paging import (
    extractive_summary,
    handle_page_out_complete,
    handles_page_out_requeue,
)
from frames.context.tasks import handle_page_out
from frames.models import ContextHandle, Event
from tests.conftest import postgres_only
from tests.waiting import wait_until

LONG = " ".join(
    f"Sentence number {i} explains one more detail of the incident." for i in range(200)
)


def test_it_keeps_short_text_whole_and_cuts_long_text_to_first_and_last_sentences():
    assert extractive_summary("One. Two.") == "One. Two."
    summary = extractive_summary(LONG, max_tokens=60)
    assert count_tokens(summary) <= 60
    assert summary.startswith("Sentence number 0 ")
    assert "Sentence number 199 " in summary and " … " in summary
    assert extractive_summary("word " * 2000, max_tokens=30).endswith("…")
    assert count_tokens(extractive_summary("word " * 2000, max_tokens=30)) <= 30
    assert extractive_summary("") == ""


@pytest.mark.django_db(transaction=True)
def test_it_pages_out_through_a_real_worker(celery_worker, api, frame, make_handle):
    handle = make_handle(frame, LONG, tokens=count_tokens(LONG), state="hot", attention_weight=2)
    response = api.post(f"/handles/{handle.id}/page-out")
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    wait_until(lambda: ContextHandle.objects.get(pk=handle.pk).state == "indexed", what="page-out")
    handle.refresh_from_db()
    assert handle.summary.startswith("Sentence number 0 ")
    assert 0 < handle.summary_tokens == count_tokens(handle.summary) < handle.estimated_tokens
    event = Event.objects.get(session=frame.session, type="handle.paged_out")
    assert event.payload["from"] == "hot"


def test_it_pages_out_once_however_often_the_job_runs(frame, make_handle):
    handle = make_handle(frame, "First. Second. Third.", tokens=6)
    handle_page_out(str(handle.id))
    handle_page_out(str(handle.id))
    handle.refresh_from_db()
    assert handle.state == "indexed" and handle.summary == "First. Second. Third."
    assert Event.objects.filter(type="handle.paged_out").count() == 1
    assert handle_page_out_complete(handle_id=handle.id) is None


def test_it_refuses_to_page_out_what_is_not_active(
    api, frame, make_handle, django_capture_on_commit_callbacks
):
    for state in ("cold", "indexed", "offline"):
        handle = make_handle(frame, state=state)
        with django_capture_on_commit_callbacks() as callbacks:
            response = api.post(f"/handles/{handle.id}/page-out")
        assert response.status_code == 409
        assert response.json()["error"] == "illegal_transition"
        assert callbacks == []


def test_it_pages_in_the_summary_or_the_full_content(api, frame, make_handle):
    handle = make_handle(
        frame, "Full text here.", tokens=4, state="indexed", summary="Full.", summary_tokens=2
    )
    body = api.post(f"/handles/{handle.id}/page-in?mode=summary").json()
    assert (body["mode"], body["content"], body["tokens"], body["handle"]["state"]) == (
        "summary",
        "Full.",
        2,
        "loaded",
    )
    assert api.post(f"/handles/{handle.id}/page-in").status_code == 409  # already loaded
    cold = make_handle(frame, "Cold text.", tokens=3, state="cold")
    body = api.post(f"/handles/{cold.id}/page-in?mode=full").json()
    assert (body["mode"], body["content"], body["handle"]["state"]) == (
        "full",
        "Cold text.",
        "loaded",
    )
    assert api.post(f"/handles/{cold.id}/page-in?mode=everything").status_code == 422


def test_it_makes_a_handle_hot_above_attention_one_and_loaded_at_or_below(api, frame, make_handle):
    handle = make_handle(frame)
    assert api.post(f"/handles/{handle.id}/attention", {"weight": 1.5}).json()["state"] == "hot"
    assert api.post(f"/handles/{handle.id}/attention", {"weight": 1.0}).json()["state"] == "loaded"
    assert api.post(f"/handles/{handle.id}/attention", {"weight": 0.2}).json()["state"] == "loaded"
    indexed = make_handle(frame, state="indexed")
    body = api.post(f"/handles/{indexed.id}/attention", {"weight": 3}).json()
    assert (body["state"], body["attention_weight"]) == ("indexed", 3.0)
    assert api.post(f"/handles/{handle.id}/attention", {"weight": -1}).status_code == 422
    assert api.post(f"/handles/{handle.id}/attention", {"weight": 1000}).status_code == 422
    assert ContextHandle.objects.get(pk=handle.pk).attention_weight == 0.2


def test_it_hides_another_organizations_handles(other_api, frame, make_handle):
    handle = make_handle(frame)
    for path in ("page-out", "page-in", "attention"):
        assert other_api.post(f"/handles/{handle.id}/{path}", {"weight": 2}).status_code == 404


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_it_pages_out_once_when_jobs_race(frame, make_handle):
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection as default_connection

    handle = make_handle(frame, LONG, tokens=count_tokens(LONG))

    def run():
        try:
            return handle_page_out_complete(handle_id=handle.id)
        finally:
            default_connection.close()

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: run(), range(6)))
    assert sum(r is not None for r in results) == 1
    handle.refresh_from_db()
    assert handle.state == "indexed"
    assert Event.objects.filter(type="handle.paged_out").count() == 1


def test_page_out_uses_the_model_summarizer_when_one_is_set_up_and_falls_back_without_it(
    frame, make_handle, settings
):
    from frames.context.paging import handle_page_out_complete
    from tests.fakes.anthropic_server import AnthropicFakeServer, Reply

    text = "The vendor contract renews every March. Termination needs 90 days notice. " * 20
    with AnthropicFakeServer() as server:
        settings.CONTEXTOPS_SUMMARIZER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.CONTEXTOPS_SUMMARY_RETRY_DELAYS = [0, 0, 0]
        server.script(Reply.message("Renews in March; 90 days notice to terminate."))
        modelled = handle_page_out_complete(handle_id=make_handle(frame, content=text).pk)
        assert modelled.summary == "Renews in March; 90 days notice to terminate."
        server.script(Reply.status(500), Reply.status(500), Reply.status(500))
        fallback = handle_page_out_complete(handle_id=make_handle(frame, content=text).pk)
    assert fallback.state == "indexed"
    assert fallback.summary.startswith("The vendor contract renews every March.")


def test_a_page_out_whose_job_the_broker_lost_is_sent_again_by_the_sweep(api, frame, make_handle):
    """Redis can lose a job it was handed (as it restarts, or as a worker that took it
    dies): the handle keeps when its page-out was asked for until the job has run, and
    the sweep beat runs every minute sends the job again."""
    handle = make_handle(frame, "First. Second. Third.", tokens=6)
    assert api.post(f"/handles/{handle.id}/page-out").status_code == 202
    handle.refresh_from_db()
    assert handle.state == "loaded" and handle.page_out_requested_at is not None
    assert handles_page_out_requeue(older_than_seconds=60) == 0  # not overdue yet
    assert handles_page_out_requeue(older_than_seconds=0) == 1  # overdue: sent again

    handle_page_out(str(handle.id))  # what the worker does with it
    handle.refresh_from_db()
    assert handle.state == "indexed" and handle.page_out_requested_at is None
    assert handles_page_out_requeue(older_than_seconds=0) == 0
    assert Event.objects.filter(type="handle.paged_out").count() == 1


def test_a_page_out_that_finds_its_handle_moved_on_leaves_nothing_to_send_again(
    api, frame, make_handle
):
    handle = make_handle(frame, "First. Second. Third.", tokens=6)
    assert api.post(f"/handles/{handle.id}/page-out").status_code == 202
    ContextHandle.objects.filter(pk=handle.pk).update(state="cold")  # dropped meanwhile
    handle_page_out(str(handle.id))
    handle.refresh_from_db()
    assert handle.state == "cold" and handle.page_out_requested_at is None
    # Loaded again later, it is not paged out by a job nobody asked for any more.
    ContextHandle.objects.filter(pk=handle.pk).update(state="loaded")
    assert handles_page_out_requeue(older_than_seconds=0) == 0
