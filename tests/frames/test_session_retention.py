"""The retention of whole sessions: a session ended more than
``CONTEXTOPS_SESSION_RETENTION_DAYS`` ago is deleted as ``DELETE /sessions/{id}`` would
delete it, files included, and the deletion is audited with the actor "retention"."""

from datetime import timedelta

from django.core.files.storage import default_storage
from django.utils import timezone

from contextops import settings as production_settings
from contextops.celery import app
from contextops.models import AuditEntry
from frames.context import lifecycle
from frames.models import Event, Frame, Session, Usage
from frames.ownership.services import sessions_delete_expired
from frames.ownership.tasks import sessions_delete_expired as sessions_delete_expired_task
from frames.rlm.models import RlmState
from tests.frames.test_projections import _busy_session
from tests.frames.test_retention import _ended_long_ago
from tests.waiting import wait_until


def test_zero_days_the_default_keeps_every_session_forever(api, settings):
    assert production_settings.CONTEXTOPS_SESSION_RETENTION_DAYS == 0
    settings.CONTEXTOPS_SESSION_RETENTION_DAYS = 0
    session, _ = _ended_long_ago(api, days=3650)
    assert sessions_delete_expired_task() == 0
    assert Session.objects.filter(pk=session.pk).exists()


def test_a_session_past_retention_goes_whole_and_the_rest_stay(
    api, other_api, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.MEDIA_ROOT = tmp_path
    settings.CONTEXTOPS_SESSION_RETENTION_DAYS = 30
    old, _ = _busy_session(api)
    state = api.post("/rlm/states", {"prompt": "old work", "session_id": str(old.pk)})
    state_id = state.json()["state_id"]
    big = {"lines": ["x" * 60] * 1000}
    assert api.put(f"/rlm/states/{state_id}/variables/logs", {"value": big}).json()["in_file"]
    file_name = RlmState.objects.get(state_id=state_id).variables.get(name="logs").file_name
    assert default_storage.exists(file_name)
    lifecycle.session_end(session=old)
    Session.objects.filter(pk=old.pk).update(ended_at=timezone.now() - timedelta(days=31))
    recent, _ = _ended_long_ago(api, days=29)
    still_open, _ = _busy_session(api)
    theirs, _ = _ended_long_ago(other_api, days=45)

    with django_capture_on_commit_callbacks(execute=True):
        deleted = sessions_delete_expired()

    assert sorted(deleted) == sorted([str(theirs.pk), str(old.pk)])
    assert deleted[0] == str(theirs.pk)  # the longest ended first
    remaining = set(Session.objects.values_list("pk", flat=True))
    assert remaining == {recent.pk, still_open.pk}
    for model in (Frame, Event, Usage):
        assert not model.objects.filter(session_id__in=[old.pk, theirs.pk]).exists(), model
    assert not RlmState.objects.filter(state_id=state_id).exists()
    assert not default_storage.exists(file_name)
    audited = AuditEntry.objects.filter(action=AuditEntry.Action.SESSION_DELETED)
    assert sorted(audited.values_list("actor", "target")) == sorted(
        ("retention", f"session {pk}") for pk in (old.pk, theirs.pk)
    )
    assert sessions_delete_expired() == []  # a second run finds nothing left to delete


def test_beat_runs_the_job_on_a_real_worker(api, celery_worker, settings):
    # The suite's settings schedule nothing; production's beat runs the job hourly.
    entry = production_settings.CELERY_BEAT_SCHEDULE["delete-expired-sessions"]
    assert entry["task"] == "frames.sessions_delete_expired" and entry["task"] in app.tasks
    assert entry["schedule"] == 3600.0
    settings.CONTEXTOPS_SESSION_RETENTION_DAYS = 30
    session, _ = _ended_long_ago(api, days=31)

    app.send_task(entry["task"])

    wait_until(lambda: not Session.objects.filter(pk=session.pk).exists(), what="the job")
    assert AuditEntry.objects.filter(actor="retention", target=f"session {session.pk}").exists()
