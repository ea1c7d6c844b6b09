"""Seed 003's stale, offline and recover: the periodic check and loading on page-in."""

from datetime import timedelta

import pytest
from django.utils import timezone

from frames.context.freshness import resources_check
from frames.context.tasks import resources_check as resources_check_task
from frames.models import ContextHandle, Event
from tests.waiting import wait_until


@pytest.fixture
def roots(settings, tmp_path):
    settings.CONTEXTOPS_RESOURCE_ROOTS = [str(tmp_path)]
    return tmp_path


def moves(handle):
    return [
        (e.payload["from"], e.payload["to"], e.payload["trigger"])
        for e in Event.objects.filter(type="handle.state_changed").order_by("seq")
        if e.payload["handle_id"] == str(handle.pk)
    ]


def test_an_indexed_resource_not_accessed_for_long_goes_stale(frame, make_handle, settings):
    settings.CONTEXTOPS_RESOURCE_STALE_SECONDS = 3600
    old = timezone.now() - timedelta(hours=2)
    stale = make_handle(
        frame,
        "",
        tokens=400,
        ref="wiki/oncall",
        state="indexed",
        summary="S.",
        summary_tokens=1,
        last_access_at=old,
    )
    recent = make_handle(frame, "", tokens=400, ref="wiki/deploy", state="indexed", summary="S.")
    compacted = make_handle(frame, "Kept in the database.", state="indexed", last_access_at=old)

    assert resources_check_task() == {"stale": 1, "offline": 0, "recovered": 0}
    stale.refresh_from_db()
    assert (stale.state, stale.summary, stale.summary_tokens) == ("cold", "", 0)
    assert moves(stale) == [("indexed", "cold", "stale")]
    recent.refresh_from_db()
    compacted.refresh_from_db()
    assert recent.state == compacted.state == "indexed"  # not old / not a resource
    assert resources_check().stale == 0  # a second pass moves nothing


def test_an_unreachable_resource_goes_offline_and_recovers(roots, frame, make_handle):
    (roots / "notes.md").write_text("Notes.")
    cold = make_handle(frame, "", tokens=5, ref="file:notes.md", state="cold")
    opaque = make_handle(frame, "", tokens=5, ref="https://example.invalid/x", state="cold")
    assert resources_check() == resources_check().__class__(0, 0, 0)

    (roots / "notes.md").unlink()
    assert resources_check().offline == 1
    cold.refresh_from_db()
    opaque.refresh_from_db()
    assert (cold.state, opaque.state) == ("offline", "cold")

    (roots / "notes.md").write_text("Notes again.")
    assert resources_check().recovered == 1
    cold.refresh_from_db()
    assert cold.state == "cold"
    assert moves(cold) == [("cold", "offline", "error"), ("offline", "cold", "recover")]


def test_page_in_loads_a_cold_file_resource(api, roots, frame, make_handle):
    (roots / "guide.md").write_text("Step one. Step two.")
    handle = make_handle(frame, "", tokens=0, ref="file:guide.md", state="cold")
    response = api.post(f"/handles/{handle.id}/page-in?mode=full")
    assert response.status_code == 200, response.content
    assert response.json()["content"] == "Step one. Step two."
    handle.refresh_from_db()
    assert handle.state == "loaded" and handle.content == "Step one. Step two."
    assert handle.estimated_tokens > 0


@pytest.mark.parametrize("ref", ["file:missing.md", "file:../outside.md", "file:///etc/hostname"])
def test_a_load_error_takes_the_resource_offline_until_recovered(
    api, roots, frame, make_handle, ref
):
    handle = make_handle(frame, "", tokens=0, ref=ref, state="cold")
    response = api.post(f"/handles/{handle.id}/page-in")
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "resource_offline" and body["state"] == "offline"
    handle.refresh_from_db()
    assert handle.state == "offline" and handle.content == ""
    assert moves(handle)[-1][1:] == ("offline", "error")

    recovered = api.post(f"/handles/{handle.id}/state", {"to": "cold"})
    assert recovered.status_code == 200 and recovered.json()["state"] == "cold"


def test_an_opaque_ref_pages_in_as_before(api, settings, frame, make_handle):
    settings.CONTEXTOPS_RESOURCE_ROOTS = []
    handle = make_handle(frame, "", tokens=3, ref="file:anything.md", state="cold")
    response = api.post(f"/handles/{handle.id}/page-in?mode=full")
    assert response.status_code == 200
    assert response.json()["content"] == "file:anything.md"


@pytest.mark.django_db(transaction=True)
def test_the_check_runs_on_a_real_worker(celery_worker, frame, make_handle, settings):
    settings.CONTEXTOPS_RESOURCE_STALE_SECONDS = 60
    handle = make_handle(
        frame,
        "",
        ref="wiki/a",
        state="indexed",
        summary="S.",
        last_access_at=timezone.now() - timedelta(hours=1),
    )
    resources_check_task.delay()
    wait_until(lambda: ContextHandle.objects.get(pk=handle.pk).state == "cold", what="the job")
    assert ContextHandle.objects.get(pk=handle.pk).summary == ""
