"""Pressure levels from window occupancy, with seed 003's 5 % hysteresis on the way down."""

import pytest

from frames.models import Event, Frame, Session
from frames.pressure import (
    CRITICAL,
    HIGH,
    LOW,
    MEDIUM,
    RECOMMENDED_ACTIONS,
    hysteresis_band,
    level_for,
    level_next,
)
from frames.services.pressure import pressure_update


@pytest.mark.parametrize(
    ("percent", "expected"),
    [
        (0, LOW),
        (49.9, LOW),
        (50, MEDIUM),
        (69.9, MEDIUM),
        (70, HIGH),
        (85, HIGH),
        (85.1, CRITICAL),
        (120, CRITICAL),
    ],
)
def test_it_rises_at_each_boundary(percent, expected):
    assert level_for(percent / 100) == expected
    assert level_next(LOW, percent / 100) == expected


def test_it_walks_up_through_every_boundary_one_step_at_a_time():
    level = LOW
    seen = []
    for percent in (49.9, 50, 69.9, 70, 85, 85.1):
        level = level_next(level, percent / 100)
        seen.append(level)
    assert seen == [LOW, MEDIUM, MEDIUM, HIGH, HIGH, CRITICAL]


@pytest.mark.parametrize(
    ("previous", "percent", "expected"),
    [
        (CRITICAL, 85, CRITICAL),
        (CRITICAL, 80.1, CRITICAL),
        (CRITICAL, 80, CRITICAL),
        (CRITICAL, 79.9, HIGH),
        (HIGH, 69.9, HIGH),
        (HIGH, 65, HIGH),
        (HIGH, 64.9, MEDIUM),
        (MEDIUM, 49.9, MEDIUM),
        (MEDIUM, 45, MEDIUM),
        (MEDIUM, 44.9, LOW),
    ],
)
def test_it_comes_down_only_past_the_hysteresis_band(previous, percent, expected):
    assert level_next(previous, percent / 100) == expected


def test_it_walks_back_down_through_80_65_and_45():
    level = CRITICAL
    seen = []
    for percent in (84, 80, 79.9, 70, 65, 64.9, 50, 45, 44.9):
        level = level_next(level, percent / 100)
        seen.append(level)
    assert seen == [CRITICAL, CRITICAL, HIGH, HIGH, HIGH, MEDIUM, MEDIUM, MEDIUM, LOW]


@pytest.mark.parametrize(
    ("previous", "percent", "expected"),
    [
        (CRITICAL, 10, LOW),
        (CRITICAL, 50, MEDIUM),
        (CRITICAL, 64.9, MEDIUM),
        (CRITICAL, 44.9, LOW),
        (HIGH, 30, LOW),
    ],
)
def test_it_crosses_several_levels_in_one_drop(previous, percent, expected):
    assert level_next(previous, percent / 100) == expected


def test_it_gives_the_seed_actions_and_bands():
    assert "No action needed." in RECOMMENDED_ACTIONS[LOW]
    assert any("Monitor" in a for a in RECOMMENDED_ACTIONS[MEDIUM])
    assert any("Page out" in a for a in RECOMMENDED_ACTIONS[HIGH])
    assert any("urgently" in a for a in RECOMMENDED_ACTIONS[CRITICAL])
    assert hysteresis_band(HIGH) == (0.65, 0.85)
    assert hysteresis_band(CRITICAL) == (0.80, None)
    assert hysteresis_band(LOW) == (0.0, 0.5)


def _record(session, frame, occupancy):
    Frame.objects.filter(pk=frame.pk).update(last_occupancy_tokens=occupancy)
    frame.refresh_from_db()
    session.refresh_from_db()
    return pressure_update(session=session, frame=frame)


def test_it_moves_the_frame_and_session_levels_with_hysteresis(session, frame):
    assert _record(session, frame, 8_600) == CRITICAL
    session.refresh_from_db()
    assert session.pressure_level == CRITICAL
    assert session.lifecycle_state == Session.Lifecycle.ACTIVE_PRESSURE
    assert _record(session, frame, 8_100) == CRITICAL
    assert _record(session, frame, 7_000) == HIGH
    session.refresh_from_db()
    assert session.lifecycle_state == Session.Lifecycle.ACTIVE
    assert _record(session, frame, 1_000) == LOW
    changes = list(
        Event.objects.filter(session=session, type="pressure.changed").values_list(
            "payload", flat=True
        )
    )
    assert [(c["from"], c["to"]) for c in changes] == [
        ("low", "critical"),
        ("critical", "high"),
        ("high", "low"),
    ]


def test_it_leaves_the_session_gauge_alone_for_a_frame_below_the_top(session, frame, make_frame):
    child = make_frame(session, parent=frame, goal="child")
    assert _record(session, frame, 9_000) == CRITICAL
    frame.refresh_from_db()
    session.refresh_from_db()
    assert frame.pressure_level == CRITICAL
    assert session.pressure_level == LOW
    assert _record(session, child, 6_000) == MEDIUM
    session.refresh_from_db()
    assert session.pressure_level == MEDIUM


def test_it_answers_pressure_with_actions_and_candidates(api, session, frame, make_handle):
    Frame.objects.filter(pk=frame.pk).update(last_occupancy_tokens=7_500, pressure_level=HIGH)
    low = make_handle(frame, attention_weight=0.2, tokens=10)
    make_handle(frame, attention_weight=1.0, tokens=900)
    make_handle(frame, priority="critical", attention_weight=0.1)
    response = api.get(f"/sessions/{session.id}/pressure")
    assert response.status_code == 200
    body = response.json()
    assert body["level"] == "high"
    assert body["utilization"] == 0.75
    assert body["frame_id"] == str(frame.id)
    assert any("Page out" in a for a in body["recommended_actions"])
    assert [c["handle_id"] for c in body["eviction_candidates"]][0] == str(low.id)
    assert len(body["eviction_candidates"]) == 2  # never the critical one


def test_it_hides_another_organizations_pressure(other_api, session):
    assert other_api.get(f"/sessions/{session.id}/pressure").status_code == 404
