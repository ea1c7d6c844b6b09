"""The event log's retention: ended sessions' events move to the storage, projections stay."""

import json
from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command
from django.utils import timezone

from contextops import settings as production_settings
from contextops.celery import app
from frames.archive import events_archive_due, session_archive
from frames.context import lifecycle
from frames.models import Event, EventArchive, Frame, Session
from frames.projections import projection_diff
from frames.selectors import frame_events_newest_first
from frames.tasks import events_archive
from tests.frames.test_projections import _busy_session
from tests.waiting import wait_until


def _ended_long_ago(api, days: int = 120):
    session, root = _busy_session(api)
    lifecycle.session_end(session=session)
    Session.objects.filter(pk=session.pk).update(ended_at=timezone.now() - timedelta(days=days))
    session.refresh_from_db()
    return session, root


def _events_json(api, session_id, **params):
    response = api.get(f"/sessions/{session_id}/events", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_the_task_archives_an_ended_sessions_events_and_verify_still_finds_no_difference(
    api, settings, capsys
):
    settings.CONTEXTOPS_EVENT_RETENTION_DAYS = 90
    session, root = _ended_long_ago(api)
    before = _events_json(api, session.pk)
    frames_before = list(Frame.objects.filter(session=session).order_by("pk").values())
    assert len(before) > 20

    assert events_archive() == 1

    # The table no longer holds them; one archive file does, as JSON Lines.
    assert not Event.objects.filter(session=session).exists()
    archive = EventArchive.objects.get(session=session)
    assert (archive.first_seq, archive.last_seq, archive.events) == (1, len(before), len(before))
    with default_storage.open(archive.file_name, "rb") as handle:
        lines = handle.read().decode().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [e["seq"] for e in before]
    assert json.loads(lines[-1])["type"] == "session.ended"
    # Projections are kept as they were.
    assert list(Frame.objects.filter(session=session).order_by("pk").values()) == frames_before
    # The log reads back the same through the API, and rebuild_projections reads the archive.
    assert _events_json(api, session.pk) == before
    assert _events_json(api, session.pk, after=3, limit=5) == before[3:8]
    assert _events_json(api, session.pk, frame_id=str(root.pk)) == [
        e for e in before if e["frame_id"] == str(root.pk)
    ]
    assert projection_diff(session) == []
    call_command("rebuild_projections", "--verify", "--session", str(session.pk))
    assert "match the event log" in capsys.readouterr().out
    # A second run finds nothing left to move.
    assert events_archive() == 0
    assert EventArchive.objects.filter(session=session).count() == 1


def test_a_tampered_row_of_an_archived_session_is_found_and_rebuilt_from_the_archive(api, capsys):
    session, root = _ended_long_ago(api)
    expected = Frame.objects.get(pk=root.pk).budget_used
    assert session_archive(session) is not None
    Frame.objects.filter(pk=root.pk).update(budget_used=expected + 5)
    with pytest.raises(CommandError):
        call_command("rebuild_projections", "--verify", "--session", str(session.pk))
    assert f"budget_used: table has {expected + 5}, events say {expected}" in (
        capsys.readouterr().out
    )
    call_command("rebuild_projections", "--session", str(session.pk))
    assert Frame.objects.get(pk=root.pk).budget_used == expected


def test_open_and_recently_ended_sessions_keep_their_events(api, settings):
    settings.CONTEXTOPS_EVENT_RETENTION_DAYS = 90
    open_session, _ = _busy_session(api)
    recent, _ = _ended_long_ago(api, days=10)
    old, _ = _ended_long_ago(api, days=91)

    archived = events_archive_due()

    assert [item.session_id for item in archived] == [str(old.pk)]
    assert Event.objects.filter(session=open_session).exists()
    assert Event.objects.filter(session=recent).exists()
    assert not Event.objects.filter(session=old).exists()


def test_zero_days_keeps_every_event_forever(api, settings):
    settings.CONTEXTOPS_EVENT_RETENTION_DAYS = 0
    session, _ = _ended_long_ago(api, days=3650)
    assert events_archive() == 0
    assert Event.objects.filter(session=session).exists()
    assert not EventArchive.objects.exists()


def test_beat_runs_the_retention_job_on_a_real_worker(api, celery_worker, settings):
    # The suite's settings schedule nothing; production's beat runs the job hourly.
    entry = production_settings.CELERY_BEAT_SCHEDULE["archive-ended-session-events"]
    assert entry["task"] == "frames.events_archive" and entry["task"] in app.tasks
    settings.CONTEXTOPS_EVENT_RETENTION_DAYS = 30
    session, _ = _ended_long_ago(api, days=31)

    app.send_task(entry["task"])

    wait_until(lambda: not Event.objects.filter(session=session).exists(), what="the job")
    assert EventArchive.objects.filter(session=session).count() == 1
    assert projection_diff(session) == []


def test_the_pages_of_an_archived_session_still_show_its_events(api, member_client):
    session, root = _ended_long_ago(api)
    assert session_archive(session) is not None

    page = member_client.get(f"/sessions/{session.pk}/")
    assert page.status_code == 200
    assert "session.ended" in page.content.decode() and "No events." not in page.content.decode()
    frame_page = member_client.get(f"/frames/{root.pk}/")
    assert frame_page.status_code == 200
    assert "frame.pushed" in frame_page.content.decode()


def test_the_frame_page_of_an_archived_session_lists_its_events_newest_first(api, member_client):
    session, root = _ended_long_ago(api)
    events = [e for e in _events_json(api, session.pk) if e["frame_id"] == str(root.pk)]
    assert session_archive(session) is not None

    page = member_client.get(f"/frames/{root.pk}/").content.decode()
    shown = page[page.index("<h2>Events</h2>") :]
    assert f"All {len(events)}, newest first" in shown
    assert shown.index(f"#{events[-1]['seq']} ") < shown.index(f"#{events[0]['seq']} ")


def test_a_frames_pages_of_events_are_the_same_once_its_session_is_archived(api):
    session, root = _ended_long_ago(api)
    seqs = [e.seq for e in Event.objects.filter(frame_id=root.pk).order_by("seq")]
    assert len(seqs) > 4

    def pages():
        found = [
            frame_events_newest_first(frame=root, limit=2, before=before)
            for before in (None, -1, 0, *seqs, seqs[-1] + 1, 10**9)
        ]
        return [
            ([e.seq for e in p.events], p.count, p.newer, p.before, p.newer_before) for p in found
        ]

    in_the_log = pages()
    assert session_archive(session) is not None
    assert not Event.objects.filter(frame_id=root.pk).exists()
    assert pages() == in_the_log


def test_a_missing_archive_file_fails_the_check_and_rebuilds_nothing(api, capsys):
    session, root = _ended_long_ago(api)
    archived = session_archive(session)
    assert archived is not None
    default_storage.delete(archived.file_name)
    Frame.objects.filter(pk=root.pk).update(budget_used=12345)

    with pytest.raises(CommandError, match="1 difference"):
        call_command("rebuild_projections", "--verify", "--session", str(session.pk))
    assert "its archived events cannot be read" in capsys.readouterr().out
    with pytest.raises(CommandError, match="cannot be read were left as they are"):
        call_command("rebuild_projections", "--session", str(session.pk))
    assert Frame.objects.get(pk=root.pk).budget_used == 12345  # not rebuilt from half a log
