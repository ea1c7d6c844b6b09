"""The CI pass that has every service cannot pass with a test skipped for a missing one."""

import pytest
from django.conf import settings

TESTS = """
import pytest

@pytest.mark.skipif(True, reason="needs PostgreSQL (set DATABASE_URL)")
def test_needs_a_database():
    pass

def test_needs_a_binary():
    pytest.skip("needs PostgreSQL's server binaries")

@pytest.mark.skip(reason="benchmark: run with --bench (make bench)")
def test_a_benchmark():
    pass

def test_runs():
    pass
"""


def _run(pytester: pytest.Pytester, monkeypatch, strict: str | None):
    pytester.makepyfile(test_sample=TESTS)
    monkeypatch.setenv("PYTHONPATH", str(settings.BASE_DIR))
    if strict is None:
        monkeypatch.delenv("CONTEXTOPS_NO_SKIPS", raising=False)
    else:
        monkeypatch.setenv("CONTEXTOPS_NO_SKIPS", strict)
    return pytester.runpytest_subprocess(
        "-p", "tests.strict_skips", "-p", "no:django", "-p", "no:cacheprovider", "-p", "no:xdist"
    )


def test_with_no_skips_allowed_a_skip_for_a_missing_service_fails_the_run(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "1")
    # A skip marker acts while the test is set up (an error), pytest.skip() while it runs
    # (a failure); either fails the run. The benchmark may still skip.
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=1)
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [
            "*skipped in a pass that must run everything*needs PostgreSQL (set DATABASE_URL)*",
            "*skipped in a pass that must run everything*needs PostgreSQL's server binaries*",
        ],
        consecutive=False,
    )


def test_without_the_variable_skips_stay_skips(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, None)
    result.assert_outcomes(passed=1, skipped=3)
    assert result.ret == 0
