"""Hypothesis runs the same examples in every CI run and explores in ``make fuzz``
(tests/hypothesis_profiles.py)."""

import os
import re
from pathlib import Path

from hypothesis import settings

from tests import hypothesis_profiles

ROOT = Path(__file__).resolve().parents[2]
GIVEN = re.compile(r"^\s*@given\(", re.MULTILINE)


def _make_variable(name: str) -> str:
    text = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{name} = ((?:.*\\\n)*.*)$", text, re.MULTILINE)
    assert match, f"the Makefile has no {name}"
    return match.group(1).replace("\\\n", " ")


def test_ci_runs_are_derandomized_without_a_deadline():
    ci = settings.get_profile(hypothesis_profiles.CI)
    assert ci.derandomize is True and ci.deadline is None
    assert ci.max_examples == hypothesis_profiles.CI_EXAMPLES
    # The profile the run chose is loaded; without a choice, the CI one.
    assert hypothesis_profiles.PROFILE == os.environ.get("HYPOTHESIS_PROFILE", "ci")
    assert settings().derandomize is settings.get_profile(hypothesis_profiles.PROFILE).derandomize
    if hypothesis_profiles.PROFILE == hypothesis_profiles.CI:
        assert hypothesis_profiles.examples(10) == 10
        assert hypothesis_profiles.examples(4, fuzz=100) == 4


def test_the_fuzz_profile_explores_more_at_random(monkeypatch):
    fuzz = settings.get_profile(hypothesis_profiles.FUZZ)
    assert fuzz.derandomize is False
    assert fuzz.max_examples > settings.get_profile(hypothesis_profiles.CI).max_examples
    # A test's own count: FUZZ_FACTOR times CI's, or what it asks for under fuzz.
    monkeypatch.setattr(hypothesis_profiles, "PROFILE", hypothesis_profiles.FUZZ)
    assert hypothesis_profiles.examples(10) == 10 * hypothesis_profiles.FUZZ_FACTOR
    assert hypothesis_profiles.examples(4, fuzz=100) == 100


def test_make_fuzz_explores_every_property_test_with_the_fuzz_profile():
    fuzz = re.search(r"^fuzz:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert fuzz and "HYPOTHESIS_PROFILE=fuzz" in fuzz.group(1)
    assert "$(PROPERTIES)" in fuzz.group(1)
    listed = set(_make_variable("PROPERTIES").split())
    with_given = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if GIVEN.search(path.read_text()) and path.name != "test_fuzz.py"
    }
    assert with_given == listed
