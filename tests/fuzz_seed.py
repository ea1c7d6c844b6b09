"""One fuzzing seed per pytest run: fresh each run, printed, and reproducible with it.

``CONTEXTOPS_FUZZ_SEED`` sets it; otherwise it is drawn anew. It is chosen once, in the
process that starts the run (pytest-xdist's controller), and handed to every worker, so
all processes of one run fuzz with the same seed. It is printed in the run's header and
summary, and in the report of every failed test that used it.
"""

import os
import secrets

import pytest

ENV = "CONTEXTOPS_FUZZ_SEED"
_KEY = "contextops_fuzz_seed"


def reproduce(seed: int) -> str:
    return f"fuzz seed: {seed} (reproduce with {ENV}={seed} make fuzz)"


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and _KEY in workerinput:
        seed = int(workerinput[_KEY])
    elif os.environ.get(ENV, "").strip():
        seed = int(os.environ[ENV])
    else:
        seed = secrets.randbits(32)
    config.stash[_SEED] = seed


_SEED = pytest.StashKey[int]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: each worker takes the controller's seed."""
    node.workerinput[_KEY] = node.config.stash[_SEED]


@pytest.fixture
def fuzz_seed(request: pytest.FixtureRequest) -> int:
    """The run's seed; a test that takes it names it in its report."""
    seed = request.config.stash[_SEED]
    request.node.user_properties.append((_KEY, seed))
    return seed


def pytest_report_header(config: pytest.Config) -> str:
    return reproduce(config.stash[_SEED])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    seeds = [value for name, value in item.user_properties if name == _KEY]
    if report.failed and seeds:
        report.sections.append(("fuzz seed", reproduce(seeds[0])))
    return report


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    seeds = {
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        for name, value in getattr(report, "user_properties", ())
        if name == _KEY
    }
    for seed in sorted(seeds):
        terminalreporter.write_line(reproduce(seed))
