"""The `make run` server that test_make_run.py and test_documented_commands.py share."""

from collections.abc import Iterator

import pytest

from tests.ci.test_make_run import Server


@pytest.fixture(scope="session")
def make_run_server(tmp_path_factory) -> Iterator[Server]:
    """``make demo`` and ``make run`` in a folder of their own, once per worker: both
    modules are in the ``make-run`` xdist group, so once per run."""
    started = Server(tmp_path_factory.mktemp("make-run"))
    yield started
    started.stop()
