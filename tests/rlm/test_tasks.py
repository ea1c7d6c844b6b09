"""The beat sweep removes expired temporary variables, each logged as a mutation."""

from datetime import timedelta

from django.utils import timezone

from frames.rlm import protocol
from frames.rlm.models import RlmMutation, RlmVariable
from frames.rlm.tasks import temporaries_purge_expired


def test_it_purges_expired_temporaries_once_and_logs_each(api):
    state = protocol.state_initialize(organization=api.organization, prompt="Plan the trip")
    protocol.variable_write(
        state=state, name="scratch", value="draft", scope="temporary", ttl_seconds=60
    )
    protocol.variable_write(
        state=state, name="fresh", value="keep", scope="temporary", ttl_seconds=3600
    )
    protocol.variable_write(state=state, name="plan", value="Paris")
    RlmVariable.objects.filter(state=state, name="scratch").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert temporaries_purge_expired() == 1
    assert set(RlmVariable.objects.filter(state=state).values_list("name", flat=True)) == {
        "prompt",
        "fresh",
        "plan",
    }
    assert (
        RlmMutation.objects.filter(
            state=state, variable_name="scratch", source="ttl_expired"
        ).count()
        == 1
    )
    assert temporaries_purge_expired() == 0


def test_the_beat_schedule_names_a_registered_task():
    from contextops import settings as production_settings
    from contextops.celery import app

    scheduled = production_settings.CELERY_BEAT_SCHEDULE["purge-rlm-temporaries"]["task"]
    app.loader.import_default_modules()
    assert scheduled in app.tasks
