"""Budget arithmetic under real parallel transactions on PostgreSQL."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from contextops.errors import InsufficientTokens
from frames import services
from frames.models import Frame, Session
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
    session = services.session_create(organization=api.organization, agent=api.agent, identity={})
    parent = services.frame_push(session=session, goal="Fan out", budget_total=10_000)
    barrier = threading.Barrier(20)

    def allocate(index):
        try:
            services.frame_push(
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
    session = services.session_create(organization=api.organization, agent=api.agent, identity={})
    frame = services.frame_push(session=session, goal="Chat", budget_total=10_000_000)
    barrier = threading.Barrier(8)

    def record(batch):
        for i in range(125):
            services.usage_record(
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
    session = services.session_create(organization=api.organization, agent=api.agent, identity={})
    frame = services.frame_push(session=session, goal="Chat", budget_total=10_000)
    barrier = threading.Barrier(8)

    def record(_):
        return services.usage_record(
            session=session, frame=frame, input_tokens=90, output_tokens=10, message_id="msg_1"
        ).pk

    with ThreadPoolExecutor(8) as pool:
        records = set(pool.map(_in_thread(barrier, record), range(8)))

    frame.refresh_from_db()
    session.refresh_from_db()
    assert len(records) == 1
    assert (frame.budget_used, session.api_calls_total) == (100, 1)
