"""The working-set expiry job: called directly, scheduled by beat, and run on a real worker."""

from datetime import timedelta

import pytest
from django.utils import timezone

from facts.models import WorkingSetItem
from facts.tasks import working_set_expire
from frames.models import Session
from tests.waiting import wait_until


def _items(api):
    session = Session.objects.create(
        organization=api.organization, identity={"authority": "employee"}
    )
    past = timezone.now() - timedelta(seconds=5)
    WorkingSetItem.objects.create(session=session, key="old", value=1, expires_at=past)
    WorkingSetItem.objects.create(
        session=session, key="later", value=2, expires_at=timezone.now() + timedelta(hours=1)
    )
    WorkingSetItem.objects.create(session=session, key="forever", value=3)
    return session


def test_it_is_scheduled_by_beat():
    # The test settings switch beat off; the production settings module schedules the job.
    from contextops import settings as production

    schedule = {entry["task"] for entry in production.CELERY_BEAT_SCHEDULE.values()}
    assert "facts.tasks.working_set_expire" in schedule
    assert working_set_expire.name == "facts.tasks.working_set_expire"


def test_it_deletes_only_expired_items(api):
    _items(api)
    assert working_set_expire() == 1
    assert sorted(WorkingSetItem.objects.values_list("key", flat=True)) == ["forever", "later"]
    assert working_set_expire() == 0  # idempotent


@pytest.mark.django_db(transaction=True)
def test_it_runs_on_a_real_worker(api, celery_worker):
    _items(api)
    working_set_expire.delay()
    wait_until(lambda: not WorkingSetItem.objects.filter(key="old").exists(), what="the job")
    assert sorted(WorkingSetItem.objects.values_list("key", flat=True)) == ["forever", "later"]
