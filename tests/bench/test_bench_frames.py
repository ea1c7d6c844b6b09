"""Frames at scale: a session of 10,000 frames and 100,000 handles.

Prints push and pop latency through the API (p50, p95), concurrent usage records per
second, and the session page and one expand request with their query counts, and
writes the figures to docs/benchmarks-frames.md. Nothing here asserts a time; the
query counts are asserted elsewhere (tests/frames/test_views.py).
"""

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from frames import services
from frames.models import ContextHandle, Frame
from tests.conftest import IS_POSTGRES

FRAMES = 10_000
HANDLES = 100_000
ROUNDS = 200
DOC = Path(settings.BASE_DIR) / "docs" / "benchmarks-frames.md"

pytestmark = pytest.mark.django_db(transaction=True)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


def _big_session(api):
    session = services.session_create(
        organization=api.organization, agent=api.agent, identity={}, title="bench"
    )
    root = services.frame_push(session=session, goal="Bench root", budget_total=10**9)
    # A tree of depth 3: 100 children of the root, each with 99 children of its own.
    level1 = Frame.objects.bulk_create(
        Frame(
            session=session,
            organization=session.organization,
            parent=root,
            depth=1,
            goal=f"Level 1 #{i}",
            budget_total=1000,
            children_count=99,
        )
        for i in range(100)
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
            for j in range(99)
        ),
        batch_size=2000,
    )
    Frame.objects.filter(pk=root.pk).update(children_count=100, subcall_allocation=100_000)
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
            for i in range(HANDLES)
        ),
        batch_size=5000,
    )
    return session, root, level1[0]


def _timed_requests(client, method, urls_and_bodies):
    samples = []
    for url, body in urls_and_bodies:
        started = time.perf_counter()
        response = getattr(client, method)(url, body)
        samples.append(time.perf_counter() - started)
        assert response.status_code in (200, 201), response.content
    return samples


def _page(member_client, url):
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        assert member_client.get(url).status_code == 200
    return (time.perf_counter() - started) * 1000, len(queries)


def test_bench_frames(api, make_user):
    session, root, first_child = _big_session(api)
    assert Frame.objects.filter(session=session).count() == 1 + 100 + 9900
    pushed = []

    def push_bodies():
        for i in range(ROUNDS):
            yield (
                f"/sessions/{session.pk}/frames",
                {
                    "goal": f"Bench push {i}",
                    "parent_frame_id": str(root.pk),
                    "budget": {"total": 100},
                },
            )

    started = time.perf_counter()
    push_samples = []
    for url, body in push_bodies():
        t = time.perf_counter()
        response = api.post(url, body)
        push_samples.append(time.perf_counter() - t)
        pushed.append(response.json()["id"])
    pop_samples = _timed_requests(
        api, "post", [(f"/frames/{fid}/pop", {"status": "completed"}) for fid in pushed]
    )
    del started

    worker_frame = services.frame_push(
        session=session, parent=root, goal="Usage target", budget_total=10**8
    )
    threads, per_thread = (8, 250) if IS_POSTGRES else (1, 1000)
    barrier = threading.Barrier(threads)

    def record(_):
        try:
            barrier.wait()
            for _ in range(per_thread):
                services.usage_record(
                    session=session, frame=worker_frame, input_tokens=10, output_tokens=5
                )
        finally:
            connection.close()

    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(record, range(threads)))
    usage_rate = threads * per_thread / (time.perf_counter() - t)

    member = Client()
    member.force_login(make_user(username="bench-viewer"))
    session_ms, session_queries = _page(member, f"/sessions/{session.pk}/")
    expand_ms, expand_queries = _page(member, f"/frames/{first_child.pk}/children/")
    root_expand_ms, root_expand_queries = _page(member, f"/frames/{root.pk}/children/")

    push_p50, push_p95 = _percentiles(push_samples)
    pop_p50, pop_p95 = _percentiles(pop_samples)
    backend = "PostgreSQL" if IS_POSTGRES else "SQLite"
    lines = [
        f"| push a frame (API) | {push_p50:.2f} ms | {push_p95:.2f} ms | |",
        f"| pop a frame (API) | {pop_p50:.2f} ms | {pop_p95:.2f} ms | |",
        f"| usage records, {threads} thread(s) | {usage_rate:.0f} / s | | |",
        f"| session page | {session_ms:.1f} ms | | {session_queries} queries |",
        f"| expand a frame of 99 children | {expand_ms:.1f} ms | | {expand_queries} queries |",
        f"| expand the root (first 100 of 200+) | {root_expand_ms:.1f} ms | | {root_expand_queries} queries |",
    ]
    report = "\n".join(
        [
            f"## Frames on {backend}: {FRAMES:,} frames, {HANDLES:,} handles",
            "",
            "| operation | p50 / rate | p95 | database |",
            "| --- | --- | --- | --- |",
            *lines,
            "",
        ]
    )
    print("\n" + report)
    DOC.write_text(report)
