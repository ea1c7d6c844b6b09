"""A pytest plugin: with ``CONTEXTOPS_NO_SKIPS=1`` a skipped test fails the run.

The PostgreSQL and Redis pass of ``.ci/run`` sets it: there every service and binary a
test may ask for is present, so a skip ("needs PostgreSQL", "needs the server binaries")
means the pass did not test what it claims to. Only the skips listed in
``ALLOWED_SKIP_PREFIXES`` stay skips: benchmarks, which run with ``--bench`` alone.
The SQLite pass leaves the variable unset and skips PostgreSQL-only tests as it should.
"""

import os

import pytest

ENV_VAR = "CONTEXTOPS_NO_SKIPS"
ALLOWED_SKIP_PREFIXES = ("benchmark:",)


def strict() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if not report.skipped or not strict() or hasattr(report, "wasxfail"):
        return report
    reason = _reason(report)
    if reason.startswith(ALLOWED_SKIP_PREFIXES):
        return report
    report.outcome = "failed"
    report.longrepr = (
        f"skipped in a pass that must run everything ({ENV_VAR}=1): {reason}\n"
        "Start the missing service or install the missing binary; see .ci/run."
    )
    return report
