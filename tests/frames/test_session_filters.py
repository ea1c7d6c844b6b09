"""GET /sessions filters and orders the list; the list page filters the same way."""

from datetime import timedelta

import pytest
from django.utils import timezone

from frames.models import Session


@pytest.fixture
def three(api, make_api, start_session, push_ok):
    ended = start_session(title="Ended one")
    api.post(f"/sessions/{ended['id']}/end")
    busy = start_session(title="Busy one", context_window_tokens=10_000)
    frame = push_ok(busy["id"], 100_000)
    api.post(f"/frames/{frame['id']}/usage", {"input_tokens": 6_500, "output_tokens": 0})
    other = make_api(agent="writer")
    quiet = start_session(client=other, title="Quiet one")
    return {"ended": ended, "busy": busy, "quiet": quiet}


def _ids(response):
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["items"]]


def test_it_lists_only_ended_sessions_when_asked(api, three):
    assert _ids(api.get("/sessions", {"status": "ended"})) == [three["ended"]["id"]]
    assert three["ended"]["id"] not in _ids(api.get("/sessions", {"status": "active"}))


def test_it_filters_by_the_pressure_the_page_shows(api, three):
    busy = api.get(f"/sessions/{three['busy']['id']}").json()
    level = busy["pressure"]["level"]
    assert level != "low"
    # The session row can disagree with its top frame; the list follows the frame.
    Session.objects.filter(pk=three["busy"]["id"]).update(pressure_level="critical")
    assert _ids(api.get("/sessions", {"pressure": level})) == [three["busy"]["id"]]
    listed = api.get("/sessions", {"pressure": level}).json()["items"][0]
    assert listed["pressure"]["level"] == level
    assert api.get("/sessions", {"pressure": "critical"}).json()["items"] == []


def test_it_filters_by_agent_and_time_and_orders(api, three):
    assert _ids(api.get("/sessions", {"agent": "writer"})) == [three["quiet"]["id"]]
    past = timezone.now() - timedelta(days=3)
    Session.objects.filter(pk=three["ended"]["id"]).update(started_at=past)
    since = (timezone.now() - timedelta(days=1)).isoformat()
    assert three["ended"]["id"] not in _ids(api.get("/sessions", {"since": since}))
    assert _ids(api.get("/sessions", {"until": since})) == [three["ended"]["id"]]
    assert _ids(api.get("/sessions", {"order": "tokens"}))[0] == three["busy"]["id"]
    oldest = _ids(api.get("/sessions", {"order": "oldest"}))
    assert oldest == list(reversed(_ids(api.get("/sessions"))))
    assert _ids(api.get("/sessions", {"status": "ended", "limit": 1, "offset": 1})) == []


@pytest.mark.parametrize(
    "params",
    [{"status": "sleeping"}, {"pressure": "extreme"}, {"order": "random"}, {"since": "yesterday"}],
)
def test_it_refuses_unknown_filter_values(api, three, params):
    response = api.get("/sessions", params)
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"


def test_another_organization_never_sees_ours(other_api, three):
    assert _ids(other_api.get("/sessions", {"status": "ended"})) == []


def test_the_list_page_filters_the_same_way(member_client, three):
    page = member_client.get("/", {"status": "ended"}).content.decode()
    assert "Ended one" in page and "Busy one" not in page


def test_a_date_alone_is_that_whole_day_in_the_api_and_on_the_page(api, member_client, three):
    today = timezone.localdate().isoformat()
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    everyone = {three[name]["id"] for name in ("ended", "busy", "quiet")}
    assert set(_ids(api.get("/sessions", {"until": today}))) == everyone
    assert set(_ids(api.get("/sessions", {"since": today, "until": today}))) == everyone
    assert _ids(api.get("/sessions", {"until": yesterday})) == []
    page = member_client.get("/", {"until": today}).content.decode()
    assert "Ended one" in page and "Busy one" in page and "Quiet one" in page
    assert "Ended one" not in member_client.get("/", {"until": yesterday}).content.decode()


def test_the_page_says_which_filter_date_it_could_not_read(member_client, three):
    page = member_client.get("/", {"since": "notadate"}).content.decode()
    assert (
        "“notadate” is not a date (YYYY-MM-DD): the “Started from” filter is not applied." in page
    )
    assert "Ended one" in page  # the rest of the filters still apply; this one does not
