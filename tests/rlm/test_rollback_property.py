"""Property: rolling back to any checkpoint after many mutations restores its exact snapshot."""

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextops.errors import Conflict, NotFound
from frames.rlm import services
from frames.rlm.models import RlmState
from frames.rlm.selectors import state_variables

NAMES = st.sampled_from(["a", "b", "c", "doc_summary", "risk_count", "big"])
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=20).filter(lambda s: "\x00" not in s),
    st.lists(st.integers(0, 9), max_size=4),
    st.dictionaries(st.sampled_from(["k", "v"]), st.integers(0, 9), max_size=2),
    st.integers(10_300, 11_000).map(lambda n: "L" * n),  # above the inline limit: a file
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), NAMES, VALUES),
        st.tuples(st.just("delete"), NAMES, st.none()),
        st.tuples(st.just("read"), NAMES, st.none()),
        st.tuples(st.just("checkpoint"), st.none(), st.none()),
    ),
    min_size=1,
    max_size=40,
)


def _apply(state, ops) -> None:
    for kind, name, value in ops:
        try:
            if kind == "write":
                services.variable_write(state=state, name=name, value=value)
            elif kind == "delete":
                services.variable_delete(state=state, name=name)
            elif kind == "read":
                services.variable_read(state=state, name=name)
            else:
                services.checkpoint_create(state=state, name="point")
        except (Conflict, NotFound):
            pass


def _visible(state) -> dict:
    """What readers see: every variable with its loaded value and all its fields."""
    return {
        v.name: {
            **services._variable_snapshot(v),
            "loaded": services.stored_value(v.value, v.file_name),
        }
        for v in state_variables(state)
    }


@pytest.mark.django_db
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=OPS, after=OPS, data=st.data())
def test_rollback_restores_the_exact_snapshot(org, before, after, data):
    with transaction.atomic():
        state = services.state_initialize(organization=org, prompt="p")
        _apply(state, before)
        checkpoints = list(state.checkpoints.all())
        target = data.draw(st.sampled_from(checkpoints))
        expected_rows = target.snapshot["variables"]
        state.refresh_from_db()
        _apply(state, after)
        state = services.state_rollback(state=state, checkpoint_id=target.checkpoint_id)
        assert services.snapshot_variables(state) == expected_rows
        assert (
            RlmState.objects.get(pk=state.pk).completion_status
            == target.snapshot["completion_status"]
        )
        assert state.mutations.order_by("seq").last().operation == "rollback"
        transaction.set_rollback(True)


@pytest.mark.django_db
def test_rollback_after_a_thousand_mutations_restores_the_snapshot(org):
    state = services.state_initialize(organization=org, prompt="Find all errors")
    for i in range(50):
        services.variable_write(state=state, name=f"v{i}", value={"i": i, "text": "x" * (i * 300)})
    checkpoint = services.checkpoint_create(state=state, name="before_work")
    expected = _visible(state)
    for i in range(1_000):
        name = f"v{i % 70}"
        if i % 9 == 0:
            try:
                services.variable_delete(state=state, name=name)
            except NotFound:
                pass
        else:
            services.variable_write(state=state, name=name, value=[i, "y" * (i * 13 % 12_000)])
        if i % 7 == 0:
            try:
                services.variable_read(state=state, name=f"v{i % 50}")
            except NotFound:
                pass
    state.refresh_from_db()
    assert state.mutation_total > 1_000
    services.state_rollback(state=state, checkpoint_id=checkpoint.checkpoint_id)
    assert _visible(state) == expected
