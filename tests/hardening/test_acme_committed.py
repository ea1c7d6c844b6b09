"""``acme_committed`` (conftest.py) puts every table back before each test: what one test
commits, deletes or changes is gone when the next one starts, as when each test built its
own world and Django flushed it after.

The tests run in this order on one worker (``xdist_group``): the first changes the world,
the second finds it as it was built.
"""

import pytest

from contextops.models import ApiKey, Organization
from facts.models import Fact
from frames.models import Session
from tests.hardening.conftest import acme_committed_fixtures

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("acme-committed")]


_django_db_helper, api, acme = acme_committed_fixtures()


def _world(acme) -> dict:
    return {
        "session": Session.objects.filter(pk=acme["ids"]["session_id"]).exists(),
        "facts": sorted(Fact.objects.values_list("key", flat=True)),
        "organizations": sorted(Organization.objects.values_list("name", flat=True)),
        "revoked keys": ApiKey.objects.exclude(revoked_at=None).count(),
    }


BUILT = {
    "session": True,
    "facts": [
        "acme_budget_cap",
        "acme_draft_fact",
        "acme_secret_fact",
        "acme_secret_meeting_day",
        "acme_secret_sync_meeting",
    ],
    "organizations": ["Acme"],
    "revoked keys": 0,
}


def test_a_test_changes_the_world(api, acme, make_api):
    assert _world(acme) == BUILT
    make_api(org="Globex", agent="intruder")
    response = api.post("/facts", {"key": "acme_written_by_a_test", "value": 1, "source": "user"})
    assert response.status_code == 201, response.content
    assert api.delete(f"/sessions/{acme['ids']['session_id']}").status_code == 200
    ApiKey.objects.update(revoked_at=acme["session"].created_at)
    assert _world(acme) != BUILT


def test_the_next_test_finds_the_world_as_it_was_built(api, acme):
    assert _world(acme) == BUILT
    assert api.get(f"/sessions/{acme['ids']['session_id']}").status_code == 200
