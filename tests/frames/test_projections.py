"""rebuild_projections: frames and budgets from the event log alone."""

from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command

from frames.context import lifecycle
from frames.models import Frame, Usage
from frames.projections import replay
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_pop, frame_push, frame_reserve
from frames.services.usage import usage_record


def _busy_session(api):
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    root = frame_push(session=session, goal="Root", budget_total=50_000)
    frame_reserve(frame=root, purpose="brief_context", amount=500)
    children = [
        frame_push(session=session, parent=root, goal=f"Child {i}", budget_total=5000)
        for i in range(4)
    ]
    for i, child in enumerate(children):
        usage_record(
            session=session,
            frame=child,
            input_tokens=100 * i,
            output_tokens=50,
            cache_read_input_tokens=10,
        )
        grandchild = frame_push(session=session, parent=child, goal="Grandchild", budget_total=1000)
        usage_record(session=session, frame=grandchild, input_tokens=300, output_tokens=20)
        handle_add(frame=grandchild, kind="document", content="Some evidence.")
        frame_pop(frame=grandchild, status="completed")
        if i % 2:
            frame_pop(frame=child, status="failed" if i == 3 else "completed")
    usage_record(session=session, frame=None, input_tokens=7, output_tokens=7)
    return session, root


def test_it_finds_no_difference_after_a_busy_scenario(api, capsys):
    _busy_session(api)
    call_command("rebuild_projections", "--verify")
    assert "match the event log" in capsys.readouterr().out


def test_it_finds_a_tampered_row_and_rebuilds_it(api, capsys):
    _session, root = _busy_session(api)
    expected = Frame.objects.get(pk=root.pk).budget_used
    Frame.objects.filter(pk=root.pk).update(budget_used=expected + 999)
    with pytest.raises(CommandError):
        call_command("rebuild_projections", "--verify")
    assert (
        f"budget_used: table has {expected + 999}, events say {expected}" in capsys.readouterr().out
    )

    call_command("rebuild_projections")
    assert Frame.objects.get(pk=root.pk).budget_used == expected
    call_command("rebuild_projections", "--verify")


def test_budget_sums_hold_after_a_busy_scenario_and_a_tamper_is_caught(api):
    from frames.projections import budget_audit

    session, root = _busy_session(api)
    assert budget_audit(session) == []
    Frame.objects.filter(pk=root.pk).update(subcall_allocation=1)
    assert any("subcall_allocation 1" in p for p in budget_audit(session))


def test_ending_a_session_closes_every_open_frame_and_keeps_the_sums(api):
    from frames.projections import budget_audit, projection_diff

    session, root = _busy_session(api)
    lifecycle.session_end(session=session)
    assert not Frame.objects.filter(session=session, status__in=Frame.OPEN_STATUSES).exists()
    root.refresh_from_db()
    assert root.subcall_allocation == 0
    assert budget_audit(session) == []
    assert projection_diff(session) == []


def test_budgets_audits_every_sum_and_fails_on_a_spending_no_frame_accounts_for(api, capsys):
    """`rebuild_projections --verify --budgets`, as the restore check (make drill) runs it."""
    _session, root = _busy_session(api)
    call_command("rebuild_projections", "--verify", "--budgets")
    out = capsys.readouterr().out
    assert "every budget sum is exact" in out and "match the event log" in out
    child = Frame.objects.filter(parent=root).first()
    Usage.objects.filter(frame=child).update(input_tokens=999_999)  # spent, not accounted
    with pytest.raises(CommandError, match="budget problem"):
        call_command("rebuild_projections", "--verify", "--budgets")
    assert f"session {_session.pk}: budget:" in capsys.readouterr().out


def test_a_pop_releases_reservations_on_replay_whether_or_not_it_says_so():
    """A closed frame holds nothing back: a pop logged before pops named what they
    released replays as one that does, as migration 0012 left the tables."""

    def event(seq, kind, **payload):
        return SimpleNamespace(seq=seq, type=kind, frame_id="f", payload=payload)

    pushed = event(1, "frame.pushed", depth=0, budget_total=1000, max_subframe_depth=8)
    reserved = event(2, "frame.reserved", purpose="p", amount=300)
    old_pop = event(3, "frame.popped", status="completed")
    new_pop = event(3, "frame.popped", status="completed", released={"p": 300})
    for pop in (old_pop, new_pop):
        frame = replay([pushed, reserved, pop]).frames["f"]
        assert (frame["budget_reserved"], frame["reservations"]) == (0, {})


def test_the_migration_releases_what_frames_closed_before_it_held(api, capsys):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("frames.migrations.0012_closed_frames_release_reservations")
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    root = frame_push(session=session, goal="root", budget_total=1_000)
    closed = frame_push(session=session, parent=root, goal="done", budget_total=500)
    frame_reserve(frame=closed, purpose="answer", amount=200)
    frame_pop(frame=closed, status="completed")
    frame_reserve(frame=root, purpose="plan", amount=100)
    # As a pop before reservations were released left it:
    Frame.objects.filter(pk=closed.pk).update(budget_reserved=200, reservations={"answer": 200})
    migration.release(apps, None)
    closed.refresh_from_db()
    root.refresh_from_db()
    assert (closed.budget_reserved, closed.reservations) == (0, {})
    assert (root.budget_reserved, root.reservations) == (100, {"plan": 100})  # still open
    call_command("rebuild_projections", "--verify")  # the tables are what the log replays
