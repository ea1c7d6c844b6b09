"""CPU seconds spent by each part of the installation during a load run (Linux /proc).

The capacity model (docs/scaling.md) divides these by the requests served: CPU
milliseconds per request in the web processes, in PostgreSQL's backends serving the load's
database, and in the worker. PostgreSQL backends come and go (``CONN_MAX_AGE``), so a
sampler keeps the last figure seen for every backend of the database.
"""

import os
import threading
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of one process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def process_tree(pid: int) -> list[int]:
    pids, index = [pid], 0
    while index < len(pids):
        current = pids[index]
        index += 1
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pids.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                pass
    return pids


def tree_cpu(pid: int) -> float:
    return sum(process_cpu(p) for p in process_tree(pid))


class BackendSampler:
    """Samples the CPU of every PostgreSQL backend connected to ``database`` twice a second."""

    def __init__(self, admin_url: str, database: str) -> None:
        self.admin_url, self.database = admin_url, database
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            while not self.stop.is_set():
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s "
                    "AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
                    [self.database],
                ).fetchall()
                for (pid,) in rows:
                    cpu = process_cpu(pid)
                    if cpu:
                        self.seen[pid] = max(self.seen.get(pid, 0.0), cpu)
                self.stop.wait(0.5)

    def start(self) -> "BackendSampler":
        self.thread.start()
        return self

    def total(self) -> float:
        self.stop.set()
        self.thread.join(timeout=5)
        return sum(self.seen.values())
