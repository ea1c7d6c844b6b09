"""Idempotency-Key on API writes: the first answer is kept a day per organization and key,
replayed to a repeat of the same request, refused for another request, and two copies
arriving together never both apply."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from contextops.idempotency import (
    _lock_id,
    idempotency_claim,
    idempotency_purge,
    idempotency_unlock,
    request_fingerprint,
)
from contextops.models import ApiKey, IdempotencyKey
from frames.models import Frame, Usage
from tests.conftest import IS_POSTGRES
from tests.waiting import wait_until

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


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


class OtherConnection:
    """Another request's database connection: a thread of its own, so Django gives it its
    own connection to the database (its own PostgreSQL session)."""

    def __init__(self):
        self.thread = ThreadPoolExecutor(max_workers=1)

    def run(self, fn, *args, **kwargs):
        return self.thread.submit(fn, *args, **kwargs).result()

    def drop(self):
        """The connection ends, as when the database restarts; the next query reconnects.

        Returns once the server has released that session's advisory locks: closing the
        socket only asks it to end, and its locks live until it has."""
        pid = self.run(_backend_pid) if connection.vendor == "postgresql" else None
        self.run(lambda: connection.close())  # this thread's connection, not the caller's
        if pid is None:
            return

        def released() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT 1 FROM pg_locks WHERE pid = %s AND locktype = 'advisory'", [pid]
                )
                return cursor.fetchone() is None

        wait_until(released, timeout=10, interval=0.01, what=f"the server to end session {pid}")

    def close(self):
        """The connection ends and nothing runs on it again, as when the process dies."""
        self.drop()
        self.thread.shutdown()


# SQLite has no advisory locks: there a dead claim is told by its age alone (the test
# above); the PostgreSQL pass runs these.
postgres_only = pytest.mark.skipif(
    not IS_POSTGRES,
    reason="needs PostgreSQL: its advisory locks tell a live claim from a dead one "
    "(SQLite waits out CONTEXTOPS_IDEMPOTENCY_CLAIM_SECONDS, tested above)",
)


def _lock(lock: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock])
        assert cursor.fetchone()[0], "the lock is held already (left over by a request?)"


def test_a_request_still_running_under_the_key_answers_in_use(api, start_session):
    session = start_session()
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    path = f"/sessions/{session['id']}/frames"
    assert api.post(path, body, **_idem()).status_code == 201
    IdempotencyKey.objects.update(status=None)  # as if the first were still running
    running = OtherConnection()
    if IS_POSTGRES:  # its request holds the claim's lock on its connection
        running.run(_lock, _lock_id(api.organization.pk, _key_id(api), KEY))
    busy = api.post(path, body, **_idem())
    assert busy.status_code == 409 and busy.json()["error"] == "idempotency_key_in_use"
    assert busy["Retry-After"] == "1"
    if IS_POSTGRES:  # however old the claim: a held lock is a live request
        IdempotencyKey.objects.update(claimed_at=timezone.now() - timedelta(hours=1))
        assert api.post(path, body, **_idem()).status_code == 409
        running.close()  # its connection ends: the claim is dead, and free at once
    else:  # SQLite, no advisory locks: a claim whose request died long ago is free
        running.close()
        assert api.post(path, body, **_idem()).status_code == 409
        IdempotencyKey.objects.update(claimed_at=timezone.now() - timedelta(hours=1))
    # The claim is taken again: the write runs once more.
    assert api.post(path, body, **_idem()).status_code == 201
    assert Frame.objects.filter(session_id=session["id"]).count() == 2
    assert api.post(path, body, **_idem())["Idempotent-Replayed"] == "true"


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_new_key_another_request_is_claiming_answers_in_use(api, start_session):
    """Its lock is held and its row not yet committed: the key is not free to claim."""
    session = start_session()
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    path = f"/sessions/{session['id']}/frames"
    claiming = OtherConnection()
    claiming.run(_lock, _lock_id(api.organization.pk, _key_id(api), KEY))
    busy = api.post(path, body, **_idem())
    assert busy.status_code == 409 and busy.json()["error"] == "idempotency_key_in_use"
    assert not IdempotencyKey.objects.exists()
    assert not Frame.objects.filter(session_id=session["id"]).exists()
    claiming.close()
    assert api.post(path, body, **_idem()).status_code == 201


USAGE = {"input_tokens": 400, "output_tokens": 100}  # charges 500


@pytest.fixture
def usage_frame(start_session, push_ok) -> str:
    """A frame of 9,000 tokens to record usage in: its id."""
    return push_ok(start_session()["id"], 9_000)["id"]


def _key_id(api):
    return ApiKey.objects.get(prefix=api.key.split("_")[1]).pk


def _usage_claim(api, frame_id: str, usage: dict, key: str):
    """What the middleware does first for ``POST /frames/{frame_id}/usage``: the claim."""
    path = f"/api/v1/frames/{frame_id}/usage"
    return idempotency_claim(
        organization_id=api.organization.pk,
        api_key_id=_key_id(api),
        key=key,
        method="POST",
        path=path,
        fingerprint=request_fingerprint(method="POST", path=path, body=json.dumps(usage).encode()),
    )


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_whose_connection_died_is_taken_over_at_once_and_applies_once(api, usage_frame):
    frame, usage = {"id": usage_frame}, USAGE
    dead = OtherConnection()  # claims the key, then its connection ends (a restart)
    assert isinstance(dead.run(_usage_claim, api, frame["id"], usage, KEY), IdempotencyKey)
    dead.close()
    assert IdempotencyKey.objects.get().status is None  # never finished
    retry = api.post(f"/frames/{frame['id']}/usage", usage, **_idem())
    assert retry.status_code == 200, retry.content  # at once, not 409 for 300 s
    assert not retry.has_header("Idempotent-Replayed")
    again = api.post(f"/frames/{frame['id']}/usage", usage, **_idem())
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    assert again.content == retry.content
    # Once across the dead claim, the takeover and the replay.
    assert Usage.objects.filter(frame_id=frame["id"]).count() == 1
    assert Frame.objects.get(pk=frame["id"]).budget_used == 500
    # The takeover released the lock: nothing is left held on the kept connection.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        )
        assert cursor.fetchone()[0] == 0


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_live_claim_answers_in_use_and_its_own_answer_stands(api, usage_frame):
    frame, usage = {"id": usage_frame}, USAGE
    live = OtherConnection()  # claims the key and keeps its connection: still running
    record = live.run(_usage_claim, api, frame["id"], usage, KEY)
    busy = api.post(f"/frames/{frame['id']}/usage", usage, **_idem())
    assert busy.status_code == 409 and busy.json()["error"] == "idempotency_key_in_use"
    assert Usage.objects.count() == 0
    live.run(idempotency_unlock, record=record)  # it ends without an answer stored
    live.close()
    assert api.post(f"/frames/{frame['id']}/usage", usage, **_idem()).status_code == 200
    assert Usage.objects.count() == 1


def test_an_answer_is_kept_a_day(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 5_000)
    usage = {"input_tokens": 100, "output_tokens": 10}
    api.post(f"/frames/{frame['id']}/usage", usage, **_idem())
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert idempotency_purge() == 1
    assert api.post(f"/frames/{frame['id']}/usage", usage, **_idem()).status_code == 200
    assert Frame.objects.get(pk=frame["id"]).budget_used == 220  # a new request now


def test_an_answer_is_replayed_to_the_last_moment_of_its_day_and_the_key_is_free_after(
    api, start_session, push_ok, settings, clock
):
    """The claim's time to live, exactly: at ``CONTEXTOPS_IDEMPOTENCY_TTL_SECONDS`` after the
    first request the answer is still replayed; a second later the key is free again, so a
    repeat runs anew, even with another body, and claims the key afresh."""
    settings.CONTEXTOPS_IDEMPOTENCY_TTL_SECONDS = 3600
    session = start_session()
    frame = push_ok(session["id"], 5_000)
    usage = {"input_tokens": 100, "output_tokens": 10}
    path = f"/frames/{frame['id']}/usage"
    assert api.post(path, usage, **_idem()).status_code == 200
    clock.shift(timedelta(seconds=3600))
    kept = api.post(path, usage, **_idem())
    assert kept["Idempotent-Replayed"] == "true"
    assert api.post(path, {"input_tokens": 1, "output_tokens": 1}, **_idem()).status_code == 422
    assert Frame.objects.get(pk=frame["id"]).budget_used == 110
    clock.shift(timedelta(seconds=1))
    anew = api.post(path, {"input_tokens": 1, "output_tokens": 1}, **_idem())
    assert anew.status_code == 200 and not anew.has_header("Idempotent-Replayed")
    assert Frame.objects.get(pk=frame["id"]).budget_used == 112
    assert IdempotencyKey.objects.get().created_at == timezone.now()  # claimed afresh
    assert api.post(path, usage, **_idem()).status_code == 422  # the new request's key now


def test_an_unfinished_claim_older_than_the_ttl_is_taken_over(
    api, start_session, push_ok, settings, clock
):
    """A claim whose request never answered, a day old: the key is free again and the
    repeat runs (on PostgreSQL nobody holds its lock either; on SQLite its age tells)."""
    settings.CONTEXTOPS_IDEMPOTENCY_TTL_SECONDS = 3600
    settings.CONTEXTOPS_IDEMPOTENCY_CLAIM_SECONDS = 10**6  # only the day's end frees it here
    session = start_session()
    frame = push_ok(session["id"], 5_000)
    usage = {"input_tokens": 100, "output_tokens": 10}
    path = f"/frames/{frame['id']}/usage"
    assert api.post(path, usage, **_idem()).status_code == 200
    IdempotencyKey.objects.update(status=None)  # as if its request had died unanswered
    if not IS_POSTGRES:
        clock.shift(timedelta(seconds=3600))
        assert api.post(path, usage, **_idem()).status_code == 409  # still in its day
    clock.shift(timedelta(seconds=3601) if IS_POSTGRES else timedelta(seconds=1))
    taken = api.post(path, usage, **_idem())
    assert taken.status_code == 200 and not taken.has_header("Idempotent-Replayed")
    assert Frame.objects.get(pk=frame["id"]).budget_used == 220
    assert api.post(path, usage, **_idem())["Idempotent-Replayed"] == "true"


def test_a_write_that_changed_nothing_is_not_remembered(api, start_session, settings):
    settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE = 1
    session = start_session()  # the minute's one write
    body = {"goal": "Answer", "budget": {"total": 5_000}}
    limited = api.post(f"/sessions/{session['id']}/frames", body, **_idem())
    assert limited.status_code == 429
    assert not IdempotencyKey.objects.exists()  # a retry after the minute runs the write


def _copies_together(live_server, api, frame_id: str, usage: dict, key: str, copies: int = 4):
    """``copies`` copies of one usage record sent at once through the live server; asserts
    they applied once: every 200 is the first answer, the rest 409, the frame charged once."""
    url = f"{live_server.url}/api/v1/frames/{frame_id}/usage"
    headers = {
        "Authorization": f"Bearer {api.key}",
        "Idempotency-Key": key,
        "Content-Type": "application/json",
    }
    answers: list[httpx.Response] = []
    start = threading.Barrier(copies)

    def send():  # json.dumps as ApiClient sends it: one body, one fingerprint
        start.wait()
        answers.append(httpx.post(url, content=json.dumps(usage), headers=headers, timeout=30))

    threads = [threading.Thread(target=send) for _ in range(copies)]
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
    assert Frame.objects.get(pk=frame_id).budget_used == 500  # charged once
    assert Usage.objects.filter(frame_id=frame_id).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_copies_arriving_together_apply_once(live_server, api, usage_frame):
    usage = {**USAGE, "model": "claude-fake"}
    _copies_together(live_server, api, usage_frame, usage, "together")


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_copies_arriving_together_after_a_dead_claim_apply_once(live_server, api, usage_frame):
    dead = OtherConnection()
    dead.run(_usage_claim, api, usage_frame, USAGE, "together")
    dead.close()
    _copies_together(live_server, api, usage_frame, USAGE, "together")  # one takes over


def _count_usage() -> int:
    return Usage.objects.count()


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_claimer_that_reconnects_keeps_its_claim_unless_it_was_taken_over(api, usage_frame):
    frame, usage = {"id": usage_frame}, USAGE
    claimer = OtherConnection()
    record = claimer.run(_usage_claim, api, frame["id"], usage, KEY)
    claimer.drop()  # the database restarted under it, and it reconnects at once:
    assert claimer.run(_count_usage) == 0  # its new connection takes the lock again
    busy = api.post(f"/frames/{frame['id']}/usage", usage, **_idem())
    assert busy.status_code == 409  # still live
    claimer.drop()  # lost again, and this time a repeat comes first and takes over
    assert api.post(f"/frames/{frame['id']}/usage", usage, **_idem()).status_code == 200
    with pytest.raises(OperationalError, match="taken over"):
        claimer.run(_count_usage)  # the claim is the repeat's: it may write nothing
    claimer.run(idempotency_unlock, record=record)
    claimer.close()
    assert Usage.objects.count() == 1


def test_a_record_belongs_to_the_key_that_sent_it(api, make_api):
    """Two keys of one organization sending the same Idempotency-Key make two requests:
    neither is answered with the other's stored answer (a refusal replayed to the person
    allowed to act, or a person's success replayed to an agent)."""
    colleague = make_api(agent="colleague")
    first = api.post("/sessions", {"title": "mine"}, HTTP_IDEMPOTENCY_KEY="shared-key-1")
    theirs = colleague.post("/sessions", {"title": "mine"}, HTTP_IDEMPOTENCY_KEY="shared-key-1")
    assert first.status_code == theirs.status_code == 201
    assert "Idempotent-Replayed" not in theirs
    assert theirs.json()["id"] != first.json()["id"]
    # Each key still gets its own first answer back.
    again = colleague.post("/sessions", {"title": "mine"}, HTTP_IDEMPOTENCY_KEY="shared-key-1")
    assert again["Idempotent-Replayed"] == "true" and again.json()["id"] == theirs.json()["id"]
    mine = api.post("/sessions", {"title": "mine"}, HTTP_IDEMPOTENCY_KEY="shared-key-1")
    assert mine.json()["id"] == first.json()["id"]
    assert IdempotencyKey.objects.filter(key="shared-key-1").count() == 2
