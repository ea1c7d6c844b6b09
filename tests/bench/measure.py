"""What the benchmarks share: percentiles, and a request's statements counted as the
query-count tests count them (transaction control left out)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, reset_queries
from django.test.utils import CaptureQueriesContext

CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def p50_p95(samples_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(samples_ms)
    return statistics.median(ordered), ordered[max(0, int(0.95 * len(ordered)) - 1)]


def statements(captured: list[dict[str, Any]]) -> list[str]:
    """Every statement that reads or writes a row (BEGIN, COMMIT and savepoints left out)."""
    return [q["sql"] for q in captured if not q["sql"].startswith(CONTROL)]


def in_transaction(captured: list[dict[str, Any]]) -> list[str]:
    """The statements between the first BEGIN (or SAVEPOINT) and its COMMIT: the write's own
    cost, what tests/frames/test_write_queries.py counts at the service."""
    inside, depth, found = [], 0, []
    for q in captured:
        sql = q["sql"]
        if sql.startswith(("BEGIN", "SAVEPOINT")):
            depth += 1
        elif sql.startswith(("COMMIT", "RELEASE", "ROLLBACK")):
            depth = max(0, depth - 1)
            if depth == 0 and inside:
                found, inside = found + inside, []
        elif depth:
            inside.append(sql)
    return found


@dataclass
class Series:
    """Samples of one operation: milliseconds and statement counts, one a request.

    ``queries`` is the count most requests had: once a minute a request also stamps its
    API key's ``last_used_at`` (one more statement), which ``most_queries`` shows."""

    times_ms: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    write_counts: list[int] = field(default_factory=list)

    def timed(self, call: Callable[[], Any], ok: tuple[int, ...] = (200, 201)) -> Any:
        reset_queries()  # the log keeps 9,000 queries; a full one would count nothing new
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = call()
            elapsed = time.perf_counter() - started
        assert response.status_code in ok, response.content[:300]
        self.times_ms.append(elapsed * 1000)
        self.counts.append(len(statements(captured.captured_queries)))
        self.write_counts.append(len(in_transaction(captured.captured_queries)))
        return response

    @property
    def queries(self) -> int:
        return statistics.mode(self.counts)

    @property
    def write_queries(self) -> int:
        return statistics.mode(self.write_counts)

    @property
    def most_queries(self) -> int:
        return max(self.counts)

    @property
    def p50(self) -> float:
        return p50_p95(self.times_ms)[0]

    @property
    def p95(self) -> float:
        return p50_p95(self.times_ms)[1]
