"""Approvals reach people: a suspension that needs approval is delivered, signed, to a
webhook and to a Slack-compatible receiver by a real Celery worker, retried until it
lands, decided and delivered again; e-mail goes through Django's outbox."""

import time
from datetime import datetime, timedelta

import pytest
from django.core import mail
from django.test import Client, override_settings

from contextops.notifications import messages
from contextops.notifications.models import Delivery, Destination
from contextops.notifications.sending import delivery_attempt
from contextops.notifications.services import destination_create, notify
from frames.models import token_hash
from frames.services.expiry import suspensions_expire
from frames.suspensions.notices import approvals_expiring_notify
from tests.notifications.receivers import Receiver


def _until(check, timeout: float = 30.0):
    """Poll ``check`` until it is true (the worker runs on its own threads)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("the worker did not deliver in time")


def _suspended(api, start_session, push_ok, suspend_ok, **body):
    session = start_session()
    frame = push_ok(session["id"], 5000, goal="Refund order 1234")
    return frame, suspend_ok(
        frame["id"], reason="Refund over 500 EUR", requires_approval=True, **body
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.xdist_group("live")
@override_settings(CONTEXTOPS_NOTIFY_RETRY_SECONDS=0, CONTEXTOPS_PUBLIC_URL="https://ops.example")
def test_a_suspension_is_delivered_signed_to_a_webhook_and_to_slack_retried_until_it_lands(
    celery_worker, api, start_session, push_ok, suspend_ok, make_user
):
    with Receiver(500, 200) as hook, Receiver() as slack:
        webhook, secret = destination_create(
            organization=api.organization, name="ops hook", kind="webhook", url=hook.url
        )
        destination_create(
            organization=api.organization, name="#approvals", kind="slack", url=slack.url
        )
        frame, suspension = _suspended(api, start_session, push_ok, suspend_ok)

        _until(lambda: Delivery.objects.filter(status="delivered").count() == 2)
        # the webhook answered 500 once, then 200: two attempts, the last answer kept
        pending = Delivery.objects.get(destination=webhook)
        assert (pending.event, pending.attempts, pending.response_code) == (
            "approval.pending",
            2,
            200,
        )
        assert hook.answers == [500, 200]
        body = hook.received[-1]
        assert messages.signature_valid(secret, body.headers["X-Contextops-Signature"], body.body)
        assert not messages.signature_valid(
            "whsec_other", body.headers["X-Contextops-Signature"], body.body
        )
        assert body.headers["X-Contextops-Event"] == "approval.pending"
        data = body.json()["data"]
        assert data["frame"]["goal"] == "Refund order 1234"
        assert data["frame"]["budget"]["total"] == 5000
        assert data["suspension"]["reason"] == "Refund over 500 EUR"
        assert data["suspension"]["requested_by"].startswith("agent:")
        assert data["link"] == f"https://ops.example/inbox/#frame-{frame['id']}"
        # Slack: the goal, who asks, the budget and the link to the card
        text = slack.received[0].json()["text"]
        assert "Approval needed" in text and "Goal: Refund order 1234" in text
        assert "Asked by: agent:" in text and "Budget: 0 of 5,000 tokens used" in text
        assert f"https://ops.example/inbox/#frame-{frame['id']}" in text

        approver = Client()
        approver.force_login(make_user(username="grace", approver=True))
        hashed = token_hash(suspension["token"])
        response = approver.post(f"/inbox/{frame['id']}/{hashed}/approve/", {"note": "fine by me"})
        assert response.status_code in (200, 302)
        _until(lambda: Delivery.objects.filter(status="delivered").count() == 4)
        decided = [r for r in hook.received if r.json()["event"] == "approval.decided"]
        assert len(decided) == 1
        assert messages.signature_valid(
            secret, decided[0].headers["X-Contextops-Signature"], decided[0].body
        )
        assert decided[0].json()["data"]["suspension"]["status"] == "approved"
        assert decided[0].json()["data"]["suspension"]["decided_by"] == "grace"
        assert "Decision: approved by grace" in slack.received[-1].json()["text"]

        # the Deliveries page shows each one, with its attempts
        admin = Client()
        admin.force_login(make_user(username="root", admin=True))
        page = admin.get("/notifications/deliveries/").content.decode()
        assert page.count('data-status="delivered"') == 4
        assert "approval.pending" in page and "approval.decided" in page


@pytest.mark.django_db
def test_email_goes_to_the_approvers_through_django_mail(make_user, api):
    grace = make_user(username="grace", approver=True)
    grace.email = "grace@example.com"
    grace.save()
    make_user(username="ada")  # a member, not an approver: no mail
    make_user(username="eve", org="Globex", approver=True)  # another organization's
    destination, secret = destination_create(
        organization=api.organization, name="approvers", kind="email"
    )
    assert secret == ""
    (delivery,) = notify(
        organization=api.organization,
        event="approval.pending",
        key="k1",
        data={"frame": {"goal": "Ship it"}, "suspension": {"requested_by": "agent:bot"}},
    )
    assert delivery_attempt(delivery_id=str(delivery.pk)).status == "delivered"
    (sent,) = mail.outbox
    assert sent.to == ["grace@example.com"]
    assert sent.subject == "Approval needed: Ship it"
    assert "Asked by: agent:bot" in sent.body


@pytest.mark.django_db
@override_settings(CONTEXTOPS_NOTIFY_MAX_ATTEMPTS=2, CONTEXTOPS_NOTIFY_RETRY_SECONDS=10)
def test_a_receiver_that_keeps_failing_fails_after_the_last_attempt_with_backoff(api):
    with Receiver(500, 503) as hook:
        destination_create(organization=api.organization, name="h", kind="webhook", url=hook.url)
        (delivery,) = notify(
            organization=api.organization, event="approval.pending", key="x", data={}
        )
        first = delivery_attempt(delivery_id=str(delivery.pk))
        assert (first.status, first.retry_in) == ("pending", 10)
        second = delivery_attempt(delivery_id=str(delivery.pk))
        assert (second.status, second.retry_in) == ("failed", None)
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.response_code) == (2, 503)
    assert "answered 503" in delivery.last_error
    # a failed delivery is not tried again
    assert delivery_attempt(delivery_id=str(delivery.pk)).status == "failed"


@pytest.mark.django_db
def test_an_unreachable_receiver_is_an_error_recorded_not_a_crash(api):
    with Receiver() as hook:
        url = hook.url
    destination_create(organization=api.organization, name="gone", kind="webhook", url=url)
    (delivery,) = notify(organization=api.organization, event="approval.expired", key="y", data={})
    assert delivery_attempt(delivery_id=str(delivery.pk)).status == "pending"
    delivery.refresh_from_db()
    assert delivery.response_code is None and "not delivered" in delivery.last_error


@pytest.mark.django_db
def test_only_the_events_a_destination_lists_are_sent_and_each_once(api):
    hook, _ = destination_create(
        organization=api.organization,
        name="decisions only",
        kind="webhook",
        url="http://127.0.0.1:9/x",
        events=["approval.decided"],
    )
    assert notify(organization=api.organization, event="approval.pending", key="a", data={}) == []
    assert (
        len(notify(organization=api.organization, event="approval.decided", key="a", data={})) == 1
    )
    assert notify(organization=api.organization, event="approval.decided", key="a", data={}) == []
    Destination.objects.filter(pk=hook.pk).update(active=False)
    assert notify(organization=api.organization, event="approval.decided", key="b", data={}) == []


@pytest.mark.django_db
def test_an_approval_about_to_expire_is_announced_once_by_the_sweep(
    api, start_session, push_ok, suspend_ok
):
    destination_create(
        organization=api.organization, name="h", kind="webhook", url="http://127.0.0.1:9/x"
    )
    frame, suspension = _suspended(api, start_session, push_ok, suspend_ok, expires_in_seconds=7200)
    expires_at = datetime.fromisoformat(suspension["expires_at"])
    # the sweep and the expiry job take the time they run at
    assert approvals_expiring_notify(now=expires_at - timedelta(minutes=90)) == 0  # not yet
    assert approvals_expiring_notify(now=expires_at - timedelta(minutes=59)) == 1
    assert approvals_expiring_notify(now=expires_at - timedelta(minutes=58)) == 0  # once
    expiring = Delivery.objects.get(event="approval.expiring")
    assert expiring.payload["frame"]["id"] == frame["id"]
    assert suspensions_expire(now=expires_at + timedelta(seconds=1)) == 1
    assert Delivery.objects.filter(event="approval.expired").count() == 1


@pytest.mark.django_db
def test_a_suspension_without_approval_notifies_nobody(api, start_session, push_ok, suspend_ok):
    destination_create(
        organization=api.organization, name="h", kind="webhook", url="http://127.0.0.1:9/x"
    )
    session = start_session()
    frame = push_ok(session["id"], 1000)
    suspend_ok(frame["id"], reason="waiting on a file")
    assert not Delivery.objects.exists()
