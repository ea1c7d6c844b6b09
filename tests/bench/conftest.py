"""Benchmarks (``test_bench_*.py``) run only with ``--bench`` (``make bench``); they print
figures and assert no timings. The harness's own tests (``test_recall_*.py``) run always."""

import pytest


def pytest_addoption(parser):
    try:
        parser.addoption(
            "--bench", action="store_true", default=False, help="run the benchmarks in tests/bench"
        )
    except ValueError:  # already added by another conftest
        pass


def pytest_collection_modifyitems(config, items):
    if config.getoption("--bench", default=False):
        return
    skip = pytest.mark.skip(reason="benchmark: run with --bench (make bench)")
    for item in items:
        if "tests/bench/" in str(item.path) and item.path.name.startswith("test_bench_"):
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """Gather every section the benchmarks wrote into docs/benchmarks.md."""
    if not session.config.getoption("--bench", default=False):
        return
    from tests.bench.report import benchmarks_assemble

    benchmarks_assemble()
