"""A pytest plugin: ``--dist loadgroup`` sends each ``xdist_group`` to one worker, whole.

Tests share a group when they share a costly setup of a module or the session (a production
server, a live server with its worker, a browser), or when they must not overlap with one
another; one worker then runs the group's tests one after another and pays that setup once.
tests/ci/test_xdist_groups.py checks it with a run of two workers.
"""

import pytest


def _xdist_groups(item: pytest.Item) -> list[str]:
    """The ``xdist_group`` names of ``item``, as pytest-xdist reads them."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return sorted(names)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give each test marked ``xdist_group`` the ``@group`` suffix that ``--dist loadgroup``
    schedules by, so one worker runs a whole group and its costly setup once.

    pytest-xdist (3.8) appends the suffix by assigning ``item._nodeid``, but since pytest 9.2
    a node's id is read from ``item._id`` (a ``NodeId``), so the suffix never reached the
    scheduler and every grouped test was dealt out on its own, to either worker. The suffix
    is set here where the id is read, and only when it is not there yet (an xdist that sets
    it itself, or an older pytest). ``trylast``: after the conftests that add the mark
    (tests/browser/conftest.py). ``config.option.loadgroup`` is set on an xdist worker of a
    ``--dist loadgroup`` run only; the workers' ids are the ones the controller schedules."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = _xdist_groups(item)
        suffix = "@" + "_".join(groups)
        if not groups or item.nodeid.endswith(suffix):
            continue
        node_id = getattr(item, "_id", None)
        if hasattr(node_id, "parse"):  # pytest >= 9.2: NodeId.parse of the whole string
            item._id = type(node_id).parse(item.nodeid + suffix)
        else:
            item._nodeid = item.nodeid + suffix  # type: ignore[attr-defined]
