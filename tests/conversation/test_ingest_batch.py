"""Many messages in one request: counted as one batch and written a table at a time,
so a request of 400 messages costs (about) the queries of one of 40."""

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames.conversation.models import Message, ToolUse, Turn
from frames.models import Session
from tests.bench.test_bench_conversation import _turn_messages
from tests.conftest import IS_POSTGRES

pytestmark = pytest.mark.django_db(transaction=True)


def _session(api) -> str:
    response = api.post("/sessions", {"identity": {"user_name": "Ada"}})
    assert response.status_code == 201
    return response.json()["id"]


def _append(api, sid: str, turns: range) -> tuple[int, float, dict]:
    messages = [m for i in turns for m in _turn_messages(i)]
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = api.post(f"/sessions/{sid}/messages", {"messages": messages})
        elapsed = time.perf_counter() - started
    assert response.status_code in (200, 201), response.content[:300]
    return len(queries), len(messages) / elapsed, response.json()


def test_it_writes_a_batch_of_messages_in_the_queries_of_a_small_one(api):
    small_sid, large_sid = _session(api), _session(api)
    small, _, _ = _append(api, small_sid, range(10))
    large, rate, body = _append(api, large_sid, range(100))
    # SQLite binds at most 999 parameters a statement, so its inserts go in batches of
    # about a hundred rows; PostgreSQL writes each table in one statement.
    assert large <= small + (0 if IS_POSTGRES else 6), "queries grow with the messages"
    session = Session.objects.get(pk=large_sid)
    assert Message.objects.filter(session=session).count() == 400
    assert list(
        Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True)
    ) == list(range(1, 401))
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [t.index for t in turns] == list(range(100))
    assert all(len(t.tool_calls) == 1 and len(t.tool_results) == 1 for t in turns)
    assert ToolUse.objects.filter(session=session).count() == 100
    assert turns[1].has_error and turns[2].previous_error  # is_error on i % 40 == 1
    assert len(body["turns"]) == 100
    print(f"\n400 messages in one request: {rate:.0f} messages/s")


def test_it_joins_a_tool_result_to_the_turn_of_an_earlier_request(api):
    sid = _session(api)
    first = _turn_messages(0)
    _append_raw = api.post(f"/sessions/{sid}/messages", {"messages": first[:2]})
    assert _append_raw.status_code in (200, 201)
    again = api.post(f"/sessions/{sid}/messages", {"messages": first[2:]})
    assert again.status_code in (200, 201)
    (turn,) = Turn.objects.filter(session_id=sid)
    assert turn.tool_results[0]["tool_use_id"] == "toolu_0" and turn.assistant_response
