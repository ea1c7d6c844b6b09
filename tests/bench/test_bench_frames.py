"""Frames at scale: a session of 10,000 frames and 100,000 handles beside one of 10.

Prints push and pop latency through the API (p50, p95), concurrent usage records per
second, and the session page and expand requests, each with its query count, at both
sizes, and writes the figures to docs/benchmarks-frames-<database>.md. Nothing here
asserts a time; it asserts that no query count grows with the tree. The push, pop and
usage figures of docs/benchmarks.json, beside the floor, come from
tests/bench/test_bench_hot_paths.py.
"""

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, reset_queries
from django.test import Client
from django.test.utils import CaptureQueriesContext

from frames.models import ContextHandle, Frame
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from frames.services.usage import usage_record
from tests.bench.report import database_vendor, write_section
from tests.conftest import IS_POSTGRES

FRAMES = 10_000
HANDLES = 100_000
ROUNDS = 200

pytestmark = pytest.mark.django_db(transaction=True)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


def _session_of(api, wide: int, deep: int, handles: int):
    """A tree of depth 3: ``wide`` children of the root, each with ``deep`` children, and
    ``handles`` handles spread over the leaves."""
    session = session_create(
        organization=api.organization, agent=api.agent, identity={}, title="bench"
    )
    root = frame_push(session=session, goal="Bench root", budget_total=10**9)
    level1 = Frame.objects.bulk_create(
        Frame(
            session=session,
            organization=session.organization,
            parent=root,
            depth=1,
            goal=f"Level 1 #{i}",
            budget_total=1000,
            children_count=deep,
        )
        for i in range(wide)
    )
    Frame.objects.bulk_create(
        (
            Frame(
                session=session,
                organization=session.organization,
                parent=parent,
                depth=2,
                goal=f"Level 2 #{j}",
                budget_total=10,
            )
            for parent in level1
            for j in range(deep)
        ),
        batch_size=2000,
    )
    Frame.objects.filter(pk=root.pk).update(children_count=wide, subcall_allocation=1000 * wide)
    frame_ids = list(Frame.objects.filter(session=session, depth=2).values_list("pk", flat=True))
    ContextHandle.objects.bulk_create(
        (
            ContextHandle(
                frame_id=frame_ids[i % len(frame_ids)],
                session=session,
                kind="document",
                content="Evidence.",
                estimated_tokens=3,
            )
            for i in range(handles)
        ),
        batch_size=5000,
    )
    return session, root, level1[0]


def _timed(client, method, url, body=None):
    reset_queries()  # the log keeps 9,000 queries; a full one would count nothing new
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = getattr(client, method)(url, body) if body is not None else client.get(url)
        elapsed = time.perf_counter() - started
    assert response.status_code in (200, 201), response.content[:300]
    return elapsed, len(queries), response


def _measure_tree(api, member, session, root, first_child) -> dict:
    """Push and pop latency with their query counts, the session page and two expands."""
    push, pop, pushed = [], [], []
    push_queries = pop_queries = 0
    for i in range(ROUNDS):
        body = {
            "goal": f"Bench push {i}",
            "parent_frame_id": str(root.pk),
            "budget": {"total": 100},
        }
        elapsed, push_queries, response = _timed(
            api, "post", f"/sessions/{session.pk}/frames", body
        )
        push.append(elapsed)
        pushed.append(response.json()["id"])
    for frame_id in pushed:
        elapsed, pop_queries, _ = _timed(
            api, "post", f"/frames/{frame_id}/pop", {"status": "completed"}
        )
        pop.append(elapsed)
    figures = {
        "push": (*_percentiles(push), push_queries),
        "pop": (*_percentiles(pop), pop_queries),
    }
    for name, url in (
        ("session page", f"/sessions/{session.pk}/"),
        ("expand a level-1 frame", f"/frames/{first_child.pk}/children/"),
        ("expand the root (first page)", f"/frames/{root.pk}/children/"),
    ):
        _timed(member, "get", url)  # warm-up
        elapsed, queries, _ = _timed(member, "get", url)
        figures[name] = (elapsed * 1000, None, queries)
    return figures


def _usage_rate(session, root) -> tuple[int, float]:
    target = frame_push(session=session, parent=root, goal="Usage target", budget_total=10**8)
    threads, per_thread = (8, 250) if IS_POSTGRES else (1, 1000)
    barrier = threading.Barrier(threads)

    def record(_):
        try:
            barrier.wait()
            for _ in range(per_thread):
                usage_record(session=session, frame=target, input_tokens=10, output_tokens=5)
        finally:
            connection.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(record, range(threads)))
    return threads, threads * per_thread / (time.perf_counter() - started)


def test_bench_frames(api, make_user):
    member = Client()
    member.force_login(make_user(username="bench-viewer"))
    small = _session_of(api, wide=3, deep=3, handles=100)
    big = _session_of(api, wide=100, deep=99, handles=HANDLES)
    assert Frame.objects.filter(session=big[0]).count() == FRAMES + 1
    sizes = {
        "13 frames, 100 handles": _measure_tree(api, member, *small),
        f"{FRAMES + 1:,} frames, {HANDLES:,} handles": _measure_tree(api, member, *big),
    }
    threads, usage_rate = _usage_rate(big[0], big[1])

    (small_name, small_figures), (big_name, big_figures) = sizes.items()
    for operation, (_, _, queries) in small_figures.items():
        assert big_figures[operation][2] == queries, f"{operation}: queries grow with the tree"

    def cell(p50, p95):
        return f"{p50:.2f} ms" + (f" / {p95:.2f} ms" if p95 is not None else "")

    backend = "PostgreSQL" if IS_POSTGRES else "SQLite"
    lines = [
        f"## Frames on {backend}: a session of {big_name} beside one of {small_name}",
        "",
        "`make bench` (tests/bench/test_bench_frames.py), through the Django test client; push and pop",
        f"are {ROUNDS} requests each (p50 / p95), pages one request after a warm-up. The query count",
        "is per request, the same at both sizes (the benchmark asserts it). An expand's time follows",
        "the children it renders (3 in the small tree, 99 in the large one), not the tree's size.",
        "",
        f"| operation | {small_name} | queries | {big_name} | queries |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for operation, (p50, p95, queries) in small_figures.items():
        big_p50, big_p95, big_queries = big_figures[operation]
        lines.append(
            f"| {operation} | {cell(p50, p95)} | {queries} | {cell(big_p50, big_p95)} | {big_queries} |"
        )
    lines += [
        "",
        f"Usage records, {threads} thread(s) at once on one frame of the large session: "
        f"{usage_rate:.0f} per second, every one counted (see tests/frames/test_concurrency.py).",
        "",
    ]
    report = "\n".join(lines)
    print("\n" + report)
    write_section(f"frames-{database_vendor()}", report)
