"""The command: options from the environment, a fresh database, the run, the figures
printed and written (see tests/bench/recall/__init__.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import locomo
from .summary import MODES, Outcome, markdown, summarize, targets

DEFAULT_BUDGETS = (1000, 2000, 4000)
MINIMUM_BUDGET = 500  # the API answers 422 budget_too_small under it


class OptionError(ValueError):
    """An option of the environment that the run cannot use."""


@dataclass(frozen=True)
class Options:
    conversations: int | None = None
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    modes: tuple[str, ...] = MODES
    write: bool = True
    details: Path | None = None


def _list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def options(environ: Mapping[str, str]) -> Options:
    """The run's options; OptionError names the variable that cannot be used."""
    conversations = None
    if environ.get("RECALL_CONVERSATIONS", "").strip():
        raw = environ["RECALL_CONVERSATIONS"].strip()
        if not raw.isdigit() or int(raw) < 1:
            raise OptionError(f"RECALL_CONVERSATIONS must be a whole number from 1, not {raw!r}")
        conversations = int(raw)
    budgets = DEFAULT_BUDGETS
    if environ.get("RECALL_BUDGETS", "").strip():
        parts = _list(environ["RECALL_BUDGETS"])
        if not parts or not all(p.isdigit() and int(p) >= MINIMUM_BUDGET for p in parts):
            raise OptionError(
                f"RECALL_BUDGETS must list budgets of at least {MINIMUM_BUDGET} tokens "
                f"separated by commas, not {environ['RECALL_BUDGETS']!r}"
            )
        budgets = tuple(sorted({int(p) for p in parts}))
    modes = MODES
    if environ.get("RECALL_MODES", "").strip():
        chosen = _list(environ["RECALL_MODES"])
        unknown = [mode for mode in chosen if mode not in MODES]
        if unknown or not chosen:
            raise OptionError(f"RECALL_MODES takes {', '.join(MODES)}; unknown: {unknown}")
        modes = tuple(mode for mode in MODES if mode in chosen)
    write = environ.get("RECALL_WRITE", "1").strip().lower() not in {"0", "false", "no", "off"}
    details = environ.get("RECALL_DETAILS", "").strip()
    return Options(conversations, budgets, modes, write, Path(details) if details else None)


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """Django set up on the test settings and a new, empty, migrated database (a file on
    SQLite, ``test_<name>_<pid>`` on PostgreSQL), dropped at the end. Yields its vendor."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextops.settings_test")
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_test_environment, teardown_test_environment

    setup_test_environment()
    name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        yield connection.vendor
    finally:
        connection.creation.destroy_test_db(name, verbosity=0, keepdb=False)
        teardown_test_environment()


def document(
    outcomes: Sequence[Outcome],
    *,
    conversations: Sequence[locomo.Conversation],
    opts: Options,
    database: str,
    data: Path,
    wall_seconds: float,
    commit: str,
) -> dict[str, Any]:
    """``figures.recall``: the tables, the targets and what was measured where."""
    table = summarize(outcomes, budgets=opts.budgets, modes=opts.modes)
    return {
        "commit": commit,
        "dirty": commit.endswith("+changes"),
        "database": database,
        "data": {
            "file": data.name,
            "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
            "conversations": [c.sample_id for c in conversations],
            "licence": "CC BY-NC 4.0",
        },
        "budgets": list(opts.budgets),
        "questions": sum(len(c.questions) for c in conversations),
        "questions_without_evidence": sum(c.without_evidence for c in conversations),
        "packs": len(outcomes),
        "wall_seconds": round(wall_seconds, 1),
        "modes": table,
        "targets": targets(table, opts.budgets),
    }


def write_docs(figures: dict[str, Any]) -> list[Path]:
    """docs/benchmarks-recall.md (named after the engine off PostgreSQL, as every engine's
    own section is), ``figures.recall`` merged into the engine's JSON, benchmarks.md
    assembled again."""
    from tests.bench.report import benchmarks_assemble, record, write_section

    database = figures["database"]
    name = "recall" if database == "postgresql" else f"recall-{database}"
    written = [
        write_section(name, markdown(figures), database=database),
        record({"recall": figures}, database=database),
        benchmarks_assemble(),
    ]
    if database == "postgresql":
        written.append(retrieval_doc_update(markdown(figures)))
    return written


RECALL_START, RECALL_END = "<!-- recall:start -->", "<!-- recall:end -->"


def retrieval_doc_update(table: str, path: Path | None = None) -> Path:
    """docs/retrieval.md (beside the other docs the run writes: ``report.DOCS``) with the
    recall table between its markers, as this run measured it (the prose around it is the
    page's own)."""
    from tests.bench import report

    path = path or report.DOCS / "retrieval.md"
    text = path.read_text()
    head, rest = text.split(RECALL_START, 1)
    _, tail = rest.split(RECALL_END, 1)
    body = table.replace("## Retrieval recall on LoCoMo", "### Recall on LoCoMo", 1)
    path.write_text(f"{head}{RECALL_START}\n{body.strip()}\n{RECALL_END}{tail}")
    return path


def write_details(path: Path, outcomes: Sequence[Outcome]) -> None:
    with path.open("w") as out:
        for outcome in outcomes:
            out.write(json.dumps(dataclasses.asdict(outcome)) + "\n")


def main(environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    try:
        opts = options(environ)
        data = locomo.data_path(environ)
        conversations = locomo.load(data, opts.conversations)
    except (OptionError, locomo.DataMissing) as exc:
        print(f"make bench-recall: {exc}", file=sys.stderr)
        return 2
    from tests.bench.report import commit

    from .baselines import wordllama_embedder

    started = time.perf_counter()
    with fresh_database() as database:
        from .run import run

        outcomes = run(
            conversations, budgets=opts.budgets, modes=opts.modes, embed=wordllama_embedder()
        )
    figures = document(
        outcomes,
        conversations=conversations,
        opts=opts,
        database=database,
        data=data,
        wall_seconds=time.perf_counter() - started,
        commit=commit(),
    )
    print(markdown(figures))  # its last lines: each target, met or not
    if opts.details:
        write_details(opts.details, outcomes)
    if opts.write:
        for path in write_docs(figures):
            print(f"wrote {path}")
    return 0
