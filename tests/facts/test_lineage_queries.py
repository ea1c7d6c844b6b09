"""The lineage answer reads a page and its links in set-based queries: a 1,000-version
chain costs exactly the queries of a 3-version one."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from facts.models import Fact, FactDependency
from tests.facts.chains import valid_chain

LINEAGE_QUERIES = 7  # the whole request, authentication included


def _chain(org, prefix: str, versions: int) -> list[Fact]:
    """``versions`` versions of one chain, the newest valid, each superseding the last,
    with a fact depending on the head and the head depending on a fact of its own."""
    facts = valid_chain(org, prefix, versions, datetime(2020, 1, 1, tzinfo=UTC))
    Fact.objects.filter(pk__in=[f.pk for f in facts[1:]]).update(
        supersession_rule=Fact.Rule.EXPLICIT
    )
    base = Fact.objects.create(organization=org, key=f"{prefix}_base", value=0)
    dependent = Fact.objects.create(organization=org, key=f"{prefix}_total", value=0)
    FactDependency.objects.bulk_create(
        [
            FactDependency(fact=dependent, depends_on=facts[-1]),
            FactDependency(fact=facts[-1], depends_on=base),
        ]
    )
    return facts


def _queries(api, key: str) -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as ctx:
        response = api.get(f"/facts/{key}/lineage")
    assert response.status_code == 200
    return len(ctx.captured_queries), response.json()


@pytest.mark.django_db
def test_a_1000_version_lineage_costs_the_queries_of_a_3_version_one(api):
    org = api.organization
    _chain(org, "short", 3)
    _chain(org, "long", 1000)
    api.get("/facts/short_v1/lineage")  # anything read once per process is read now

    short, short_body = _queries(api, "short_v1")
    long, long_body = _queries(api, "long_v1")

    assert len(short_body["chain"]) == 3 and len(long_body["chain"]) == 100
    assert long_body["total_versions"] == 1000 and long_body["older_before_version"] == 901
    assert long_body["chain"][-1]["depends_on"] == ["long_base"]
    assert long_body["chain"][-1]["derived_facts"] == ["long_total"]
    assert [d["key"] for d in long_body["dependents"]] == ["long_total"]
    assert short_body["chain"][-1]["depends_on"] == ["short_base"]
    assert short == long == LINEAGE_QUERIES
