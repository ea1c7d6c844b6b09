"""The cyclic collector's pause around a context pack: off inside, back on after."""

import gc

import pytest

from contextops.collector import cyclic_collector_paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_it_turns_the_collector_off_inside_and_back_on_after(collector_on):
    with cyclic_collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_turns_the_collector_back_on_when_the_block_raises(collector_on):
    with pytest.raises(RuntimeError), cyclic_collector_paused():
        raise RuntimeError("the pack failed")
    assert gc.isenabled()


def test_a_nested_block_leaves_it_to_the_outer_one(collector_on):
    with cyclic_collector_paused():
        with cyclic_collector_paused():
            pass
        assert not gc.isenabled(), "the inner block turned the collector on under the outer"
    assert gc.isenabled()


def test_it_leaves_a_collector_someone_else_turned_off_off(collector_on):
    gc.disable()
    with cyclic_collector_paused():
        pass
    assert not gc.isenabled()
    gc.enable()


@pytest.mark.django_db
def test_a_context_pack_leaves_the_collector_on(api):
    session = api.post("/sessions", {"identity": {"user_name": "Ada"}}).json()
    api.post(f"/sessions/{session['id']}/frames", {"goal": "Plan"})
    gc.enable()
    answer = api.post(f"/sessions/{session['id']}/context-pack", {"budget_tokens": 1000})
    assert answer.status_code == 200, answer.content
    assert gc.isenabled()
