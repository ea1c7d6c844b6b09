"""Waiting on another process or thread: poll a condition until it holds or a deadline passes.

The one place (with the server-start helpers, the fakes and the load and drill harnesses)
where a test may sleep: between two looks at a real condition, never to let time pass.
Time that a rule reads is moved with ``time_machine``, or set on the rows; see
tests/ci/test_no_sleeps.py.
"""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    check: Callable[[], T],
    *,
    timeout: float = 30.0,
    interval: float = 0.05,
    what: object = "the condition",
) -> T:
    """Return ``check()``'s first true value; fail the test if none came within ``timeout``.

    ``what`` says what was awaited in the failure (a callable is called then, so the message
    can show the last state seen).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {said}")
        time.sleep(interval)
