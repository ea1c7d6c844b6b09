"""Working set (layer 3) with TTL, and the environment (layer 4)."""

from datetime import timedelta

from django.utils import timezone

from facts.models import WorkingSetItem
from facts.tasks import working_set_expire
from frames.models import Event


def test_it_puts_gets_and_deletes_an_item(api, make_session):
    session = make_session(api)
    put = api.put(f"/sessions/{session.id}/working-set/draft", {"value": {"lines": 3}})
    assert put.status_code == 200 and put.json()["tokens"] > 0 and put.json()["expires_at"] is None
    assert api.get(f"/sessions/{session.id}/working-set/draft").json()["value"] == {"lines": 3}
    api.put(f"/sessions/{session.id}/working-set/draft", {"value": "replaced"})
    assert api.get(f"/sessions/{session.id}/working-set").json()[0]["value"] == "replaced"
    assert api.delete(f"/sessions/{session.id}/working-set/draft").status_code == 204
    assert api.get(f"/sessions/{session.id}/working-set/draft").status_code == 404
    assert api.delete(f"/sessions/{session.id}/working-set/draft").status_code == 404
    assert Event.objects.filter(session=session, type="working_set.put").count() == 2


def test_it_hides_an_expired_item_at_once_and_the_task_removes_it(api, make_session):
    session = make_session(api)
    body = api.put(
        f"/sessions/{session.id}/working-set/tmp", {"value": "soon gone", "ttl_seconds": 60}
    ).json()
    assert body["expires_at"] is not None
    WorkingSetItem.objects.filter(key="tmp").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert api.get(f"/sessions/{session.id}/working-set/tmp").status_code == 404
    assert api.get(f"/sessions/{session.id}/working-set").json() == []
    pack = api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 2000}).json()
    assert pack["working_set"] == []
    api.put(f"/sessions/{session.id}/working-set/keep", {"value": "stays"})
    assert working_set_expire() == 1
    assert list(WorkingSetItem.objects.values_list("key", flat=True)) == ["keep"]


def test_it_puts_the_working_set_into_a_context_pack(api, make_session):
    session = make_session(api)
    api.put(f"/sessions/{session.id}/working-set/scratch", {"value": "half-done invoice"})
    pack = api.post(
        f"/sessions/{session.id}/context-pack", {"budget_tokens": 2000, "query": "invoice"}
    ).json()
    assert [i["key"] for i in pack["working_set"]] == ["scratch"]
    assert "half-done invoice" in pack["working_set"][0]["text"]


def test_it_answers_422_for_a_bad_ttl_and_404_for_other_sessions(api, other_api, make_session):
    session = make_session(api)
    assert (
        api.put(f"/sessions/{session.id}/working-set/k", {"value": 1, "ttl_seconds": 0}).status_code
        == 422
    )
    assert (
        api.put(
            f"/sessions/{session.id}/working-set/k", {"value": 1, "ttl_seconds": "x"}
        ).status_code
        == 422
    )
    api.put(f"/sessions/{session.id}/working-set/k", {"value": 1})
    assert other_api.get(f"/sessions/{session.id}/working-set/k").status_code == 404
    assert other_api.put(f"/sessions/{session.id}/working-set/k", {"value": 2}).status_code == 404
    assert other_api.delete(f"/sessions/{session.id}/working-set/k").status_code == 404
    assert api.get("/sessions/not-a-uuid/working-set/k").status_code == 404
    assert api.get(f"/sessions/{session.id}/working-set/k").json()["value"] == 1


def test_it_updates_the_environment_and_computes_local_time(api, other_api, make_session):
    session = make_session(api)
    response = api.put(
        f"/sessions/{session.id}/environment",
        {"timezone": "Asia/Tokyo", "external_data": {"fx": 1.1}},
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["timezone"] == "Asia/Tokyo" and body["location"] == "Paris"
    assert body["external_data"] == {"fx": 1.1} and body["current_time"].endswith("+09:00")
    session.refresh_from_db()
    assert session.environment["timezone"] == "Asia/Tokyo"
    assert (
        api.get(f"/sessions/{session.id}/environment").json()["current_date"]
        == body["current_date"]
    )
    bad = api.put(f"/sessions/{session.id}/environment", {"timezone": "Mars/Olympus"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["body", "timezone"]
    assert api.put(f"/sessions/{session.id}/environment", {"external_data": [1]}).status_code == 422
    assert (
        other_api.put(f"/sessions/{session.id}/environment", {"location": "Rome"}).status_code
        == 404
    )


def test_it_drops_the_working_set_when_the_session_ends(api, make_session):
    from frames.context.lifecycle import session_end

    session = make_session(api)
    api.put(f"/sessions/{session.id}/working-set/k", {"value": 1})
    session_end(session=session)
    assert not WorkingSetItem.objects.filter(session=session).exists()
    response = api.put(f"/sessions/{session.id}/working-set/k", {"value": 1})
    assert response.status_code == 409 and response.json()["error"] == "session_ended"
