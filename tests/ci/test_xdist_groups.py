"""``--dist loadgroup`` (``make test``) runs every ``xdist_group`` on one worker, whole: a
group's costly setup (a production server, a live server and its worker, a browser) is
then made once, and tests that must not overlap do not."""

import re
from collections import defaultdict

import pytest
from django.conf import settings

CONFTEST = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name.startswith("test_added"):
            item.add_marker(pytest.mark.xdist_group("added"))
"""

TESTS = """
import pytest

@pytest.mark.xdist_group("live")
@pytest.mark.parametrize("i", range(8))
def test_live(i):
    pass

@pytest.mark.xdist_group(name="browser")
@pytest.mark.parametrize("i", range(8))
def test_browser(i):
    pass

@pytest.mark.parametrize("i", range(8))
def test_added(i):
    pass

@pytest.mark.parametrize("i", range(8))
def test_free(i):
    pass
"""


def _run(pytester: pytest.Pytester, monkeypatch, *args: str) -> pytest.RunResult:
    """pytest in a process of its own with xdist and this plugin only (no other plugin to
    load: each worker starts in a second)."""
    monkeypatch.setenv("PYTHONPATH", str(settings.BASE_DIR))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester.runpytest_subprocess(
        "-p", "xdist", "-p", "tests.xdist_groups", "-p", "no:cacheprovider", "-v", *args
    )  # fmt: skip


RAN = re.compile(r"^\[(gw\d+)\] .*PASSED (\S+)", re.MULTILINE)


def test_each_group_runs_whole_on_one_worker_and_the_rest_one_by_one(pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sample=TESTS)
    result = _run(pytester, monkeypatch, "-n", "2", "--dist", "loadgroup")
    result.assert_outcomes(passed=32)
    workers: dict[str, set[str]] = defaultdict(set)
    ids: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in RAN.findall(result.stdout.str()):
        test = nodeid.split("::")[1].split("[")[0]
        workers[test].add(worker)
        ids[test].add(nodeid)
    assert set(workers) == {"test_live", "test_browser", "test_added", "test_free"}
    for group in ("test_live", "test_browser", "test_added"):
        assert len(workers[group]) == 1, f"{group} ran on {sorted(workers[group])}"
    # The others stay units of one test each, for whichever worker is free first (which
    # one that is depends on the machine's load, so no worker is asserted).
    assert not [nodeid for nodeid in ids["test_free"] if "@" in nodeid]


@pytest.mark.parametrize("dist", ["load", "no"])
def test_other_modes_keep_the_plain_ids(pytester, monkeypatch, dist):
    pytester.makepyfile(test_sample=TESTS)
    workers = ["-n", "2"] if dist == "load" else []
    result = _run(pytester, monkeypatch, *workers, "--dist", dist)
    result.assert_outcomes(passed=32)
    assert "@" not in result.stdout.str()
