"""A short load run in CI: concurrent agents on the live server, then nothing lost.

`make load` is the long version (50 agents on gunicorn, PostgreSQL and Redis);
tests/hardening/test_load_faults.py runs it short, with its faults.
"""

import asyncio

import pytest
from django.db.models import Q, Sum

from contextops.tenancy import api_key_create
from facts.models import Fact
from frames.models import Frame, Session
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

    # Every answered call counted once, against what the agents themselves saw: each
    # usage record is 120 in, 40 out, 900 cache read (1,060 tokens of budget).
    recorded = len(result.latencies["usage.record"])
    totals = Session.objects.aggregate(
        input=Sum("input_tokens_total"),
        output=Sum("output_tokens_total"),
        cache_read=Sum("cache_read_tokens_total"),
        calls=Sum("api_calls_total"),
    )
    assert totals == {
        "input": 120 * recorded,
        "output": 40 * recorded,
        "cache_read": 900 * recorded,
        "calls": recorded,
    }
    # Popped children settled into their roots; children the deadline left open still hold theirs.
    spent = Frame.objects.filter(Q(depth=0) | Q(status="active")).aggregate(s=Sum("budget_used"))
    assert spent["s"] == 1060 * recorded
    writes = len(result.latencies["fact.write"]) + len(result.latencies["fact.supersede"])
    assert Fact.objects.filter(organization__name__startswith="Load ").count() == writes
