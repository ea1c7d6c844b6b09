"""A short load run in CI: concurrent agents on the live server, then nothing lost.

`make load` is the long version (50 agents on gunicorn, PostgreSQL and Redis).
"""

import asyncio

import pytest

from contextops.tenancy import api_key_create
from frames.models import Session
from frames.projections import budget_audit, projection_diff
from tests.load.agents import run_load

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]


def test_concurrent_agents_get_no_errors_and_every_sum_holds(live_server):
    keys = [api_key_create(org_name=f"Load {i % 2}", agent_name=f"agent-{i}")[1] for i in range(8)]
    result = asyncio.run(run_load(base_url=live_server.url, keys=keys, seconds=4))
    print("\n" + result.table())
    assert sum(result.errors.values()) == 0, result.unexpected[:10]
    assert (
        result.latencies["frame.pop"]
        and result.latencies["context_pack"]
        and result.latencies["fact.supersede"]
    )
    sessions = list(Session.objects.all())
    assert len(sessions) == 8
    for session in sessions:
        assert projection_diff(session) == []
        assert budget_audit(session) == []
