"""The hot writes cost a handful of queries, whatever the session already holds.

Counted at the service: transaction control (BEGIN, COMMIT, savepoints) is left out,
every statement that reads or writes a row is counted. On PostgreSQL the log's UPDATE and
INSERT, with the rows the write moves, are one statement, so a write costs two fewer (a
pop, which moves two rows, three); a pop's two locking reads (the session, then the frame
and its parent) are one statement as well, and so are a push's (the session, then the parent).
A usage record stays at five so that a cached price read still fits the budget.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames.models import Event, Frame, Session
from frames.services.sessions import session_create
from frames.services.stack import frame_pop, frame_push
from frames.services.usage import usage_record
from tests.conftest import IS_POSTGRES

pytestmark = pytest.mark.django_db(transaction=True)

CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
# Statements one write may cost: SQLite's, less what PostgreSQL folds into one statement.
PUSH, POP, USAGE = (3, 2, 3) if IS_POSTGRES else (6, 6, 5)


def _statements(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(CONTROL)]


def _session_with_siblings(org, siblings: int = 20):
    session = session_create(organization=org, identity={"user_name": "Ada"})
    root = frame_push(session=session, goal="root", budget_total=100_000)
    for i in range(siblings):
        child = frame_push(session=session, parent=root, goal=f"s{i}", budget_total=10)
        frame_pop(frame=child, status="completed")
    return Session.objects.get(pk=session.pk), Frame.objects.get(pk=root.pk)


def test_it_pushes_a_child_in_six_queries_with_every_event(api):
    session, root = _session_with_siblings(api.organization)
    before = session.last_event_seq
    with CaptureQueriesContext(connection) as queries:
        child = frame_push(session=session, parent=root, goal="child", budget_total=500)
    assert len(_statements(queries)) <= PUSH, _statements(queries)
    root.refresh_from_db()
    assert root.status == "waiting" and root.subcall_allocation == 500
    events = list(Event.objects.filter(session=session, seq__gt=before).order_by("seq"))
    assert [e.type for e in events] == ["frame.pushed", "frame.updated"]
    assert events[0].frame_id == child.pk and events[1].payload["from"] == "active"
    assert Session.objects.get(pk=session.pk).last_event_seq == before + 2


def test_it_pops_a_child_in_six_queries_and_wakes_the_parent(api):
    session, root = _session_with_siblings(api.organization)
    child = frame_push(session=session, parent=root, goal="child", budget_total=500)
    usage_record(session=session, frame=child, input_tokens=40, output_tokens=2)
    before = Session.objects.get(pk=session.pk).last_event_seq
    child = Frame.objects.select_related("session").get(pk=child.pk)
    with CaptureQueriesContext(connection) as queries:
        popped = frame_pop(frame=child, status="completed", result_refs=["r"])
    assert len(_statements(queries)) <= POP, _statements(queries)
    assert popped.status == "completed" and popped.result_refs == ["r"]
    root.refresh_from_db()
    assert (root.status, root.budget_used, root.subcall_allocation) == ("active", 42, 0)
    types = list(
        Event.objects.filter(session=session, seq__gt=before)
        .order_by("seq")
        .values_list("type", flat=True)
    )
    assert types == ["frame.popped", "frame.updated"]


def test_it_keeps_a_parent_waiting_while_another_child_is_open(api):
    session, root = _session_with_siblings(api.organization, siblings=0)
    first = frame_push(session=session, parent=root, goal="a", budget_total=10)
    frame_push(session=session, parent=root, goal="b", budget_total=10)
    frame_pop(frame=Frame.objects.get(pk=first.pk), status="completed")
    root.refresh_from_db()
    assert root.status == "waiting" and root.subcall_allocation == 10


def test_it_records_usage_in_five_queries(api):
    session, root = _session_with_siblings(api.organization)
    before = session.last_event_seq
    with CaptureQueriesContext(connection) as queries:
        usage = usage_record(
            session=session,
            frame=root,
            input_tokens=100,
            output_tokens=20,
            cache_read_input_tokens=5,
            message_id="msg_1",
        )
    assert len(_statements(queries)) <= USAGE, _statements(queries)
    assert usage.frame.budget_used == 125
    stored = Session.objects.get(pk=session.pk)
    assert (stored.input_tokens_total, stored.api_calls_total) == (100, 1)
    assert stored.last_event_seq == before + 1
    assert Event.objects.get(session=session, seq=before + 1).type == "usage.recorded"


def test_it_charges_a_replayed_message_once_and_leaves_the_session_as_it_was(api):
    session, root = _session_with_siblings(api.organization, siblings=0)
    first = usage_record(
        session=session, frame=root, input_tokens=100, output_tokens=20, message_id="m"
    )
    stored = Session.objects.get(pk=session.pk)
    again = usage_record(
        session=stored, frame=root, input_tokens=100, output_tokens=20, message_id="m"
    )
    assert again.pk == first.pk and again.frame.budget_used == 120
    after = Session.objects.get(pk=session.pk)
    assert (after.input_tokens_total, after.output_tokens_total, after.api_calls_total) == (
        100,
        20,
        1,
    )
    assert after.last_event_seq == stored.last_event_seq
    assert Event.objects.filter(session=session, type="usage.recorded").count() == 1


def test_it_numbers_events_right_from_a_stale_copy_of_the_session(api):
    session, root = _session_with_siblings(api.organization, siblings=0)
    stale = Session.objects.get(pk=session.pk)
    frame_push(session=session, parent=root, goal="moves the log on", budget_total=5)
    child = frame_push(session=stale, parent=root, goal="from the stale copy", budget_total=5)
    seqs = list(Event.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert (
        Event.objects.get(session=session, frame_id=child.pk, type="frame.pushed").seq == seqs[-1]
    )
