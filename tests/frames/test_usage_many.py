"""``usage_record_many`` stores what ``usage_record`` of each call in order stores: the
rows, each frame's budget, occupancy and pressure level, the session's totals, gauge and
lifecycle, and the same events in the same order."""

import pytest

from frames import services
from frames.models import Event, Frame, Session, Usage

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 1_000
# What differs between two sessions whatever the writes: ids and times.
VARYING = ("usage_id", "parent_frame_id", "created_at")
# Occupancies that climb through every level, fall back with hysteresis and climb again,
# on the top frame (the gauge follows) and on its parent (it does not).
CALLS = [
    ("child", 300, 10, "m1"),
    ("child", 560, 10, "m2"),
    ("root", 900, 10, ""),
    ("child", 760, 10, "m3"),
    ("child", 900, 10, "m4"),
    ("child", 810, 5, "m2"),  # a replay of m2: charged once
    ("child", 100, 10, ""),
    ("child", 700, 10, "m5"),
    ("child", 950, 40, "m5"),  # the same id twice in one batch: the first is kept
]


def _session(api):
    session = services.session_create(
        organization=api.organization, identity={"user_name": "Ada"}, context_window_tokens=WINDOW
    )
    root = services.frame_push(session=session, goal="root", budget_total=10**6)
    child = services.frame_push(session=session, parent=root, goal="child", budget_total=10**5)
    return session, {"root": root, "child": child}


def _call(name, input_tokens, output_tokens, message_id):
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "message_id": message_id}


def _state(session, frames):
    names = {f.pk: name for name, f in frames.items()}
    stored = Session.objects.get(pk=session.pk)
    return {
        "session": (
            stored.input_tokens_total,
            stored.output_tokens_total,
            stored.api_calls_total,
            stored.last_event_seq,
            stored.pressure_level,
            stored.lifecycle_state,
        ),
        "frames": {
            name: Frame.objects.filter(pk=f.pk)
            .values("budget_used", "last_occupancy_tokens", "pressure_level")
            .get()
            for name, f in frames.items()
        },
        "usage": list(
            Usage.objects.filter(session=session)
            .order_by("id")
            .values_list("frame__goal", "input_tokens", "output_tokens", "message_id")
        ),
        "events": [
            (e.seq, e.type, names.get(e.frame_id), e.actor)
            + ({k: v for k, v in e.payload.items() if k not in VARYING},)
            for e in Event.objects.filter(session=session).order_by("seq")
        ],
    }


def test_it_stores_a_batch_as_one_by_one_does(api):
    one, one_frames = _session(api)
    singles = [
        services.usage_record(session=one, frame=one_frames[n], actor="a", **_call(n, *rest))
        for n, *rest in CALLS
    ]
    many, many_frames = _session(api)
    batch = services.usage_record_many(
        session=many, calls=[(many_frames[n], _call(n, *rest)) for n, *rest in CALLS], actor="a"
    )
    expected, got = _state(one, one_frames), _state(many, many_frames)
    assert got == expected
    assert {e[1] for e in got["events"]} >= {"usage.recorded", "pressure.changed"}
    assert [u.message_id for u in batch] == [u.message_id for u in singles]
    assert batch[5].pk == batch[1].pk and batch[8].pk == batch[7].pk  # replays: the first
    recorded = Event.objects.filter(session=many, type="usage.recorded").order_by("seq")
    assert [e.payload["usage_id"] for e in recorded] == list(
        Usage.objects.filter(session=many).order_by("id").values_list("pk", flat=True)
    )


def test_a_frame_of_another_session_is_refused(api):
    session, _ = _session(api)
    _, other = _session(api)
    with pytest.raises(Exception, match="another session"):
        services.usage_record_many(
            session=session, calls=[(other["root"], _call("root", 1, 1, ""))]
        )
