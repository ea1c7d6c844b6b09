"""Idempotency-Key on API writes: the first answer is kept a day per organization and key,
replayed to a repeat of the same request, refused for another request, and two copies
arriving together never both apply."""

import threading
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from contextops.idempotency import idempotency_purge
from contextops.models import IdempotencyKey
from frames.models import Frame, Usage

KEY = "5d0c3c57-2a6f-4f4e-9d59-idem-0001"


def _idem(key: str = KEY) -> dict:
    return {"HTTP_IDEMPOTENCY_KEY": key}


def test_a_frame_push_sent_twice_with_one_key_creates_one_frame_and_answers_the_same(
    api, start_session
):
    session = start_session()
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    first = api.post(f"/sessions/{session['id']}/frames", body, **_idem())
    second = api.post(f"/sessions/{session['id']}/frames", body, **_idem())
    assert first.status_code == second.status_code == 201
    assert first.content == second.content  # byte for byte: the same frame, the same figures
    assert second["Idempotent-Replayed"] == "true" and not first.has_header("Idempotent-Replayed")
    assert Frame.objects.filter(session_id=session["id"]).count() == 1


def test_without_a_key_the_same_push_makes_two_frames(api, start_session):
    session = start_session()
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    for _ in range(2):
        assert api.post(f"/sessions/{session['id']}/frames", body).status_code == 201
    assert Frame.objects.filter(session_id=session["id"]).count() == 2


def test_the_same_key_with_another_body_is_refused_and_changes_nothing(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 5_000)
    usage = {"input_tokens": 100, "output_tokens": 10}
    assert api.post(f"/frames/{frame['id']}/usage", usage, **_idem()).status_code == 200
    other = api.post(f"/frames/{frame['id']}/usage", {**usage, "output_tokens": 11}, **_idem())
    assert other.status_code == 422
    body = other.json()
    assert body["error"] == "idempotency_key_reused" and KEY in body["detail"]
    assert body["first_request"] == f"POST /api/v1/frames/{frame['id']}/usage"
    assert Frame.objects.get(pk=frame["id"]).budget_used == 110  # charged once
    # Another path under the same key is another request too.
    elsewhere = api.post(
        f"/sessions/{session['id']}/frames", {"goal": "x", "budget": {"total": 10}}, **_idem()
    )
    assert elsewhere.status_code == 422 and Frame.objects.count() == 1


def test_a_refusal_is_remembered_like_a_success(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 100)
    reserve = {"purpose": "tool", "amount": 10_000}
    first = api.post(f"/frames/{frame['id']}/reserve", reserve, **_idem())
    assert first.status_code == 409 and first.json()["error"] == "insufficient_tokens"
    again = api.post(f"/frames/{frame['id']}/reserve", reserve, **_idem())
    assert (again.status_code, again.content) == (409, first.content)


def test_keys_belong_to_one_organization(api, other_api, start_session):
    ours = start_session()
    theirs = start_session(client=other_api)
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    assert api.post(f"/sessions/{ours['id']}/frames", body, **_idem()).status_code == 201
    # Globex happens to send the same key: its own request runs, nothing of Acme comes back.
    answer = other_api.post(f"/sessions/{theirs['id']}/frames", body, **_idem())
    assert answer.status_code == 201 and answer.json()["session_id"] == theirs["id"]
    replayed_to_them = other_api.post(f"/sessions/{ours['id']}/frames", body, **_idem("other"))
    assert replayed_to_them.status_code == 404
    assert Frame.objects.filter(session_id=theirs["id"]).count() == 1


def test_a_malformed_key_is_a_validation_error(api, start_session):
    session = start_session()
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    for bad in ("", "x" * 256, "naïve-key"):
        response = api.post(f"/sessions/{session['id']}/frames", body, **_idem(bad))
        assert response.status_code == 422, bad
        assert response.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    assert Frame.objects.count() == 0


def test_a_request_still_running_under_the_key_answers_in_use(api, start_session):
    session = start_session()
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    path = f"/sessions/{session['id']}/frames"
    assert api.post(path, body, **_idem()).status_code == 201
    IdempotencyKey.objects.update(status=None)  # as if the first were still running
    busy = api.post(path, body, **_idem())
    assert busy.status_code == 409 and busy.json()["error"] == "idempotency_key_in_use"
    assert busy["Retry-After"] == "1"
    # A claim whose request died long ago is taken again: the write runs once more.
    IdempotencyKey.objects.update(claimed_at=timezone.now() - timedelta(hours=1))
    assert api.post(path, body, **_idem()).status_code == 201
    assert Frame.objects.filter(session_id=session["id"]).count() == 2


def test_an_answer_is_kept_a_day(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 5_000)
    usage = {"input_tokens": 100, "output_tokens": 10}
    api.post(f"/frames/{frame['id']}/usage", usage, **_idem())
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert idempotency_purge() == 1
    assert api.post(f"/frames/{frame['id']}/usage", usage, **_idem()).status_code == 200
    assert Frame.objects.get(pk=frame["id"]).budget_used == 220  # a new request now


def test_a_write_that_changed_nothing_is_not_remembered(api, start_session, settings):
    settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE = 1
    session = start_session()  # the minute's one write
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    limited = api.post(f"/sessions/{session['id']}/frames", body, **_idem())
    assert limited.status_code == 429
    assert not IdempotencyKey.objects.exists()  # a retry after the minute runs the write


@pytest.mark.django_db(transaction=True)
def test_two_copies_arriving_together_apply_once(live_server, make_api):
    api = make_api()
    session = api.post("/sessions", {"identity": {"user_name": "Ada"}}).json()
    frame = api.post(
        f"/sessions/{session['id']}/frames", {"goal": "g", "budget": {"total": 9_000}}
    ).json()
    url = f"{live_server.url}/api/v1/frames/{frame['id']}/usage"
    headers = {"Authorization": f"Bearer {api.key}", "Idempotency-Key": "together"}
    usage = {"input_tokens": 400, "output_tokens": 100, "model": "claude-fake"}
    answers: list[httpx.Response] = []
    start = threading.Barrier(4)

    def send():
        start.wait()
        answers.append(httpx.post(url, json=usage, headers=headers, timeout=30))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(a.status_code for a in answers)
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 409}, statuses
    oks = {a.content for a in answers if a.status_code == 200}
    assert len(oks) == 1  # every 200 is the first answer
    assert all(
        a.json()["error"] == "idempotency_key_in_use" for a in answers if a.status_code == 409
    )
    assert Frame.objects.get(pk=frame["id"]).budget_used == 500  # charged once
    assert Usage.objects.filter(frame_id=frame["id"]).count() == 1
