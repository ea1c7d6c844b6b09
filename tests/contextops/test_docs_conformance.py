"""docs/conformance.md names only tests that exist, and marks done only items with one."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?::(\w+)`|`(tests/[\w/]+\.py)`")


def _rows():
    for line in (ROOT / "docs" / "conformance.md").read_text().splitlines():
        if line.startswith("| ") and not line.startswith(("| item", "| ---")):
            yield line


def test_every_test_the_conformance_table_names_exists():
    missing = []
    for line in _rows():
        current = None
        for path, name, whole in REFERENCE.findall(line):
            if whole:
                assert (ROOT / whole).exists(), whole
                continue
            current = path or current
            assert current, f"a test name without its file: {line}"
            source = (ROOT / current).read_text()
            if not re.search(rf"^(async )?def {name}\(", source, re.M):
                missing.append(f"{current}::{name}")
    assert missing == []


def test_an_item_marked_done_names_a_test():
    rows = list(_rows())
    assert len(rows) > 100
    for line in rows:
        status = line.split("|")[2].strip()
        if status.startswith("done"):
            assert "tests/" in line, line
        else:
            assert status == "**not done**", line
