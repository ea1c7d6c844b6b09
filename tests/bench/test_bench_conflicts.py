"""`make bench-conflicts`: precision and recall of proposed supersessions on the labelled
pairs, written to docs/benchmarks-conflicts.md and ``figures.conflicts`` (docs/benchmarks.json
on PostgreSQL). Runs only with ``--bench``."""

import pytest

from tests.bench.conflict_pairs import markdown, measure
from tests.bench.report import database_vendor, record, write_section


@pytest.mark.django_db
def test_bench_conflicts(api):
    figures = measure(api.organization, api.agent.authority)
    database = database_vendor()
    write_section("conflicts", markdown(figures), database=database)
    record({"conflicts": figures}, database=database)
    print(f"conflicts: precision {figures['precision']}, recall {figures['recall']}")
