"""Model calls recorded together (``usage_record_many``) write what recording them one by
one (``usage_record``) writes: the same usage rows, totals, budgets, pressure and events."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from contextops.errors import Conflict, Invalid
from frames.models import Event, Frame, Session, Usage
from frames.services.sessions import session_create
from frames.services.stack import frame_pop, frame_push
from frames.services.usage import UsageCall, usage_record, usage_record_many

pytestmark = pytest.mark.django_db

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def _world(org) -> tuple[Session, dict[str, Frame]]:
    """A session (a 1,000-token window) with a root and its child on top, and one call
    already recorded on the child."""
    session = session_create(
        organization=org, identity={"user_name": "Ada"}, context_window_tokens=1_000, model="m"
    )
    root = frame_push(session=session, goal="root", budget_total=100_000)
    child = frame_push(session=session, parent=root, goal="child", budget_total=10_000)
    usage_record(session=session, frame=child, input_tokens=7, output_tokens=1, message_id="stored")
    return Session.objects.get(pk=session.pk), {"root": root, "child": child}


def _calls(frames: dict[str, Frame]) -> list[UsageCall]:
    """Calls that move the child's pressure up (to critical) and back down, charge the
    root (not the top), replay a stored and an earlier call, and name no frame."""
    root, child = frames["root"], frames["child"]
    return [
        UsageCall(child, input_tokens=600, output_tokens=10, message_id="m1"),
        UsageCall(
            child,
            input_tokens=800,
            output_tokens=50,
            cache_read_input_tokens=10,
            model="opus",
            message_id="m2",
            started_at=AT,
            latency_ms=1200,
        ),
        UsageCall(root, input_tokens=900, output_tokens=5, message_id="m3"),
        UsageCall(child, input_tokens=600, output_tokens=10, message_id="m1"),
        UsageCall(child, input_tokens=7, output_tokens=1, message_id="stored"),
        UsageCall(None, input_tokens=5, output_tokens=5),
        UsageCall(child, input_tokens=100, output_tokens=1, cache_creation_input_tokens=3),
        UsageCall(child, input_tokens=100, output_tokens=1, message_id="m4"),
    ]


def _one_by_one(session: Session, calls: list[UsageCall]) -> list[Usage]:
    return [
        usage_record(
            session=session,
            frame=call.frame,
            model=call.model,
            message_id=call.message_id,
            started_at=call.started_at,
            latency_ms=call.latency_ms,
            actor="agent",
            **call.counts(),
        )
        for call in calls
    ]


def _state(session: Session, frames: dict[str, Frame], after: int) -> dict:
    """What the calls left, with ids replaced by names and positions."""
    names = {frame.pk: name for name, frame in frames.items()}
    usages = list(Usage.objects.filter(session=session).order_by("id"))
    position = {usage.pk: i for i, usage in enumerate(usages)}
    session = Session.objects.get(pk=session.pk)
    return {
        "usages": [
            (
                names.get(u.frame_id),
                u.model,
                u.message_id,
                u.input_tokens,
                u.output_tokens,
                u.cache_creation_input_tokens,
                u.cache_read_input_tokens,
                u.started_at,
                u.latency_ms,
            )
            for u in usages
        ],
        "events": [
            (
                e.seq - after,
                e.type,
                names.get(e.frame_id),
                e.actor,
                {
                    k: position[v] if k == "usage_id" else v
                    for k, v in e.payload.items()  # as stored: key order included
                },
            )
            for e in Event.objects.filter(session=session, seq__gt=after).order_by("seq")
        ],
        "session": (
            session.input_tokens_total,
            session.output_tokens_total,
            session.cache_creation_tokens_total,
            session.cache_read_tokens_total,
            session.api_calls_total,
            session.last_event_seq - after,
            session.pressure_level,
            session.lifecycle_state,
        ),
        "frames": {
            name: Frame.objects.values_list(
                "budget_used", "last_occupancy_tokens", "pressure_level", "status"
            ).get(pk=frame.pk)
            for name, frame in frames.items()
        },
        "positions": position,
    }


def test_it_records_the_same_rows_totals_and_events_as_one_by_one(api):
    alone, alone_frames = _world(api.organization)
    together, together_frames = _world(api.organization)
    after = together.last_event_seq

    one = _one_by_one(alone, _calls(alone_frames))
    many = usage_record_many(session=together, calls=_calls(together_frames), actor="agent")

    expected = _state(alone, alone_frames, alone.last_event_seq)
    got = _state(together, together_frames, after)
    assert got["usages"] == expected["usages"]
    assert got["events"] == expected["events"]
    assert got["session"] == expected["session"]
    assert got["frames"] == expected["frames"]
    types = [event[1] for event in got["events"]]
    assert types.count("pressure.changed") == 3  # up to medium, to critical, down to low
    assert got["session"][7] == Session.Lifecycle.ACTIVE
    # The answers: a replay answers the first record of its message id.
    assert [expected["positions"][u.pk] for u in one] == [got["positions"][u.pk] for u in many]
    assert many[3].pk == many[0].pk and many[4].message_id == "stored"
    # The caller's session leaves as stored.
    stored = Session.objects.get(pk=together.pk)
    assert (together.last_event_seq, together.api_calls_total, together.pressure_level) == (
        stored.last_event_seq,
        stored.api_calls_total,
        stored.pressure_level,
    )


def test_it_takes_the_same_statements_for_few_calls_or_many(api):
    session, frames = _world(api.organization)
    counts = []
    for n in (2, 40):
        calls = [UsageCall(frames["child"], input_tokens=10 + i, output_tokens=1) for i in range(n)]
        with CaptureQueriesContext(connection) as queries:
            usage_record_many(session=session, calls=calls)
        counts.append(
            len([q for q in queries.captured_queries if not q["sql"].startswith(CONTROL)])
        )
    assert counts[0] == counts[1] <= 9
    assert Session.objects.get(pk=session.pk).api_calls_total == 43


def test_it_records_nothing_when_one_call_is_refused(api):
    session, frames = _world(api.organization)
    other, other_frames = _world(api.organization)
    before = Session.objects.get(pk=session.pk).last_event_seq
    ok = UsageCall(frames["child"], input_tokens=10, output_tokens=1)

    with pytest.raises(Invalid):
        usage_record_many(
            session=session,
            calls=[ok, UsageCall(other_frames["child"], input_tokens=1, output_tokens=1)],
        )
    frame_pop(frame=Frame.objects.get(pk=frames["child"].pk), status="completed")
    closed = Session.objects.get(pk=session.pk).last_event_seq
    with pytest.raises(Conflict) as refused:
        usage_record_many(
            session=session,
            calls=[UsageCall(frames["root"], input_tokens=1, output_tokens=1), ok],
        )
    assert refused.value.code == "frame_not_active"
    Session.objects.filter(pk=session.pk).update(lifecycle_state=Session.Lifecycle.ENDED)
    with pytest.raises(Conflict) as ended:
        usage_record_many(
            session=session, calls=[UsageCall(frames["root"], input_tokens=1, output_tokens=1)]
        )
    assert ended.value.code == "session_ended"

    assert Usage.objects.filter(session=session).count() == 1
    assert closed > before
    assert Session.objects.get(pk=session.pk).last_event_seq == closed
    assert Session.objects.get(pk=session.pk).api_calls_total == 1


def test_it_answers_a_replay_even_once_the_session_has_ended(api):
    session, frames = _world(api.organization)
    Session.objects.filter(pk=session.pk).update(lifecycle_state=Session.Lifecycle.ENDED)
    stored = Usage.objects.get(session=session, message_id="stored")

    [usage] = usage_record_many(
        session=session,
        calls=[UsageCall(frames["child"], input_tokens=7, output_tokens=1, message_id="stored")],
    )

    assert usage.pk == stored.pk
    assert Session.objects.get(pk=session.pk).api_calls_total == 1
