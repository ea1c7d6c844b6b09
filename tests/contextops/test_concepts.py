"""docs/concepts.md is where the product's comments send a reader: every citation of it
names an anchor it has, and nothing cites the seed documents a reader of the repository
does not have."""

import re
import subprocess

from django.conf import settings

ROOT = settings.BASE_DIR
CONCEPTS = ROOT / "docs" / "concepts.md"
# Where the product is, and what of it only speaks of where the model came from: the
# conformance table (seed by seed, on purpose) and the benchmark reports (written by the
# benchmarks themselves).
PRODUCT = (
    "contextops",
    "frames",
    "facts",
    "clients",
    "templates",
    "static",
    "deploy",
    "docs",
    "examples",
    "README.md",
    "Makefile",
    "pyproject.toml",
    ".ci",
)
PROVENANCE = re.compile(r"^docs/(conformance\.md|benchmarks[^/]*)$")
CITATION = re.compile(r"docs/concepts\.md#([\w-]+)|\(concepts\.md#([\w-]+)\)")


def _product_files():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *PRODUCT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in listed:
        path = ROOT / name
        if PROVENANCE.match(name) or not path.is_file():
            continue
        try:
            yield name, path.read_text()
        except UnicodeDecodeError:  # images, fonts
            continue


def test_it_cites_no_seed_document():
    found = [
        f"{name}:{number}: {line.strip()}"
        for name, text in _product_files()
        for number, line in enumerate(text.splitlines(), 1)
        if "seed 00" in line.lower()
    ]
    assert found == [], "cite docs/concepts.md#<anchor> instead:\n" + "\n".join(found)


def test_every_citation_of_the_concepts_names_an_anchor_they_have():
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', CONCEPTS.read_text()))
    assert {
        "budgets",
        "priorities",
        "state-layers",
        "supersession",
        "pressure",
        "turns",
        "anchors",
        "rlm-state",
    } <= anchors
    cited = {(name, a or b) for name, text in _product_files() for a, b in CITATION.findall(text)}
    assert cited, "the product cites docs/concepts.md"
    assert sorted(c for c in cited if c[1] not in anchors) == []
