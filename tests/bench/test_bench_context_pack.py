"""Context-pack assembly at scale, beside the trivial health endpoint.

A session with 1,000 then 10,000 valid facts (and 50,000 superseded ones at the larger
size) and a frame with 1,000 handles. Prints p50 / p95 and the query count of each
and writes them to docs/benchmarks-context.md. With the facts app not installed yet,
facts come from an in-memory stand-in for its selector, and the table says so.
"""

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames import context_pack
from frames.models import ContextHandle, Frame, Session

ROUNDS = 30
HANDLES = 1_000
DOC = Path(settings.BASE_DIR) / "docs" / "benchmarks-context.md"


@dataclass
class StandInFact:
    pk: int
    key: str
    value: str
    tokens: int
    is_constraint: bool = False
    source: str = "user"
    scope: str = "global"


def _facts_model():
    try:
        from facts.models import Fact
    except ImportError:
        return None
    return Fact if context_pack.facts_for_context is not None else None


def _add_facts(org, session, valid: int, superseded: int, start: int) -> None:
    """Real Fact rows when the facts app is there: ``valid`` valid, ``superseded`` superseded."""
    Fact = _facts_model()
    names = {f.name for f in Fact._meta.get_fields()}
    rows = []
    for i in range(start, start + valid + superseded):
        is_valid = i - start < valid
        fields = {
            "organization": org,
            "key": f"bench.fact.{i}",
            "value": f"value {i} of the benchmark",
            "source": "user",
            "tokens": 8,
        }
        if "subject" in names:
            fields["subject"] = f"subject {i % 500}"
        if "is_valid" in names:
            fields["is_valid"] = is_valid
        if "scope" in names:
            fields["scope"] = "global"
        if "is_constraint" in names:
            fields["is_constraint"] = i % 100 == 0
        rows.append(Fact(**{k: v for k, v in fields.items() if k in names}))
    Fact.objects.bulk_create(rows, batch_size=2_000)


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
def test_bench_context_pack_assembly(api, monkeypatch):
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
    real = _facts_model() is not None
    stand_in: list[StandInFact] = []
    if not real:
        monkeypatch.setattr(context_pack, "facts_for_context", lambda **kw: stand_in[: kw["limit"]])
    path = f"/sessions/{session.id}/context-pack"
    body = {"budget_tokens": 8_000, "query": "evidence subject 42"}
    rows = []
    for valid, superseded in ((1_000, 0), (10_000, 50_000)):
        already = len(stand_in) if not real else None
        if real:
            previous = rows[-1][0] if rows else 0
            _add_facts(org, session, valid - previous, superseded, start=previous * 10)
        else:
            stand_in.extend(
                StandInFact(i, f"bench.fact.{i}", f"value {i}", 8, i % 100 == 0)
                for i in range(already, valid)
            )
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
        f"budget 8,000 tokens. Facts: {'real Fact rows through facts.selectors.facts_for_context' if real else 'an in-memory stand-in for facts_for_context (the facts app was not installed when this ran)'}.",
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
