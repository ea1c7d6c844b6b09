"""A context pack reads what it needs in a few queries, however many facts were
superseded and however many handles the frame holds (the large case of
tests/bench/test_bench_context_pack.py, scaled down)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames.models import ContextHandle
from tests.bench.test_bench_context_pack import QUERY, _add_facts, _pack_session

CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def _pack_queries(api, session) -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as queries:
        response = api.post(
            f"/sessions/{session.pk}/context-pack", {"budget_tokens": 8_000, "query": QUERY}
        )
    assert response.status_code == 200, response.content[:300]
    statements = [q for q in queries.captured_queries if not q["sql"].startswith(CONTROL)]
    return len(statements), response.json()


def _handles(session, frame, first: int, count: int) -> None:
    ContextHandle.objects.bulk_create(
        ContextHandle(
            frame=frame,
            session=session,
            kind="document",
            priority="high" if i % 7 else "critical",
            content=f"Handle {i}. Some evidence text.",
            estimated_tokens=9,
        )
        for i in range(first, first + count)
    )


@pytest.mark.django_db
def test_it_packs_in_seven_queries_whatever_the_superseded_facts_and_handles(api):
    org = api.organization
    session, frame = _pack_session(org, budget_total=10**6)
    # Enough handles that the first read of the ranking does not all fit: the pack then
    # reads no deeper (test_context_pack_facts.py), in this case as in the large one.
    _handles(session, frame, 0, 200)
    _add_facts(org, 0, 500, 0)
    _pack_queries(api, session)  # the first pack moves the session out of loading
    small, body = _pack_queries(api, session)
    assert any(d["section"] == "facts" for d in body["dropped"])

    _handles(session, frame, 200, 420)
    _add_facts(org, 500, 500, 4_000)
    large, body = _pack_queries(api, session)
    # PostgreSQL reads the ranked facts and the facts governing their subjects in one
    # statement; elsewhere they are two.
    assert large == small == (7 if connection.vendor == "postgresql" else 8)
    assert body["facts"] and body["segments"]
    assert all(not f["key"].endswith(tuple(f".v{n}" for n in range(1, 10))) for f in body["facts"])
