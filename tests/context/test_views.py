"""Dashboard fragments: pressure gauge, pack preview, handles with page in/out."""

import pytest
from django.test import Client

from contextops.models import AuditEntry
from frames.models import ContextPackRecord, Frame


def test_it_shows_the_pressure_gauge_that_refreshes_itself(member_client, session, frame):
    Frame.objects.filter(pk=frame.pk).update(last_occupancy_tokens=7_200, pressure_level="high")
    response = member_client.get(f"/sessions/{session.id}/pressure/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'hx-trigger="every 3s"' in html
    assert "72.0%" in html and "HIGH" in html and "gauge-fill high" in html
    assert "until below 65%" in html and "rises at above 85%" in html
    assert "Page out resources" in html
    assert "<html" not in html


def test_high_pressure_without_candidates_says_there_are_none(
    member_client, session, frame, make_handle
):
    Frame.objects.filter(pk=frame.pk).update(last_occupancy_tokens=7_200, pressure_level="high")
    html = member_client.get(f"/sessions/{session.id}/pressure/").content.decode()
    assert "Review the eviction candidates" in html and 'id="no-eviction-candidates"' in html
    make_handle(frame, "x " * 3000, tokens=1500, priority="low")
    html = member_client.get(f"/sessions/{session.id}/pressure/").content.decode()
    assert "Eviction candidates (" in html and "1,500 tokens" in html
    assert 'id="no-eviction-candidates"' not in html


def test_the_gauge_states_a_low_band_plainly(member_client, session, frame):
    Frame.objects.filter(pk=frame.pk).update(last_occupancy_tokens=1_000, pressure_level="low")
    html = member_client.get(f"/sessions/{session.id}/pressure/").content.decode()
    assert "Stays low below 50%." in html and "Hysteresis band: stays low" not in html


def test_the_gauge_says_when_no_frame_is_open(member_client, session, frame):
    Frame.objects.filter(pk=frame.pk).update(last_occupancy_tokens=7_200, status="completed")
    html = member_client.get(f"/sessions/{session.id}/pressure/").content.decode()
    assert "No open frame" in html and "tokens in the window" not in html


def test_it_previews_a_pack_at_the_budget_of_the_slider(member_client, session, frame, make_handle):
    # The newest, too large for the room, shows as an excerpt of a quarter of it; of the
    # five short ones (too short for an excerpt) the room left holds four.
    for _ in range(5):
        make_handle(frame, "y " * 240, tokens=120, priority="low")
    make_handle(frame, "x " * 3000, tokens=1500, priority="low")
    make_handle(frame, "system", tokens=3, priority="critical")
    response = member_client.get(
        f"/sessions/{session.id}/context-preview/", {"budget": 800}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'type="range"' in html and 'hx-trigger="change, submit"' in html
    assert "over_budget" in html and "excerpt" in html
    assert "Segments (handles)" in html
    assert not ContextPackRecord.objects.filter(session=session).exists()  # looking stores nothing


def _ask_for_pack(api, session, **body):
    response = api.post(f"/sessions/{session.id}/context-pack", body)
    assert response.status_code == 200, response.content
    return response.json()


def test_it_lists_the_packs_agents_asked_for_and_not_the_previews(
    api, member_client, session, frame, make_handle
):
    # The newest, too large for the room, shows as an excerpt of a quarter of it; of the
    # five short ones (too short for an excerpt) the room left holds four.
    for _ in range(5):
        make_handle(frame, "y " * 240, tokens=120, priority="low")
    make_handle(frame, "x " * 3000, tokens=1500, priority="low")
    make_handle(frame, "system", tokens=3, priority="critical")
    empty = member_client.get(f"/sessions/{session.id}/context-packs/", HTTP_HX_REQUEST="true")
    assert "No agent has asked for a context pack yet" in empty.content.decode()
    member_client.get(f"/sessions/{session.id}/context-preview/", {"budget": 900})
    first = _ask_for_pack(api, session, budget_tokens=5000)
    second = _ask_for_pack(api, session, budget_tokens=800, query="risks")
    assert [p["id"] for p in api.get(f"/sessions/{session.id}/context-packs").json()] == [
        second["id"],
        first["id"],
    ]
    html = member_client.get(
        f"/sessions/{session.id}/context-packs/", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert html.index(f'id="pack-{second["id"]}"') < html.index(f'id="pack-{first["id"]}"')
    assert f"{second['token_summary']['used']}</strong> / 800 tokens" in html
    assert "over_budget" in html and "Query</dt><dd>risks" in html
    assert f'href="/frames/{frame.id}/"' in html and "hx-preserve" in html
    assert "/ 900 tokens" not in html  # the preview was not stored
    assert f'?newest={second["id"]}" hx-trigger="every 10s"' in html
    assert "<html" not in html


def test_the_packs_card_answers_204_until_an_agent_asks_for_another(api, member_client, session):
    url = f"/sessions/{session.id}/context-packs/"
    assert member_client.get(url, {"newest": "none"}, HTTP_HX_REQUEST="true").status_code == 204
    pack = _ask_for_pack(api, session, budget_tokens=1000)
    assert member_client.get(url, {"newest": "none"}, HTTP_HX_REQUEST="true").status_code == 200
    assert member_client.get(url, {"newest": pack["id"]}, HTTP_HX_REQUEST="true").status_code == 204
    for _ in range(8):
        _ask_for_pack(api, session, budget_tokens=1000)
    html = member_client.get(url).content.decode()
    assert html.count('<details id="pack-') == 5


def test_the_packs_card_costs_the_same_queries_for_one_or_twenty_packs(
    api, member_client, make_session
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count(packs):
        session = make_session()
        for _ in range(packs):
            _ask_for_pack(api, session, budget_tokens=1000)
        with CaptureQueriesContext(connection) as queries:
            member_client.get(f"/sessions/{session.id}/context-packs/", HTTP_HX_REQUEST="true")
        return len(queries)

    assert count(1) == count(20)


def test_the_session_page_loads_the_packs_card(member_client, session):
    page = member_client.get(f"/sessions/{session.id}/").content.decode()
    assert f'hx-get="/sessions/{session.id}/context-packs/" hx-trigger="load"' in page
    assert f'href="/sessions/{session.id}/context-packs/"' in page


def test_it_explains_a_budget_that_is_too_small(member_client, session):
    html = member_client.get(
        f"/sessions/{session.id}/context-preview/", {"budget": 100}
    ).content.decode()
    assert "at least 500 tokens" in html
    html = member_client.get(
        f"/sessions/{session.id}/context-preview/", {"budget": "x"}
    ).content.decode()
    assert "whole number" in html


def test_it_lists_handles_with_page_buttons_and_pages_them(
    member_client, frame, make_handle, queued_jobs
):
    loaded = make_handle(frame, tokens=5)
    indexed = make_handle(frame, tokens=5, state="indexed", summary="s.", summary_tokens=1)
    html = member_client.get(f"/frames/{frame.id}/handles/").content.decode()
    assert f'hx-get="/frames/{frame.id}/handles/" hx-trigger="every 3s"' in html  # polls
    assert f'id="page-out-{loaded.id}"' in html  # focus comes back to it after a refresh
    assert f'hx-post="/handles/{loaded.id}/page-out/"' in html
    assert f'hx-post="/handles/{indexed.id}/page-in/"' in html
    assert "csrfmiddlewaretoken" in html
    response = member_client.post(f"/handles/{indexed.id}/page-in/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    indexed.refresh_from_db()
    assert indexed.state == "loaded"
    assert f'hx-post="/handles/{indexed.id}/page-out/"' in response.content.decode()
    before = queued_jobs()
    response = member_client.post(f"/handles/{loaded.id}/page-out/", HTTP_HX_REQUEST="true")
    assert queued_jobs() == before + 1  # the page-out job reached the broker
    assert "Page-out queued" in response.content.decode()
    response = member_client.post(f"/handles/{indexed.id}/page-in/", HTTP_HX_REQUEST="true")
    assert "cannot become loaded" in response.content.decode()


def test_paging_handles_in_the_dashboard_is_audited_for_its_organization_only(
    member_client, frame, make_handle, queued_jobs, audit_page
):
    loaded = make_handle(frame, tokens=5)
    indexed = make_handle(frame, tokens=5, state="indexed", summary="s.", summary_tokens=1)
    assert (
        member_client.post(f"/handles/{indexed.id}/page-in/", {"mode": "full"}).status_code == 302
    )
    assert member_client.post(f"/handles/{loaded.id}/page-out/").status_code == 302
    entries = AuditEntry.objects.filter(action__startswith="handle.").order_by("created_at", "pk")
    assert [(e.action, e.target, e.actor, e.user.username) for e in entries] == [
        (AuditEntry.Action.HANDLE_PAGED_IN, f"handle {indexed.id}", "ada", "ada"),
        (AuditEntry.Action.HANDLE_PAGED_OUT, f"handle {loaded.id}", "ada", "ada"),
    ]
    assert {e.organization_id for e in entries} == {frame.organization_id}
    assert entries[0].detail == {
        "frame_id": str(frame.id),
        "kind": "document",
        "mode": "full",
        "state": "indexed",
    }
    assert f"<td>handle {loaded.id}</td>" in audit_page("Acme")
    assert f"<td>handle {loaded.id}</td>" not in audit_page("Globex")


def test_it_redirects_a_plain_post_back_to_the_handles(member_client, frame, make_handle):
    handle = make_handle(frame, state="cold")
    response = member_client.post(f"/handles/{handle.id}/page-in/")
    assert response.status_code == 302
    assert response["Location"] == f"/frames/{frame.id}/handles/"


@pytest.mark.parametrize(
    "path",
    [
        "/sessions/{s}/pressure/",
        "/sessions/{s}/context-preview/",
        "/sessions/{s}/context-packs/",
        "/frames/{f}/handles/",
    ],
)
def test_it_hides_another_organizations_fragments(make_user, session, frame, path):
    client = Client()
    client.force_login(make_user(username="eve", org="Globex"))
    assert client.get(path.format(s=session.id, f=frame.id)).status_code == 404


def test_it_requires_a_login(client, session):
    assert client.get(f"/sessions/{session.id}/pressure/").status_code == 302
