"""Context-pack assembly at scale, beside the floor (an authenticated GET of one
working-set item, through the same client).

A session with 1,000 then 10,000 valid facts (and 50,000 superseded ones at the larger
size, as real supersession chains of five or six old versions behind each head) and a
frame with 1,000 handles. Facts carry their search text as a write through the API
stores it, so the relevance ranking (PostgreSQL full text, LIKE elsewhere) does its real
work. Prints p50 / p95 and the query count of each and writes them to
docs/benchmarks-context-<database>.md. The large case's figure in docs/benchmarks.json is
measured by tests/bench/test_bench_hot_paths.py, in the same rounds as the floor.
"""

import uuid

import pytest
from django.db import connection

from facts import services as fact_services
from facts.models import Fact
from frames.models import ContextHandle, Frame, Session
from tests.bench.measure import Series
from tests.bench.report import database_vendor, write_section

ROUNDS = 30
HANDLES = 1_000
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
    if connection.vendor == "postgresql":
        # What autovacuum does within a minute of such a load (60,000 inserts pass its
        # insert threshold): the planner and the ranking's word shares see the table as
        # it is, and the full-text index has merged the entries pending since the load.
        # (A test in a transaction, which VACUUM cannot run in, analyzes only.)
        with connection.cursor() as cursor:
            vacuum = "" if connection.in_atomic_block else "VACUUM "
            cursor.execute(f"{vacuum}ANALYZE facts_fact")


def _handles(session, frame, count: int) -> None:
    """``count`` handles of mixed priority, half of them summarized."""
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
            for i in range(count)
        ],
        batch_size=1_000,
    )


def _measure(api, path, body=None) -> Series:
    series = Series()
    for i in range(ROUNDS + 1):
        target = series if i else Series()  # warm-up: first use of the key stamps last_used_at
        target.timed(lambda: api.post(path, body) if body is not None else api.get(path), (200,))
    return series


def _pack_session(org, budget_total: int = 1_000_000) -> tuple[Session, Frame]:
    """A session of an employee with one frame, as the pack's cases start."""
    session = Session.objects.create(
        organization=org,
        identity={"user_name": "Bench", "authority": "employee"},
        environment={"timezone": "UTC"},
    )
    frame = Frame.objects.create(
        session=session, organization=org, goal="bench", budget_total=budget_total
    )
    return session, frame


@pytest.mark.django_db
def test_bench_context_pack_assembly(api):
    org = api.organization
    session, frame = _pack_session(org)
    _handles(session, frame, HANDLES)
    fact_services.working_set_put(session=session, key="plan", value="the next three steps")
    path = f"/sessions/{session.id}/context-pack"
    floor_path = f"/sessions/{session.id}/working-set/plan"
    body = {"budget_tokens": 8_000, "query": QUERY}
    rows = []
    added = 0
    for valid, superseded in ((1_000, 0), (10_000, 50_000)):
        _add_facts(org, added, valid - added, superseded)
        added = valid
        assert Fact.objects.filter(organization=org, is_valid=True).count() == valid
        pack = _measure(api, path, body)
        floor = _measure(api, floor_path)
        rows.append((valid, superseded, pack, floor))
        print(
            f"\n{valid:>6} valid / {superseded:>6} superseded facts, {HANDLES} handles: "
            f"pack p50 {pack.p50:.1f} ms p95 {pack.p95:.1f} ms, {pack.queries} queries; "
            f"floor p50 {floor.p50:.2f} ms, {floor.queries} queries"
        )
    assert rows[0][2].queries == rows[1][2].queries, "the query count grows with the facts"
    lines = [
        f"## Context-pack assembly ({database_vendor()})",
        "",
        f"`make bench` (tests/bench/test_bench_context_pack.py), {ROUNDS} rounds after one warm-up,",
        f"through the Django test client (full API stack: auth, validation, serialization). Frame with {HANDLES:,} handles,",
        f"budget 8,000 tokens, query {QUERY!r}. Facts: real rows in supersession chains, ranked by",
        "facts.selectors.facts_for_context (PostgreSQL full text over the stored tsvector, words found in",
        'half the facts or more selecting nothing: here "evidence" and "subject"; LIKE on SQLite).',
        "The floor is an authenticated `GET` of one working-set item, measured right after the packs;",
        "queries leave out transaction control. The large case's figure in docs/benchmarks.json",
        "comes from the hot-path benchmark, measured round by round beside its floor.",
        "",
        "| valid facts | superseded facts | pack p50 ms | pack p95 ms | pack queries | floor p50 ms | floor queries | pack × floor (p50) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {v:,} | {s:,} | {p.p50:.1f} | {p.p95:.1f} | {p.queries} | {f.p50:.2f} | {f.queries} | {p.p50 / f.p50:.1f} |"
        for v, s, p, f in rows
    ]
    lines += [
        "",
        "No token counting happens on this path: counts come from storage (handles, summaries, facts).",
    ]
    write_section(f"context-{database_vendor()}", "\n".join(lines))
