"""Two agents superseding the same fact at once: one wins, the other gets 409 naming it."""

import threading

import pytest
from django.db import connections

from contextops.errors import Conflict
from facts.models import Fact
from facts.services import fact_write
from tests.conftest import postgres_only


def _race(organization, writes):
    barrier = threading.Barrier(len(writes))
    results: dict[str, object] = {}

    def run(key, kwargs):
        try:
            barrier.wait(timeout=10)
            results[key] = fact_write(
                organization=organization, authority="employee", key=key, **kwargs
            )
        except Conflict as exc:
            results[key] = exc
        finally:
            connections.close_all()  # each thread has its own connection: close it

    threads = [threading.Thread(target=run, args=(key, kwargs)) for key, kwargs in writes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_it_lets_one_of_two_parallel_supersessions_win(api):
    org = api.organization
    for attempt in range(5):
        base = f"deal{attempt}_v1"
        fact_write(organization=org, authority="employee", key=base, value="open")
        results = _race(
            org,
            [
                (f"deal{attempt}_a", {"value": "won", "supersedes": base}),
                (f"deal{attempt}_b", {"value": "lost", "supersedes": base}),
            ],
        )
        winners = [k for k, r in results.items() if not isinstance(r, Exception)]
        losers = [r for r in results.values() if isinstance(r, Conflict)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert losers[0].code == "already_superseded"
        assert losers[0].extra["superseded_by"] == winners[0]
        assert Fact.objects.filter(supersedes__key=base).count() == 1
        assert (
            Fact.objects.filter(
                organization=org, key__startswith=f"deal{attempt}_", is_valid=True
            ).count()
            == 1
        )


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_it_keeps_one_current_fact_under_parallel_implicit_writes(api):
    org = api.organization
    fact_write(organization=org, authority="employee", key="room_v1", subject="room", value="A1")
    writes = [(f"room_{i}", {"subject": "room", "value": f"B{i}"}) for i in range(6)]
    results = _race(org, writes)
    assert all(not isinstance(r, Exception) for r in results.values()), results
    current = Fact.objects.filter(organization=org, subject="room", is_valid=True)
    assert current.count() == 1
    chain = list(Fact.objects.filter(chain=current.get().chain).order_by("version"))
    assert [f.version for f in chain] == list(range(1, 8))


def test_it_forbids_superseding_twice_in_the_database(api):
    from django.db import IntegrityError, transaction

    org = api.organization
    first = fact_write(organization=org, authority="employee", key="z_v1", value=1).fact
    fact_write(organization=org, authority="employee", key="z_v2", value=2, supersedes="z_v1")
    with pytest.raises(IntegrityError), transaction.atomic():
        Fact.objects.create(
            organization=org,
            key="z_v3",
            value=3,
            supersedes=first,
            version=9,
            is_valid=False,
            status="superseded",
        )


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_it_keeps_one_current_fact_when_the_first_writes_of_a_subject_race(api):
    org = api.organization
    for attempt in range(5):
        writes = [
            (f"office{attempt}_{i}", {"subject": f"office{attempt}", "value": f"floor {i}"})
            for i in range(6)
        ]
        results = _race(org, writes)
        assert all(not isinstance(r, Exception) for r in results.values()), results
        assert (
            Fact.objects.filter(organization=org, subject=f"office{attempt}", is_valid=True).count()
            == 1
        )
