"""Where benchmark figures go: markdown sections stamped with the commit they were
measured at, and the machine-readable docs/benchmarks.json.

Every benchmark (and `make load`) writes through these two functions, so no figure in
docs/ is written by hand and each one names the commit and database it came from.

- ``write_section(name, text, database=...)`` writes docs/benchmarks-<name>.md with a
  closing line "Measured at commit <sha> on <database>, <date>."
- ``write_marked(document, name, text)`` replaces what stands between
  ``<!-- <name>: begin -->`` and ``<!-- <name>: end -->`` in docs/<document> (the
  commands' own sections of docs/reliability.md: `make load`, `make drill`), keeping
  the rest of the file.
- ``record(figures, database=...)`` merges figures into docs/benchmarks.json (PostgreSQL,
  the reference engine) or docs/benchmarks-<database>.json (any other engine). The file's
  ``commit`` is the HEAD of the latest writer; ``commits`` maps each top-level figure to
  the commit it was measured at when that differs.
"""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def commit() -> str:
    """HEAD's short hash, with "+changes" when the work tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def database_vendor() -> str:
    from django.db import connection

    return connection.vendor


def stamp(database: str) -> str:
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    return f"Measured at commit `{commit()}` on {database}, {today}."


def write_section(name: str, text: str, *, database: str | None = None) -> Path:
    """Write docs/benchmarks-<name>.md: the section, then the line naming its commit."""
    database = database or database_vendor()
    path = DOCS / f"benchmarks-{name}.md"
    path.write_text(text.rstrip() + "\n\n" + stamp(database) + "\n")
    return path


def json_path(database: str) -> Path:
    return DOCS / ("benchmarks.json" if database == "postgresql" else f"benchmarks-{database}.json")


def record(figures: dict[str, Any], *, database: str | None = None) -> Path:
    """Merge ``figures`` (top-level keys of "figures") into the database's JSON file."""
    database = database or database_vendor()
    path = json_path(database)
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        document = {}
    head = commit()
    previous = document.get("commit")
    commits: dict[str, str] = dict(document.get("commits") or {})
    old = dict(document.get("figures") or {})
    if previous and previous != head:
        for key in old:
            commits.setdefault(key, previous)
    for key in figures:
        commits.pop(key, None)
    merged = {**old, **figures}
    document = {"commit": head, "database": database, "figures": dict(sorted(merged.items()))}
    if commits:
        document["commits"] = dict(sorted(commits.items()))
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def write_marked(document: str, name: str, text: str) -> Path:
    """Replace the text between the markers ``<!-- name: begin -->`` and
    ``<!-- name: end -->`` in docs/<document>; the rest of the file stays as it is."""
    path = DOCS / document
    content = path.read_text()
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    start, stop = content.find(begin), content.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{path} has no {begin} ... {end} markers")
    path.write_text(content[: start + len(begin)] + "\n" + text.strip() + "\n" + content[stop:])
    return path


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

Retrieval recall on LoCoMo, the context pack beside BM25, newest-first and a BM25 +
embedding hybrid computed in the same run, comes from `make bench-recall` (data read from
`LOCOMO_PATH`; tests/bench/recall): its section is docs/benchmarks-recall.md
(docs/benchmarks-recall-sqlite.md for a run on SQLite), its figures `figures.recall`.

"""


def _figures_note(docs: Path) -> str:
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


def benchmarks_assemble() -> Path:
    """docs/benchmarks.md from every section a benchmark (or `make load`) wrote."""
    sections = [_as_section(p.read_text().strip()) for p in sorted(DOCS.glob("benchmarks-*.md"))]
    path = DOCS / "benchmarks.md"
    path.write_text(BENCHMARKS_HEADER + _figures_note(DOCS) + "\n\n".join(sections) + "\n")
    return path
