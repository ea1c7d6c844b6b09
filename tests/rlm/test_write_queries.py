"""RLM writes in a handful of queries, and checkpoints whose cost does not grow with the
state: a checkpoint is a position in the mutation log, a rollback rewrites only what
changed since (counted without BEGIN/COMMIT and savepoints, on either engine)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from frames.models import Session
from frames.rlm import protocol, snapshots
from frames.rlm.models import RlmVariable
from frames.rlm.values import MAX_VARIABLES
from tests.conftest import IS_POSTGRES

pytestmark = pytest.mark.django_db(transaction=True)

CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def _counted(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(CONTROL)]


def _state(api, variables: int):
    session = Session.objects.create(organization=api.organization, identity={"user_name": "B"})
    state = protocol.state_initialize(organization=api.organization, prompt="p", session=session)
    for i in range(variables):
        protocol.variable_write(state=state, name=f"v{i:03d}", value={"n": i})
    return state


def test_it_writes_a_variable_in_six_queries_with_its_mutation_and_event(api):
    """Seven elsewhere: PostgreSQL stores the state's counters by the mutation's INSERT."""
    state = _state(api, 3)
    with CaptureQueriesContext(connection) as queries:
        protocol.variable_write(state=state, name="v001", value="changed")
    assert len(_counted(queries)) <= (6 if IS_POSTGRES else 7), _counted(queries)
    assert state.mutations.order_by("-seq").first().before["v001"]["value"] == {"n": 1}


def test_a_state_without_session_or_frame_is_locked_without_joins(api):
    state = protocol.state_initialize(organization=api.organization, prompt="p")
    protocol.variable_write(state=state, name="v", value=1)
    with CaptureQueriesContext(connection) as queries:
        protocol.variable_write(state=state, name="v", value=2)
    counted = _counted(queries)
    assert len(counted) <= (4 if IS_POSTGRES else 5), counted
    assert counted[0].startswith('SELECT "rlm_rlmstate"') and "JOIN" not in counted[0]
    assert state.variables.get(name="v").value == 2


def test_it_deletes_a_variable_in_the_queries_of_a_write(api):
    """The read that purges expired temporaries brings the deleted variable back too: a
    delete costs no more queries than a write."""
    state = _state(api, 3)
    with CaptureQueriesContext(connection) as written:
        protocol.variable_write(state=state, name="v001", value="changed")
    with CaptureQueriesContext(connection) as deleted:
        protocol.variable_delete(state=state, name="v002")
    assert len(_counted(deleted)) <= len(_counted(written)), _counted(deleted)
    assert not state.variables.filter(name="v002").exists()
    assert state.mutations.order_by("-seq").first().before["v002"]["value"] == {"n": 2}


def _checkpoint_and_rollback_queries(api, variables: int) -> tuple[int, int, list[str]]:
    state = _state(api, variables)
    protocol.variable_read(state=state, name="v000")
    with CaptureQueriesContext(connection) as taken:
        checkpoint = snapshots.checkpoint_create(state=state, name="here")
    protocol.variable_write(state=state, name="v000", value="later")
    protocol.variable_delete(state=state, name="v001")
    protocol.variable_write(state=state, name="extra", value=1)
    protocol.variable_read(state=state, name="v002")
    with CaptureQueriesContext(connection) as rolled:
        view = snapshots.state_rollback(state=state, checkpoint_id=checkpoint.checkpoint_id)
    rows = {v.name: (v.value, v.access_count) for v in view.variables}
    assert rows["v000"] == ({"n": 0}, 1) and rows["v001"] == ({"n": 1}, 0)
    assert rows["v002"] == ({"n": 2}, 0) and "extra" not in rows
    stored = {v.name: (v.value, v.access_count) for v in RlmVariable.objects.filter(state=state)}
    assert stored == rows
    return len(_counted(taken)), len(_counted(rolled)), _counted(rolled)


def test_it_checkpoints_and_rolls_back_in_queries_that_do_not_grow_with_the_state(api):
    small = _checkpoint_and_rollback_queries(api, 5)
    large = _checkpoint_and_rollback_queries(api, 200)
    assert large[0] == small[0] <= 8
    assert large[1] == small[1] <= 14, large[2]


def _thousand_variables(api):
    """A state at the seed's limit of 1,000 variables; the 999 besides ``prompt`` are
    inserted directly (their writes are not what is measured), each read once, so a
    checkpoint taken afterwards is where the log starts to matter."""
    state = _state(api, 0)
    now = timezone.now()
    RlmVariable.objects.bulk_create(
        RlmVariable(
            state=state,
            name=f"w{i:03d}",
            type="json",
            value={"n": i},
            size_bytes=10,
            access_count=1,  # every one read once, as agents do
            created_at=now,
            updated_at=now,
        )
        for i in range(MAX_VARIABLES - 1)
    )
    return state


def _rows(state) -> dict[str, tuple]:
    fields = ("name", "type", "value", "size_bytes", "access_count", "created_at", "updated_at")
    return {row[0]: row for row in RlmVariable.objects.filter(state=state).values_list(*fields)}


def test_a_rollback_of_a_thousand_variables_takes_the_same_queries_however_many_changed(api):
    state = _thousand_variables(api)
    changes = (1, 10, 50, 200) if IS_POSTGRES else (1, 10, 50)
    counted = {}
    for changed in changes:
        protocol.variable_read(state=state, name="w998")
        checkpoint = snapshots.checkpoint_create(state=state, name=f"before {changed}")
        at_checkpoint = _rows(state)
        for i in range(changed):
            protocol.variable_write(state=state, name=f"w{i:03d}", value=f"changed {i}")
        protocol.variable_delete(state=state, name="w997")  # comes back
        protocol.variable_write(state=state, name="later", value=1)  # goes
        protocol.variable_read(state=state, name="w996")  # read since: the count goes back
        protocol.variable_read(state=state, name="w998")  # read before and since: back too
        with CaptureQueriesContext(connection) as rolled:
            done = snapshots.rollback(state=state, checkpoint_id=checkpoint.checkpoint_id)
        counted[changed] = _counted(rolled)
        assert _rows(state) == at_checkpoint
        assert done.variable_count == MAX_VARIABLES
        assert len(done.changed) == changed + 2 and "later" in done.changed
        logged = state.mutations.order_by("-seq").first()
        assert logged.operation == "rollback" and logged.mutation_id == done.mutation_id
        assert logged.new_value["variable_count"] == MAX_VARIABLES
    sizes = {changed: len(queries) for changed, queries in counted.items()}
    assert len(set(sizes.values())) == 1 and sizes[1] <= 12, counted[changes[-1]]
