"""Fixtures of the suspension tests; sessions, frames and suspend come from tests/conftest.py."""

import pytest
from django.core.management import call_command


@pytest.fixture
def tree(start_session, push_ok):
    """A session with a root frame (10 000 tokens) and one child (2 000)."""
    session = start_session()
    root = push_ok(session["id"], 10_000, goal="Plan the refund")
    child = push_ok(session["id"], 2_000, parent=root["id"], goal="Ask the customer")
    return {"session": session, "root": root, "child": child}


@pytest.fixture
def verify_log():
    """Asserts the frame tables equal a replay of the event log."""

    def verify():
        call_command("rebuild_projections", "--verify")

    return verify
