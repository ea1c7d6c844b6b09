"""The conversation tab: turns with anchors, folded summaries, compaction runs, the start button."""

import pytest
from django.test import Client
from django.utils import timezone

from contextops.llm import ExtractiveSummarizer
from contextops.models import AuditEntry
from frames.context.lifecycle import session_end
from frames.conversation.compaction import compaction_execute
from frames.conversation.models import CompactionRun, Turn
from frames.models import Session

from .test_compaction import conversation


@pytest.fixture
def page(session):
    return f"/sessions/{session.id}/turns/"


def test_it_shows_turns_anchors_and_the_chart(api, session, member_client, page):
    conversation(api, session, 5, anchors={1})
    api.post(
        f"/sessions/{session.id}/messages",
        {
            "messages": [{"role": "user", "content": "more"}],
            "usage": {"input_tokens": 5000, "output_tokens": 10},
        },
    )
    response = member_client.get(page)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Step 0: please work on part 0" in html
    assert "anchor: task-completion (0.8)" in html
    assert 'class="conv-occupancy"' in html and "conv-threshold" in html
    assert "No compactions yet." in html


def test_the_chart_names_only_turns_that_exist(api, session, member_client, page):
    url = f"/sessions/{session.id}/messages"
    api.post(url, {"messages": [{"role": "user", "content": "first, no call reported"}]})
    usage = {"input_tokens": 5000, "output_tokens": 10}
    api.post(url, {"messages": [{"role": "user", "content": "second"}], "usage": usage})
    html = member_client.get(page).content.decode()
    assert "<strong>#0</strong>" in html and "<strong>#1</strong>" in html
    chart = html.split('class="conv-chart"')[1].split("</svg>")[0]
    assert chart.count(">turn 1</text>") == 1 and "turn 2" not in chart
    assert "turn 1: 5,010 tokens" in chart


def test_it_folds_summarized_turns_under_their_summary(
    api, session, member_client, page, django_capture_on_commit_callbacks
):
    conversation(api, session, 6)
    with django_capture_on_commit_callbacks(execute=False):
        run_id = api.post(f"/sessions/{session.id}/compactions", {}).json()["id"]
    compaction_execute(run_id=run_id, summarizer=ExtractiveSummarizer())
    html = member_client.get(page).content.decode()
    assert "<strong>Summary</strong> of turns 0–2" in html
    assert "3 turns folded" in html
    assert "completed" in html


def test_an_htmx_request_gets_only_the_timeline(api, session, member_client, page):
    conversation(api, session, 1)
    html = member_client.get(page, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="conv-timeline"' in html and "<html" not in html


def test_the_button_queues_a_compaction_and_returns_the_runs(
    api, session, member_client, django_capture_on_commit_callbacks
):
    conversation(api, session, 2)
    url = f"/sessions/{session.id}/turns/compactions/start/"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = member_client.post(url, {"strategy": "anchor_point"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and len(callbacks) == 1
    html = response.content.decode()
    assert 'id="conv-runs"' in html and "queued" in html and 'hx-trigger="every 2s"' in html
    assert "<html" not in html
    again = member_client.post(url, {"strategy": "anchor_point"}, HTTP_HX_REQUEST="true")
    assert again.status_code == 422 and "already queued or running" in again.content.decode()
    assert CompactionRun.objects.filter(session=session).count() == 1
    plain = Client()
    plain.force_login(response.wsgi_request.user)
    assert plain.post(url, {"strategy": "magic"}).status_code == 422


def test_compact_now_is_audited_for_its_organization_only(
    api, session, member_client, audit_page, django_capture_on_commit_callbacks
):
    conversation(api, session, 2)
    url = f"/sessions/{session.id}/turns/compactions/start/"
    with django_capture_on_commit_callbacks(execute=False):
        response = member_client.post(url, {"strategy": "truncate_at", "keep_turns": "1"})
    assert response.status_code == 302
    run = CompactionRun.objects.get(session=session)
    entry = AuditEntry.objects.get(action=AuditEntry.Action.COMPACTION_REQUESTED)
    assert (entry.user.username, entry.actor) == ("ada", "ada")
    assert entry.organization_id == session.organization_id
    assert entry.target == f"session {session.id}"
    assert entry.detail == {
        "run_id": str(run.pk),
        "strategy": "truncate_at",
        "keep_turns": 1,
        "target_tokens": None,
    }
    assert f"<td>session {session.id}</td>" in audit_page("Acme")
    assert f"<td>session {session.id}</td>" not in audit_page("Globex")


def test_the_button_offers_priority_based_with_a_target(
    api, session, member_client, page, django_capture_on_commit_callbacks
):
    conversation(api, session, 8, anchors={2})
    html = member_client.get(page).content.decode()
    assert '<option value="priority_based">' in html and 'name="target_tokens"' in html
    url = f"/sessions/{session.id}/turns/compactions/start/"
    bad = member_client.post(
        url, {"strategy": "priority_based", "target_tokens": "lots"}, HTTP_HX_REQUEST="true"
    )
    assert bad.status_code == 422 and "Target tokens must be" in bad.content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        response = member_client.post(
            url, {"strategy": "priority_based", "target_tokens": "1"}, HTTP_HX_REQUEST="true"
        )
    assert response.status_code == 200 and "priority_based" in response.content.decode()
    run = CompactionRun.objects.get(session=session)
    assert (run.strategy, run.target_tokens) == ("priority_based", 1)
    compaction_execute(run_id=run.pk, summarizer=ExtractiveSummarizer())
    html = member_client.get(page).content.decode()
    # Everything but the three recent turns folded under the one summary.
    assert "<strong>Summary</strong> of turns 0–4" in html and "5 turns folded" in html


def test_a_refused_form_keeps_what_the_person_typed(api, session, member_client, page):
    conversation(api, session, 5)
    url = f"/sessions/{session.id}/turns/compactions/start/"
    typed = {"strategy": "summarize_oldest", "keep_turns": "4", "target_tokens": "0"}
    response = member_client.post(url, typed, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    html = response.content.decode()
    assert "Target tokens must be a whole number above 0." in html
    assert '<option value="summarize_oldest" selected>' in html
    assert 'name="keep_turns" value="4"' in html and 'name="target_tokens" value="0"' in html
    assert not CompactionRun.objects.filter(session=session).exists()


def test_the_form_asks_for_a_strategy_when_none_is_chosen(api, session, member_client):
    conversation(api, session, 5)
    url = f"/sessions/{session.id}/turns/compactions/start/"
    response = member_client.post(url, {"strategy": "", "keep_turns": "2"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert "Choose a strategy." in response.content.decode()
    assert not CompactionRun.objects.filter(session=session).exists()


def test_without_htmx_a_refused_form_shows_its_error_on_the_page(
    api, session, member_client, page, django_capture_on_commit_callbacks
):
    conversation(api, session, 5)
    url = f"/sessions/{session.id}/turns/compactions/start/"
    response = member_client.post(url, {"strategy": "truncate_at", "keep_turns": ""})
    assert response.status_code == 422
    html = response.content.decode()
    assert "<html" in html and 'id="conv-timeline"' in html and "Step 4: please" in html
    assert "truncate_at needs keep_turns" in html
    assert '<option value="truncate_at" selected>' in html
    # That page's address is the form's: coming back to it later is a GET of it.
    again = member_client.get(url, follow=True)
    assert again.status_code == 200 and again.redirect_chain == [(page, 302)]
    html = again.content.decode()
    assert "Step 4: please" in html and "truncate_at needs keep_turns" not in html
    assert not CompactionRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=False):
        done = member_client.post(url, {"strategy": "truncate_at", "keep_turns": "3"})
    assert done.status_code == 302 and done["Location"] == f"/sessions/{session.id}/turns/"
    assert CompactionRun.objects.get(session=session).keep_turns == 3


ENDED = "This session has ended: it is read-only, so it takes no more compactions."


def test_an_ended_session_offers_no_compaction_form_and_says_why(api, session, member_client, page):
    conversation(api, session, 5)
    assert 'name="strategy"' in member_client.get(page).content.decode()
    session_end(session=session)
    start = f"/sessions/{session.id}/turns/compactions/start/"
    for html in (
        member_client.get(page).content.decode(),
        member_client.get(
            f"/sessions/{session.id}/turns/compactions/", HTTP_HX_REQUEST="true"
        ).content.decode(),
    ):
        assert f'<p class="muted small" id="conv-ended">{ENDED}</p>' in html
        assert "Compact now" not in html and start not in html and 'name="strategy"' not in html
    assert "Step 4: please" in member_client.get(page).content.decode()  # still readable


@pytest.mark.parametrize("htmx", [True, False])
def test_an_ended_session_refuses_a_compaction_post_and_changes_nothing(
    api, session, member_client, django_capture_on_commit_callbacks, htmx
):
    conversation(api, session, 6)
    session_end(session=session)
    seq = Session.objects.get(pk=session.pk).last_event_seq
    url = f"/sessions/{session.id}/turns/compactions/start/"
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        answers = [
            member_client.post(url, {"strategy": "anchor_point"}, **headers),
            # Whatever the fields say, the reason is the session's end.
            member_client.post(url, {"strategy": "truncate_at", "keep_turns": "x"}, **headers),
        ]
    for response in answers:
        assert response.status_code == 422
        html = response.content.decode()
        assert f'<p class="error" role="alert">{ENDED}</p>' in html
        assert "Compact now" not in html and 'id="conv-ended"' not in html
    assert callbacks == []
    assert not CompactionRun.objects.filter(session=session).exists()
    assert not Turn.objects.filter(session=session, summarized=True).exists()
    assert not Turn.objects.filter(session=session, truncated=True).exists()
    assert Session.objects.get(pk=session.pk).last_event_seq == seq


def test_a_session_without_turns_refuses_the_form_and_queues_nothing(
    session, member_client, page, django_capture_on_commit_callbacks
):
    url = f"/sessions/{session.id}/turns/compactions/start/"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = member_client.post(url, {"strategy": "anchor_point"}, HTTP_HX_REQUEST="true")
        plain = member_client.post(url, {"strategy": "anchor_point"})
    assert response.status_code == 422 and plain.status_code == 422
    for answer in (response, plain):
        alert = answer.content.decode().split('role="alert">')[1].split("</p>")[0]
        assert alert == "This session has no turns yet: there is nothing to compact."
    assert callbacks == []
    assert not CompactionRun.objects.filter(session=session).exists()
    html = member_client.get(page).content.decode()
    # The page offers no button that can only be refused: it says why there is none.
    assert "No compactions yet." in html and "Compact now" not in html
    assert 'id="conv-nothing">No turns yet: there is nothing to compact.' in html


@pytest.mark.parametrize(
    "field, value",
    [("target_tokens", "99999999999999999999999"), ("keep_turns", "99999999999999999999999")],
)
def test_the_form_refuses_numbers_no_column_can_hold(session, member_client, field, value):
    url = f"/sessions/{session.id}/turns/compactions/start/"
    response = member_client.post(
        url, {"strategy": "truncate_at", "keep_turns": "3", field: value}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 422, response.content[:300]
    assert f"{field} must be from" in response.content.decode()
    assert not CompactionRun.objects.filter(session=session).exists()


def test_a_run_waiting_for_a_retry_says_so(
    api, session, member_client, page, django_capture_on_commit_callbacks
):
    conversation(api, session, 5)
    with django_capture_on_commit_callbacks(execute=False):
        run_id = api.post(f"/sessions/{session.id}/compactions", {}).json()["id"]
    CompactionRun.objects.filter(pk=run_id).update(
        retries=1, retry_at=timezone.now(), error="OverloadedError: fake overloaded_error"
    )
    html = member_client.get(
        f"/sessions/{session.id}/turns/compactions/", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "retry 1 at" in html and "OverloadedError" in html and "every 2s" in html


def test_the_runs_fragment_polls_only_while_a_run_is_open(session, member_client):
    html = member_client.get(
        f"/sessions/{session.id}/turns/compactions/", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="conv-runs"' in html and "every 2s" not in html


def test_another_organization_gets_404(make_session, make_user, page):
    from contextops.tenancy import api_key_create

    key, _ = api_key_create(org_name="Globex", agent_name="x", authority="admin")
    other = make_session(organization=key.agent.organization)
    client = Client()
    client.force_login(make_user())
    assert client.get(f"/sessions/{other.id}/turns/").status_code == 404
    assert client.post(f"/sessions/{other.id}/turns/compactions/start/").status_code == 404
    assert client.get(f"/sessions/{other.id}/turns/compactions/start/").status_code == 404


def test_it_needs_a_login(page):
    response = Client().get(page)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_conversation_pages_are_headed_by_the_sessions_title(session, member_client, page):
    Session.objects.filter(pk=session.pk).update(title="Migrate the billing cron jobs")
    for url in (page, f"/sessions/{session.id}/turns/counterfactual/"):
        html = member_client.get(url).content.decode()
        heading = html[html.index("<h1>") : html.index("</h1>")]
        assert "Migrate the billing cron jobs" in heading and str(session.id) not in heading, url
