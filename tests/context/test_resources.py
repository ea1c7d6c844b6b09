"""The resource lifecycle: every edge of seed 003, and nothing else."""

import itertools

import pytest

from contextops.errors import Conflict
from frames.context.resources import STATES, TRANSITIONS, state_for_attention, transition_check
from frames.models import ContextHandle, Event

LEGAL = sorted(TRANSITIONS)
ILLEGAL = [(a, b) for a, b in itertools.product(STATES, STATES) if (a, b) not in TRANSITIONS]


@pytest.mark.parametrize(("source", "target"), LEGAL)
def test_it_allows_each_seed_transition(source, target):
    step = transition_check(source, target)
    assert (step.source, step.target) == (source, target)
    assert step.trigger in {"page_in", "set_attention", "page_out", "stale", "error", "recover"}


@pytest.mark.parametrize(("source", "target"), ILLEGAL)
def test_it_refuses_every_other_transition(source, target):
    with pytest.raises(Conflict) as err:
        transition_check(source, target)
    assert err.value.code == "illegal_transition"
    assert err.value.status == 409


def test_it_knows_the_seed_edges_and_only_them():
    assert set(TRANSITIONS) == {
        ("cold", "loaded"),
        ("loaded", "hot"),
        ("hot", "loaded"),
        ("loaded", "indexed"),
        ("hot", "indexed"),
        ("indexed", "loaded"),
        ("indexed", "cold"),
        ("cold", "offline"),
        ("loaded", "offline"),
        ("hot", "offline"),
        ("indexed", "offline"),
        ("offline", "cold"),
    }
    assert len(ILLEGAL) == 25 - 12


def test_it_moves_only_active_resources_with_attention():
    assert state_for_attention("loaded", 1.5) == "hot"
    assert state_for_attention("hot", 1.0) == "loaded"
    assert state_for_attention("loaded", 1.0) == "loaded"
    assert state_for_attention("indexed", 5) == "indexed"
    assert state_for_attention("cold", 5) == "cold"


@pytest.mark.parametrize(("source", "target"), [t for t in LEGAL if TRANSITIONS[t] != "page_out"])
def test_it_applies_each_transition_through_the_api(api, frame, make_handle, source, target):
    handle = make_handle(
        frame,
        state=source,
        summary="s." if source == "indexed" else "",
        summary_tokens=1 if source == "indexed" else 0,
    )
    response = api.post(f"/handles/{handle.id}/state", {"to": target})
    assert response.status_code == 200, response.content
    handle.refresh_from_db()
    assert handle.state == target
    assert response.json()["state"] == target
    if target == "hot":
        assert handle.attention_weight > 1
    if (source, target) == ("indexed", "cold"):
        assert handle.summary == "" and handle.summary_tokens == 0
    event = Event.objects.filter(session=frame.session, type="handle.state_changed").get()
    assert event.payload["from"] == source and event.payload["to"] == target


@pytest.mark.parametrize(("source", "target"), ILLEGAL)
def test_it_answers_409_and_changes_nothing_for_an_illegal_transition(
    api, frame, make_handle, source, target
):
    handle = make_handle(frame, state=source, attention_weight=0.5)
    response = api.post(f"/handles/{handle.id}/state", {"to": target})
    assert response.status_code == 409
    assert response.json()["error"] == "illegal_transition"
    fresh = ContextHandle.objects.get(pk=handle.pk)
    assert (fresh.state, fresh.attention_weight) == (source, 0.5)
    assert not Event.objects.filter(session=frame.session).exists()


def test_it_queues_a_page_out_for_an_explicit_move_to_indexed(api, frame, make_handle, queued_jobs):
    handle = make_handle(frame, state="hot", attention_weight=3)
    before = queued_jobs()
    response = api.post(f"/handles/{handle.id}/state", {"to": "indexed"})
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert queued_jobs() == before + 1  # the page-out job reached the broker


def test_it_refuses_an_unknown_state_with_422(api, frame, make_handle):
    handle = make_handle(frame)
    assert api.post(f"/handles/{handle.id}/state", {"to": "warm"}).status_code == 422


def test_it_hides_another_organizations_handle(other_api, frame, make_handle):
    handle = make_handle(frame)
    response = other_api.post(f"/handles/{handle.id}/state", {"to": "offline"})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
