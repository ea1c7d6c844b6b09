"""Budget arithmetic of seed 000 §1, without a database."""

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextops.errors import InsufficientTokens, Invalid
from frames.budget import Budget, call_occupancy, token_counts, usage_tokens


def test_it_reproduces_the_seed_propagation_example():
    root = Budget(8000).reserve(500).reserve(200)
    root = root.allocate_for_subcall(3000).record_usage(2000)
    assert root.available == 2300
    settled = root.settle_subcall(child_total=3000, child_used=2500)
    assert (settled.used, settled.subcall_allocation, settled.available) == (4500, 0, 2800)


def test_it_refuses_to_reserve_more_than_is_available():
    with pytest.raises(InsufficientTokens) as raised:
        Budget(1000, used=600).reserve(500)
    assert raised.value.extra == {"requested": 500, "available": 400}


@pytest.mark.parametrize("amount", [0, -1])
def test_it_refuses_to_reserve_fewer_than_one_token(amount):
    with pytest.raises(Invalid) as raised:
        Budget(1000).reserve(amount)
    assert raised.value.field == ("amount",)


def test_it_never_reports_negative_availability_after_overspending():
    assert Budget(100).record_usage(250).available == 0


def test_it_counts_every_token_the_call_put_in_the_window():
    assert (
        usage_tokens(
            input_tokens=10,
            output_tokens=5,
            cache_creation_input_tokens=100,
            cache_read_input_tokens=1000,
        )
        == 1115
    )


def test_a_calls_counts_come_by_name_in_a_usage_bodys_order():
    call = SimpleNamespace(
        cache_read_input_tokens=1000,
        output_tokens=5,
        input_tokens=10,
        cache_creation_input_tokens=100,
        model="m",
    )
    counts = token_counts(call)
    assert list(counts.items()) == [
        ("input_tokens", 10),
        ("output_tokens", 5),
        ("cache_creation_input_tokens", 100),
        ("cache_read_input_tokens", 1000),
    ]
    assert call_occupancy(call) == 1115


@given(st.integers(0, 10**6), st.lists(st.integers(0, 10**5), max_size=30))
def test_it_never_allocates_beyond_the_total(total, requests):
    budget = Budget(total)
    for amount in requests:
        try:
            budget = budget.allocate_for_subcall(amount)
        except InsufficientTokens:
            pass
        assert budget.subcall_allocation <= total
        assert budget.available == total - budget.subcall_allocation


def test_it_reports_how_far_a_frame_went_past_its_total():
    assert Budget(1000).record_usage(5010).overrun == 4010
    assert Budget(1000, used=500, reserved=300, subcall_allocation=400).overrun == 200
    assert Budget(1000, used=999).overrun == 0


# The edges: a need equal to what is available fits, one token more does not.
EDGE = Budget(1000, used=100, reserved=200, subcall_allocation=300)  # 400 available


def test_a_need_equal_to_what_is_available_fits():
    EDGE.require(400)
    assert EDGE.allocate_for_subcall(400).available == 0
    assert EDGE.reserve(400).available == 0


@pytest.mark.parametrize("spend", ["require", "allocate_for_subcall", "reserve"])
def test_one_token_more_than_is_available_is_refused(spend):
    with pytest.raises(InsufficientTokens) as raised:
        getattr(EDGE, spend)(401)
    assert raised.value.extra == {"requested": 401, "available": 400}


def test_an_empty_budget_takes_nothing_more():
    spent = Budget(500, used=500)
    spent.require(0)
    with pytest.raises(InsufficientTokens):
        spent.require(1)
