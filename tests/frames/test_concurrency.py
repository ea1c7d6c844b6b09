"""Budget arithmetic under real parallel transactions on PostgreSQL."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import DatabaseError, connection, transaction

from contextops.errors import Conflict, InsufficientTokens
from frames.models import Frame, Session
from frames.services.sessions import session_create
from frames.services.stack import frame_pop, frame_push
from frames.services.usage import usage_record
from tests.conftest import postgres_only

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]


def _in_thread(barrier, work):
    def run(*args):
        try:
            barrier.wait(timeout=30)
            return work(*args)
        finally:
            connection.close()

    return run


def test_twenty_agents_allocating_from_one_parent_never_overdraw_it(api):
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    parent = frame_push(session=session, goal="Fan out", budget_total=10_000)
    barrier = threading.Barrier(20)

    def allocate(index):
        try:
            frame_push(
                session=Session.objects.get(pk=session.pk),
                parent=Frame.objects.get(pk=parent.pk),
                goal=f"worker {index}",
                budget_total=700,
            )
            return "ok"
        except InsufficientTokens:
            return "refused"

    with ThreadPoolExecutor(20) as pool:
        outcomes = list(pool.map(_in_thread(barrier, allocate), range(20)))

    parent.refresh_from_db()
    assert outcomes.count("ok") == 14  # 14 x 700 = 9800 fits in 10000; a 15th would not
    assert outcomes.count("refused") == 6
    assert parent.subcall_allocation == 9800
    assert parent.children_count == 14
    assert Frame.objects.filter(parent=parent).count() == 14


def test_a_thousand_concurrent_usage_records_sum_exactly(api):
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    frame = frame_push(session=session, goal="Chat", budget_total=10_000_000)
    barrier = threading.Barrier(8)

    def record(batch):
        for i in range(125):
            usage_record(
                session=session,
                frame=frame,
                input_tokens=batch + 1,
                output_tokens=i % 7,
                cache_read_input_tokens=3,
            )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(_in_thread(barrier, record), range(8)))

    frame.refresh_from_db()
    session.refresh_from_db()
    expected_input = sum((b + 1) * 125 for b in range(8))
    expected_output = 8 * sum(i % 7 for i in range(125))
    assert session.api_calls_total == 1000
    assert session.input_tokens_total == expected_input
    assert session.output_tokens_total == expected_output
    assert session.cache_read_tokens_total == 3000
    assert frame.budget_used == expected_input + expected_output + 3000
    assert sorted(session.events.values_list("seq", flat=True)) == list(
        range(1, session.last_event_seq + 1)
    )


def test_concurrent_retries_of_one_usage_record_charge_it_once(api):
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    frame = frame_push(session=session, goal="Chat", budget_total=10_000)
    barrier = threading.Barrier(8)

    def record(_):
        return usage_record(
            session=session, frame=frame, input_tokens=90, output_tokens=10, message_id="msg_1"
        ).pk

    with ThreadPoolExecutor(8) as pool:
        records = set(pool.map(_in_thread(barrier, record), range(8)))

    frame.refresh_from_db()
    session.refresh_from_db()
    assert len(records) == 1
    assert (frame.budget_used, session.api_calls_total) == (100, 1)


def _wait_until_someone_waits_for_me(timeout: float = 10.0) -> None:
    """Return once another backend is blocked by this connection's transaction."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity"
                " WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)))"
            )
            if cursor.fetchone()[0]:
                return
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # else one read a transaction
            time.sleep(0.01)
    raise AssertionError("nobody waited for this transaction's locks")


def test_a_pop_holds_the_session_while_it_waits_for_its_frame(api):
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    root = frame_push(session=session, goal="root", budget_total=1000)
    child = frame_push(session=session, parent=root, goal="child", budget_total=100)
    frame_held, session_probed = threading.Event(), threading.Event()

    def hold_the_frame():
        try:
            with transaction.atomic():
                Frame.objects.select_for_update().get(pk=child.pk)
                frame_held.set()
                _wait_until_someone_waits_for_me()
                with ThreadPoolExecutor(1) as probe:
                    # Another writer of the session finds its row taken: the pop holds it.
                    taken = probe.submit(_session_taken, session.pk).result()
                session_probed.set()
            return taken
        finally:
            connection.close()

    def pop():
        try:
            frame_held.wait(timeout=10)
            return frame_pop(frame=child.pk, status="completed").status
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        taken, popped = pool.submit(hold_the_frame), pool.submit(pop)
        assert taken.result() is True
        assert popped.result() == "completed"
    assert session_probed.is_set()


def _session_taken(pk) -> bool:
    try:
        with transaction.atomic():
            Session.objects.select_for_update(nowait=True).get(pk=pk)
        return False
    except DatabaseError:
        return True
    finally:
        connection.close()


def test_a_pop_that_waited_for_a_push_under_its_frame_sees_the_new_child(api):
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    root = frame_push(session=session, goal="root", budget_total=1000)
    pushed = threading.Event()

    def push_and_hold():
        try:
            with transaction.atomic():
                frame_push(session=session.pk, parent=root.pk, goal="late", budget_total=10)
                pushed.set()
                _wait_until_someone_waits_for_me()  # the pop, its snapshot already taken
        finally:
            connection.close()

    def pop():
        try:
            pushed.wait(timeout=10)
            frame_pop(frame=root.pk, status="completed")
            return "popped"
        except Conflict as refused:
            return refused.code
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        holder, outcome = pool.submit(push_and_hold), pool.submit(pop)
        holder.result()
        assert outcome.result() == "frame_has_open_children"
    root.refresh_from_db()
    assert root.status == "waiting" and root.subcall_allocation == 10


def test_parallel_pops_and_pushes_under_one_parent_settle_exactly(api):
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    root = frame_push(session=session, goal="Fan out", budget_total=100_000)
    children = [
        frame_push(session=session, parent=root, goal=f"c{i}", budget_total=100) for i in range(12)
    ]
    for child in children:
        usage_record(session=session, frame=child, input_tokens=7, output_tokens=3)
    barrier = threading.Barrier(8)

    def work(index):
        if index % 2:
            frame_push(session=session.pk, parent=root.pk, goal="new", budget_total=50)
            return "pushed"
        for child in children[index // 2 :: 4]:
            frame_pop(frame=child.pk, status="completed")
        return "popped"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(_in_thread(barrier, work), range(8)))

    assert outcomes.count("pushed") == 4
    root.refresh_from_db()
    assert Frame.objects.filter(parent=root, status="completed").count() == 12
    assert (root.status, root.budget_used, root.subcall_allocation) == ("waiting", 120, 200)
    session.refresh_from_db()
    assert sorted(session.events.values_list("seq", flat=True)) == list(
        range(1, session.last_event_seq + 1)
    )


def test_a_context_pack_is_stored_while_a_writer_holds_its_session_and_frame(api):
    """A stored pack refers to its session and frame, and storing it checks that both
    exist (a key-share lock on each). Writers lock those rows without claiming their keys,
    so the pack neither waits behind a write nor deadlocks with one: it used to take the
    frame's key-share lock, then wait for the session's, while a pop holding the session
    waited for the frame."""
    from frames.context.pack import context_pack_assemble
    from frames.locks import frame_lock, session_lock
    from frames.models import ContextPackRecord

    session = session_create(organization=api.organization, agent=api.agent, identity={})
    frame = frame_push(session=session, goal="Answer", budget_total=10_000)
    context_pack_assemble(session=session, budget_tokens=2_000)  # out of loading
    held, release = threading.Event(), threading.Event()

    def writer():
        try:
            with transaction.atomic():
                session_lock(session.pk)
                frame_lock(frame.pk)
                held.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    def pack():
        try:
            fresh = Session.objects.get(pk=session.pk)
            return context_pack_assemble(session=fresh, budget_tokens=2_000).record.pk
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        writing = pool.submit(writer)
        assert held.wait(timeout=30)
        packing = pool.submit(pack)
        try:
            stored = packing.result(timeout=20)  # while the writer still holds both rows
        finally:
            release.set()
        writing.result(timeout=30)
    assert ContextPackRecord.objects.filter(pk=stored, session_id=session.pk).exists()
