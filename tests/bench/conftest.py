"""Benchmarks run only with ``--bench`` (``make bench``); they print figures and assert no timings."""

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
        if "tests/bench/" in str(item.fspath):
            item.add_marker(skip)


BENCHMARKS_HEADER = """# Benchmarks

Figures from `make bench` (each benchmark writes its own section below) and `make load`.
They are measurements on one machine (2 cores), reported, never asserted: tests assert
query counts, not times. No figure here is written by hand: each section is written by its
benchmark through tests/bench/report.py and ends with the commit and database it was
measured at. A section whose figures depend on the engine is named after it, so a run on
SQLite leaves the PostgreSQL sections as they were. Reproduce with:

```sh
make bench                                    # SQLite, as on a laptop
DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench REDIS_URL=redis://127.0.0.1:6379/3 make bench
make load                                     # 50 agents, gunicorn + a worker, PostgreSQL and Redis
```

"""


def _figures_note(docs) -> str:
    """Which JSON file holds the figures of which database."""
    files = sorted(p.name for p in docs.glob("benchmarks*.json"))
    if not files:
        return ""
    named = [
        f"`docs/{name}` ("
        + ("PostgreSQL, the reference" if name == "benchmarks.json" else name[11:-5])
        + ")"
        for name in files
    ]
    return (
        "The figures as data (p50s, query counts, ratios to the floor, rates), each file with "
        "the commit it was measured at: " + ", ".join(named) + ".\n\n"
    )


def _as_section(text: str) -> str:
    """A file that starts with a top-level heading becomes a section: every heading one level down."""
    if not text.startswith("# "):
        return text
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())


def pytest_sessionfinish(session, exitstatus):
    """Gather every section the benchmarks wrote into docs/benchmarks.md."""
    if not session.config.getoption("--bench", default=False):
        return
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    sections = [_as_section(p.read_text().strip()) for p in sorted(docs.glob("benchmarks-*.md"))]
    (docs / "benchmarks.md").write_text(
        BENCHMARKS_HEADER + _figures_note(docs) + "\n\n".join(sections) + "\n"
    )
