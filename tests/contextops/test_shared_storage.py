"""Large values and archives live in a bucket every host reaches, chosen by the environment.

The bucket is moto's standalone S3 server in a subprocess (tests/s3.py), reached over
HTTP by django-storages and boto3 as a real S3-compatible service would be.
"""

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from frames.context import lifecycle
from frames.models import Event, EventArchive, Session
from frames.rlm.models import RlmMutation, RlmVariable
from frames.tasks import events_archive
from tests.frames.test_projections import _busy_session

PROBE = """
import json
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
name = default_storage.save("probe/value.json", ContentFile(b'{"from": "another host"}'))
print(json.dumps({"backend": type(default_storage._wrapped).__module__ + "." + type(default_storage._wrapped).__name__,
                  "name": name, "conn_max_age": settings.DATABASES["default"]["CONN_MAX_AGE"],
                  "health_checks": settings.DATABASES["default"]["CONN_HEALTH_CHECKS"]}))
"""


def _probe(tmp_path, **env) -> dict:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_")
        and k not in {"DJANGO_ALLOW_ASYNC_UNSAFE", "CONN_MAX_AGE", "DATABASE_URL"}
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", PROBE],
        cwd=django_settings.BASE_DIR,
        env={
            **environ,
            "DJANGO_SETTINGS_MODULE": "contextops.settings",
            "CONTEXTOPS_VAR_DIR": str(tmp_path),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_environment_selects_the_bucket_and_a_process_writes_into_it(tmp_path, s3_bucket):
    found = _probe(tmp_path, **s3_bucket.env())
    assert found["backend"] == "storages.backends.s3.S3Storage"
    assert s3_bucket.keys() == [found["name"]] == ["probe/value.json"]
    assert json.loads(s3_bucket.read("probe/value.json")) == {"from": "another host"}
    # Written once, never overwritten: a second value under the same name gets its own key.
    again = _probe(tmp_path, **s3_bucket.env())
    assert again["name"] != "probe/value.json" and len(s3_bucket.keys()) == 2
    assert not (tmp_path / "media").exists()


def test_without_a_bucket_the_embedded_default_is_the_local_media_folder(tmp_path):
    found = _probe(tmp_path, MEDIA_ROOT=str(tmp_path / "media"))
    assert found["backend"] == "django.core.files.storage.filesystem.FileSystemStorage"
    assert (tmp_path / "media" / "probe" / "value.json").read_bytes() == (
        b'{"from": "another host"}'
    )


def test_database_connections_are_reused_on_a_server_and_configurable(tmp_path):
    server = "postgres://nobody@127.0.0.1:1/none"
    assert _probe(tmp_path, DATABASE_URL=server)["conn_max_age"] == 60
    assert _probe(tmp_path, DATABASE_URL=server)["health_checks"] is True
    assert _probe(tmp_path, DATABASE_URL=server, CONN_MAX_AGE="0")["conn_max_age"] == 0
    assert _probe(tmp_path, DATABASE_URL=server, CONN_HEALTH_CHECKS="0")["health_checks"] is False
    # SQLite opens a file: nothing to keep.
    assert _probe(tmp_path)["conn_max_age"] == 0


@pytest.fixture
def bucket_storage(settings, s3_bucket, tmp_path):
    settings.STORAGES = s3_bucket.storages()
    settings.MEDIA_ROOT = tmp_path / "media"
    return s3_bucket


def test_a_50_kb_rlm_value_goes_to_the_bucket_and_reads_back(api, bucket_storage, tmp_path):
    sid = api.post("/rlm/states", {"prompt": "Summarize the logs"}).json()["state_id"]
    big = {"lines": [f"log line {i:05d} " + "x" * 40 for i in range(1000)]}
    written = api.put(f"/rlm/states/{sid}/variables/logs", {"value": big})
    assert written.status_code == 200, written.content
    assert written.json()["in_file"] is True and written.json()["size_bytes"] > 50_000

    row = RlmVariable.objects.get(state__state_id=sid, name="logs")
    assert bucket_storage.keys(f"rlm/{api.organization.pk}/{sid}/") == [row.file_name]
    assert json.loads(bucket_storage.read(row.file_name)) == big
    assert not (tmp_path / "media").exists()

    assert api.get(f"/rlm/states/{sid}/variables/logs").json()["value"] == big
    api.put(f"/rlm/states/{sid}/variables/logs", {"value": "short now"})
    assert RlmMutation.objects.filter(state__state_id=sid, old_file=row.file_name).exists()
    log = api.get(f"/rlm/states/{sid}/mutations", {"after": 2}).json()
    assert log[0]["old_value"] == big and log[0]["new_value"] == "short now"
    exported = api.get(f"/rlm/states/{sid}/export").json()
    assert json.dumps(big) in json.dumps(exported)


def test_archived_events_go_to_the_bucket_and_rebuild_projections_reads_them(
    api, bucket_storage, settings, capsys
):
    settings.CONTEXTOPS_EVENT_RETENTION_DAYS = 7
    session, _ = _busy_session(api)
    lifecycle.session_end(session=session)
    Session.objects.filter(pk=session.pk).update(ended_at=timezone.now() - timedelta(days=8))
    before = api.get(f"/sessions/{session.pk}/events").json()

    assert events_archive() == 1

    archive = EventArchive.objects.get(session=session)
    assert bucket_storage.keys("events/") == [archive.file_name]
    lines = bucket_storage.read(archive.file_name).decode().splitlines()
    assert len(lines) == len(before) and not Event.objects.filter(session=session).exists()
    assert api.get(f"/sessions/{session.pk}/events").json() == before
    call_command("rebuild_projections", "--verify", "--session", str(session.pk))
    assert "match the event log" in capsys.readouterr().out
    # An archive the bucket lost fails the check, naming the session; nothing is rebuilt.
    bucket_storage.server.client().delete_object(Bucket=bucket_storage.name, Key=archive.file_name)
    with pytest.raises(CommandError, match="1 difference"):
        call_command("rebuild_projections", "--verify", "--session", str(session.pk))
    assert f"session {session.pk}: its archived events cannot be read" in capsys.readouterr().out


def test_a_sessions_export_holds_its_files_and_its_delete_removes_them(
    api, bucket_storage, settings, django_capture_on_commit_callbacks
):
    """What retention and the RLM limits moved to the bucket is still the session's: the
    export holds it (archived events, values in files) and the delete removes it, leaving
    another session's files alone."""
    settings.CONTEXTOPS_EVENT_RETENTION_DAYS = 7
    big = {"lines": [f"log line {i:05d} " + "x" * 40 for i in range(1000)]}
    sessions, states = [], []
    for title in ("gone", "kept"):
        session, _ = _busy_session(api)
        state = api.post("/rlm/states", {"prompt": title, "session_id": str(session.pk)})
        assert state.status_code == 201, state.content
        states.append(state.json()["state_id"])
        written = api.put(f"/rlm/states/{states[-1]}/variables/logs", {"value": big})
        assert written.json()["in_file"] is True, written.content
        lifecycle.session_end(session=session)
        sessions.append(session)
    Session.objects.update(ended_at=timezone.now() - timedelta(days=8))
    events = api.get(f"/sessions/{sessions[0].pk}/events").json()
    assert events_archive() == 2
    assert not Event.objects.filter(session=sessions[0]).exists()

    exported = api.get(f"/sessions/{sessions[0].pk}/export").json()
    assert [e["seq"] for e in exported["events"]] == [e["seq"] for e in events]
    assert [e["type"] for e in exported["events"]] == [e["type"] for e in events]
    (state,) = exported["rlm_states"]
    (logs,) = [v for v in state["variables"] if v["name"] == "logs"]
    assert logs["value"] == big
    assert [m["new_value"] for m in state["mutations"] if m["variable_name"] == "logs"] == [big]

    org = api.organization.pk
    gone = [f"events/{org}/{sessions[0].pk}/", f"rlm/{org}/{states[0]}/"]
    kept = [f"events/{org}/{sessions[1].pk}/", f"rlm/{org}/{states[1]}/"]
    assert all(len(bucket_storage.keys(prefix)) == 1 for prefix in gone + kept)
    with django_capture_on_commit_callbacks(execute=True):
        deleted = api.delete(f"/sessions/{sessions[0].pk}")
    assert deleted.status_code == 200, deleted.content
    assert deleted.json()["deleted"]["storage.file"] == 2
    assert [bucket_storage.keys(prefix) for prefix in gone] == [[], []]
    assert all(len(bucket_storage.keys(prefix)) == 1 for prefix in kept)
    assert api.get(f"/sessions/{sessions[1].pk}/export").json()["rlm_states"][0]["variables"]
