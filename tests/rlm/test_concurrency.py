"""Concurrent writes to one state never lose a mutation (PostgreSQL: real parallel transactions)."""

import threading

import pytest
from django.db import close_old_connections, connection

from frames.rlm import protocol
from frames.rlm.models import RlmState
from tests.conftest import postgres_only

THREADS = 8
WRITES = 25


@postgres_only
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_it_never_loses_a_mutation_under_parallel_writers(org):
    assert connection.vendor == "postgresql"
    state = protocol.state_initialize(organization=org, prompt="p")
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            barrier.wait()
            for i in range(WRITES):
                # every thread bumps the shared counter and writes its own variable
                protocol.variable_write(state=state, name="shared", value=f"{n}:{i}")
                protocol.variable_write(state=state, name=f"t{n}", value=i)
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    state = RlmState.objects.get(pk=state.pk)
    expected = 1 + THREADS * WRITES * 2
    assert state.mutation_total == expected
    seqs = list(state.mutations.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, expected + 1))
    ids = set(state.mutations.values_list("mutation_id", flat=True))
    assert len(ids) == expected
    shared = list(state.mutations.filter(variable_name="shared").order_by("seq"))
    assert len(shared) == THREADS * WRITES
    # each update saw the value the previous one wrote: no write was lost in between
    for previous, current in zip(shared, shared[1:], strict=False):
        assert current.old_value == previous.new_value
    for n in range(THREADS):
        assert state.variables.get(name=f"t{n}").value == WRITES - 1
