"""The expiry job, and decisions racing with expiry, with each other and with a long poll."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from contextops.errors import Conflict, Gone
from contextops.waits import wait_slots
from frames.models import Event, Frame, Suspension
from frames.services import expiry
from frames.suspensions import services as suspensions
from frames.suspensions.tasks import suspensions_expire
from tests.conftest import postgres_only
from tests.waiting import wait_until


def _overdue(token):
    Suspension.objects.filter(pk=token).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_it_marks_overdue_suspensions_expired_once(api, tree, suspend_ok, push_ok, verify_log):
    overdue = suspend_ok(tree["child"]["id"], requires_approval=True)["token"]
    sibling = push_ok(tree["session"]["id"], 500, parent=tree["root"]["id"])
    fresh = suspend_ok(sibling["id"])["token"]
    _overdue(overdue)
    assert suspensions_expire() == 1
    assert suspensions_expire() == 0
    assert Suspension.objects.get(pk=overdue).status == "expired"
    assert Suspension.objects.get(pk=fresh).status == "pending"
    event = Event.objects.get(type="suspension.expired")
    assert event.payload["token_hash"] == suspensions.token_hash(overdue)
    assert overdue not in str(event.payload)
    # Issue 19: the expired suspension fails its frame, settled with its parent as a pop.
    frame = Frame.objects.get(pk=tree["child"]["id"])
    assert (frame.status, frame.failure_reason) == ("failed", "suspension_expired")
    root = Frame.objects.get(pk=tree["root"]["id"])
    assert root.subcall_allocation == 500  # only the fresh sibling's total is still delegated
    response = api.post(f"/suspensions/{overdue}/resume")
    assert response.status_code == 410 and response.json()["error"] == "suspension_expired"
    verify_log()


def test_it_expires_approved_but_unused_tokens(api, tree, suspend_ok, make_user):
    token = suspend_ok(tree["child"]["id"], requires_approval=True)["token"]
    suspensions.suspension_approve(
        suspension=Suspension.objects.get(pk=token), user=make_user(approver=True)
    )
    _overdue(token)
    assert suspensions_expire() == 1
    assert api.post(f"/suspensions/{token}/resume").status_code == 410


def test_it_leaves_decided_and_resumed_suspensions_alone(api, tree, suspend_ok):
    token = suspend_ok(tree["child"]["id"])["token"]
    api.post(f"/suspensions/{token}/resume")
    _overdue(token)
    assert suspensions_expire() == 0
    assert Suspension.objects.get(pk=token).status == "resumed"


@pytest.mark.django_db(transaction=True)
def test_it_expires_through_a_real_worker(celery_worker, api, start_session, push_ok, suspend_ok):
    session = start_session()
    frame = push_ok(session["id"], 1_000)
    token = suspend_ok(frame["id"])["token"]
    _overdue(token)
    suspensions_expire.delay()
    wait_until(lambda: Suspension.objects.get(pk=token).status == "expired", what="the job")


def _threaded(work):
    def run(*args):
        try:
            return work(*args)
        finally:
            connection.close()

    return run


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_it_ends_a_long_poll_as_soon_as_a_person_approves(
    api, start_session, push_ok, suspend_ok, make_user
):
    session = start_session()
    frame = push_ok(session["id"], 1_000)
    token = suspend_ok(frame["id"], requires_approval=True)["token"]
    grace = make_user(username="grace", approver=True)

    def approve_once_the_poll_waits():
        wait_until(lambda: wait_slots._total > 0, what="the long poll to wait")
        suspensions.suspension_approve(suspension=Suspension.objects.get(pk=token), user=grace)
        return time.monotonic()

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_threaded(approve_once_the_poll_waits))
        response = api.get(f"/suspensions/{token}", {"wait": "20"})
        answered = time.monotonic()
        approved = pending.result(timeout=30)
    assert response.json()["status"] == "approved"
    assert approved <= answered < approved + 3  # the next look, not the end of the wait


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_it_resumes_once_when_two_agents_race_with_one_token(
    api, start_session, push_ok, suspend_ok
):
    session = start_session()
    frame = push_ok(session["id"], 1_000)
    token = suspend_ok(frame["id"])["token"]
    barrier = threading.Barrier(8)

    def resume(_):
        barrier.wait(timeout=30)
        try:
            suspensions.suspension_resume(
                suspension=Suspension.objects.get(pk=token), actor="agent:racer"
            )
            return "resumed"
        except Conflict as exc:
            return exc.code

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(_threaded(resume), range(8)))
    assert outcomes.count("resumed") == 1
    assert outcomes.count("token_used") == 7
    assert Event.objects.filter(type="frame.resumed").count() == 1


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_it_settles_approve_racing_with_expiry_one_way(
    api, start_session, push_ok, suspend_ok, make_user
):
    session = start_session()
    grace = make_user(username="grace", approver=True)
    for attempt in range(6):
        frame = push_ok(session["id"], 100)
        token = suspend_ok(frame["id"], requires_approval=True)["token"]
        # Half the rounds already overdue when both start, half still in time.
        late = timedelta(seconds=-1 if attempt % 2 else 60)
        Suspension.objects.filter(pk=token).update(expires_at=timezone.now() + late)
        outcome = _race_approve_with_expiry(token, grace)
        final = Suspension.objects.get(pk=token)
        events = list(
            Event.objects.filter(frame_id=frame["id"], type__startswith="suspension.")
            .order_by("seq")
            .values_list("type", flat=True)
        )
        if final.status == "approved":
            assert outcome == "approved" and events == ["suspension.approved"]
        else:
            # Expired, possibly after an approval that came in time: never approved after expiry.
            assert final.status == "expired"
            assert events[-1] == "suspension.expired" and events.count("suspension.expired") == 1


def _race_approve_with_expiry(token, user):
    barrier = threading.Barrier(2)

    def approve():
        barrier.wait(timeout=30)
        try:
            suspensions.suspension_approve(suspension=Suspension.objects.get(pk=token), user=user)
            return "approved"
        except Gone:
            return "expired"

    def expire():
        barrier.wait(timeout=30)
        return expiry.suspensions_expire()

    with ThreadPoolExecutor(2) as pool:
        approved = pool.submit(_threaded(approve))
        expired = pool.submit(_threaded(expire))
        expired.result(timeout=30)
        return approved.result(timeout=30)


def test_the_session_ending_expires_its_tokens_before_the_job_runs(
    api, tree, suspend_ok, verify_log
):
    token = suspend_ok(tree["child"]["id"], requires_approval=True)["token"]
    assert api.post(f"/sessions/{tree['session']['id']}/end").status_code == 200
    assert suspensions_expire() == 0  # nothing left for the job: the end expired it
    assert api.get(f"/suspensions/{token}").json()["status"] == "expired"
    assert Event.objects.get(type="suspension.expired").payload["reason"] == "frame_closed"
    assert api.post(f"/suspensions/{token}/resume").status_code == 410
    verify_log()


def test_it_registers_the_task_the_beat_schedule_names():
    from contextops import settings as production_settings  # the test settings empty the schedule
    from contextops.celery import app

    scheduled = production_settings.CELERY_BEAT_SCHEDULE["expire-suspensions"]["task"]
    app.loader.import_default_modules()
    assert scheduled == "frames.tasks.suspensions_expire"
    assert scheduled in app.tasks
