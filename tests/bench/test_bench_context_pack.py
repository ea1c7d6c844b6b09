"""Context-pack assembly at scale, beside the trivial health endpoint.

A session with 1,000 then 10,000 valid facts (and 50,000 superseded ones at the larger
size, as real supersession chains of five or six old versions behind each head) and a
frame with 1,000 handles. Facts carry their search text as a write through the API
stores it, so the relevance ranking (PostgreSQL full text, LIKE elsewhere) does its real
work. Prints p50 / p95 and the query count of each and writes them to
docs/benchmarks-context.md.
"""

import statistics
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from facts.models import Fact
from frames.models import ContextHandle, Frame, Session

ROUNDS = 30
HANDLES = 1_000
DOC = Path(settings.BASE_DIR) / "docs" / "benchmarks-context.md"
QUERY = "evidence subject 42"


def _version(org, i: int, chain, version: int, head: bool, supersedes=None) -> Fact:
    key = f"bench.fact.{i}" if head else f"bench.fact.{i}.v{version}"
    subject = f"subject {i}"
    value = f"value {i} version {version} of the benchmark, evidence for topic {i % 500}"
    return Fact(
        organization=org,
        key=key,
        subject=subject,
        value=value,
        search_text=f"{key} {subject} {value}".lower(),
        source="user",
        authority="employee",
        is_valid=head,
        status=Fact.Status.ACTIVE if head else Fact.Status.SUPERSEDED,
        chain=chain,
        version=version,
        supersedes=supersedes,
        supersession_rule=Fact.Rule.EXPLICIT if supersedes else "",
        is_constraint=head and i % 100 == 0,
        tokens=18,
    )


def _add_facts(org, first: int, valid: int, superseded: int) -> None:
    """``valid`` chains from index ``first``, with ``superseded`` old versions spread over
    them; each version supersedes the one before, as explicit supersession writes them."""
    chains = [uuid.uuid4() for _ in range(valid)]
    depth = [superseded // valid + (1 if n < superseded % valid else 0) for n in range(valid)]
    previous: list[Fact | None] = [None] * valid
    for version in range(1, max(depth, default=0) + 2):
        layer = []
        for n in range(valid):
            if version > depth[n] + 1:
                continue
            head = version == depth[n] + 1
            layer.append(
                (n, _version(org, first + n, chains[n], version, head, supersedes=previous[n]))
            )
        Fact.objects.bulk_create([fact for _, fact in layer], batch_size=2_000)
        for n, fact in layer:
            previous[n] = fact


def _measure(api, path, body=None):
    times, queries = [], None
    for i in range(ROUNDS + 1):
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            response = api.post(path, body) if body is not None else api.get(path)
            elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.content[:300]
        if i == 0:
            continue  # warm-up: first use of the key stamps last_used_at
        times.append(elapsed)
        queries = len(ctx.captured_queries)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], queries


@pytest.mark.django_db
def test_bench_context_pack_assembly(api):
    org = api.organization
    session = Session.objects.create(
        organization=org,
        identity={"user_name": "Bench", "authority": "employee"},
        environment={"timezone": "UTC"},
    )
    frame = Frame.objects.create(
        session=session, organization=org, goal="bench", budget_total=1_000_000
    )
    priorities = ["critical", "high", "medium", "low", "background"]
    ContextHandle.objects.bulk_create(
        [
            ContextHandle(
                frame=frame,
                session=session,
                kind="document",
                priority=priorities[i % 5] if i % 50 == 0 else priorities[1 + i % 4],
                content=f"Handle {i}. " + "Some evidence text. " * 20,
                estimated_tokens=90,
                summary=f"Handle {i} summary." if i % 2 else "",
                summary_tokens=5 if i % 2 else 0,
            )
            for i in range(HANDLES)
        ],
        batch_size=1_000,
    )
    path = f"/sessions/{session.id}/context-pack"
    body = {"budget_tokens": 8_000, "query": QUERY}
    rows = []
    added = 0
    for valid, superseded in ((1_000, 0), (10_000, 50_000)):
        _add_facts(org, added, valid - added, superseded)
        added = valid
        assert Fact.objects.filter(organization=org, is_valid=True).count() == valid
        p50, p95, queries = _measure(api, path, body)
        h50, h95, hq = _measure(api, "/health")
        rows.append((valid, superseded, p50, p95, queries, h50, h95, hq))
        print(
            f"\n{valid:>6} valid / {superseded:>6} superseded facts, {HANDLES} handles: pack p50 {p50:.1f} ms p95 {p95:.1f} ms, {queries} queries; health p50 {h50:.1f} ms p95 {h95:.1f} ms, {hq} queries"
        )
    assert rows[0][4] == rows[1][4], "the query count must not grow with the number of facts"
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    lines = [
        "## Context-pack assembly",
        "",
        f"`make bench` (tests/bench/test_bench_context_pack.py), {ROUNDS} rounds after one warm-up, database {engine},",
        f"through the Django test client (full API stack: auth, validation, serialization). Frame with {HANDLES} handles,",
        f"budget 8,000 tokens, query {QUERY!r}. Facts: real rows in supersession chains, ranked by",
        "facts.selectors.facts_for_context (PostgreSQL full text over the stored tsvector; LIKE on SQLite).",
        "",
        "| valid facts | superseded facts | pack p50 ms | pack p95 ms | pack queries | health p50 ms | health p95 ms | health queries |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {v:,} | {s:,} | {p50:.1f} | {p95:.1f} | {q} | {h50:.1f} | {h95:.1f} | {hq} |"
        for v, s, p50, p95, q, h50, h95, hq in rows
    ]
    lines += [
        "",
        "No token counting happens on this path: counts come from storage (handles, summaries, facts).",
        "",
    ]
    DOC.write_text("\n".join(lines))
