"""No test sleeps to let time pass: a rule about time is tested on a moved clock
(``time_machine``) or on rows dated in the past, and waiting on another process polls a
real condition with a deadline (tests/waiting.py).

A sleep may stand only in the helpers that start servers, the fake servers, the load and
drill harnesses, and the polling helper; a test module that starts a server of its own in
a loop of its own is listed below with how many such sleeps it has, so a new one fails."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# Whole helpers: they wait for ports, hold faults open or pace load on purpose.
HELPERS = (
    "load/",
    "drill/",
    "fakes/",
    "servers.py",
    "s3.py",  # waits for moto's server to answer
    "waiting.py",  # the polling helper itself
    "hardening/production.py",  # waits for gunicorn to answer
    "ci/test_no_sleeps.py",  # this file names the pattern
)

# Test modules with server-start loops or fault windows of their own: how many sleeps, and why.
COUNTED = {
    "client/test_mcp.py": (1, "waits for the MCP server's port"),
    "client/test_retries.py": (1, "its fake server hangs so that the client times out"),
    "hardening/test_database_restart.py": (1, "waits for gunicorn to answer"),
    "hardening/test_broker_outage.py": (1, "holds Redis down for the outage it tests"),
    "hardening/test_long_polls.py": (1, "paces its reads over the window it measures"),
    "topology/test_two_hosts.py": (2, "waits for the web hosts; retries a refused connection"),
    "bench/test_bench_connections.py": (1, "waits for gunicorn to answer"),
    "bench/test_bench_langgraph_saver.py": (1, "waits for gunicorn to answer"),
}

SLEEP = re.compile(r"\bsleep\(")


def _sleeps() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(TESTS).as_posix()
        if name.startswith(HELPERS):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SLEEP.search(line) and not line.lstrip().startswith("#"):
                found.setdefault(name, []).append(f"tests/{name}:{number}: {line.strip()}")
    return found


def test_no_test_sleeps_to_let_time_pass():
    offenders = [
        line
        for name, lines in _sleeps().items()
        if len(lines) > COUNTED.get(name, (0, ""))[0]
        for line in lines
    ]
    assert offenders == [], (
        "move the clock (time_machine) or date the rows in the past, or wait on a real "
        "condition with tests.waiting.wait_until:\n" + "\n".join(offenders)
    )


def test_every_counted_module_still_has_its_sleeps():
    """A module that no longer sleeps leaves the list, so the list stays true."""
    found = _sleeps()
    stale = {
        name: count for name, (count, _) in COUNTED.items() if len(found.get(name, [])) < count
    }
    assert stale == {}
