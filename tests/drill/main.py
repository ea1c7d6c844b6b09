"""`make drill`: a backup taken while agents write restores into a working database.

Creates a scratch PostgreSQL database, runs agents against gunicorn on it (tests.load),
takes `pg_dump --format=custom` in the middle of their writes, restores the dump into a
new database with `pg_restore`, and checks it there with
`manage.py rebuild_projections --verify --budgets` (the frame tables equal a replay of
the event log, and every budget sum is exact). Prints the commands it ran and the row
counts of both databases; exits non-zero when the restored database does not check out.
The commands are those of docs/operating.md, "Backups".

Unless ``--no-docs``, what it printed goes verbatim into its section of
docs/reliability.md (between the ``make drill`` markers), with the commit measured.

    python -m tests.drill.main [--agents 10] [--seconds 12] [--keep] [--no-docs]
"""

import argparse
import asyncio
import io
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.servers import with_database

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "sessions": "frames.Session",
    "frames": "frames.Frame",
    "events": "frames.Event",
    "usage records": "frames.Usage",
    "facts": "facts.Fact",
}


def _admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(statement)


def _run(command: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    print("  $", " ".join(shlex.quote(part) for part in command), flush=True)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)


def _counts(url: str) -> dict[str, int]:
    import psycopg
    from django.apps import apps

    counts = {}
    with psycopg.connect(url) as conn:
        for label, model in TABLES.items():
            table = apps.get_model(model)._meta.db_table
            counts[label] = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    return counts


class _Tee(io.TextIOBase):
    """stdout, and a copy of everything written to it."""

    def __init__(self, stream) -> None:
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def main() -> int:
    args = _arguments()
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        code = _drill(args)
    finally:
        sys.stdout = tee.stream
    if args.docs:
        from tests.bench.report import stamp, write_marked

        write_marked(
            "reliability.md",
            "make drill",
            f"`DRILL_AGENTS={args.agents} DRILL_SECONDS={args.seconds:g} make drill` printed, "
            f"verbatim:\n\n```\n{tee.copy.getvalue().rstrip()}\n```\n\n{stamp('postgresql')}",
        )
    return code


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=12)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DRILL_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL server to make the two scratch databases on",
    )
    parser.add_argument("--keep", action="store_true", help="keep both databases and the dump")
    parser.add_argument("--docs", action=argparse.BooleanOptionalAction, default=True)
    return parser.parse_args()


def _drill(args: argparse.Namespace) -> int:
    run = secrets.token_hex(4)
    source = with_database(args.database_url, f"contextops_drill_{run}")
    restored = with_database(args.database_url, f"contextops_drill_{run}_restored")
    dump = Path(tempfile.mkdtemp(prefix="contextops-drill-")) / "contextops.dump"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DATABASE_URL": source,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "CONTEXTOPS_RATE_LIMIT_PER_MINUTE": "0",
        "CELERY_BROKER_URL": "memory://",
        "CONTEXTOPS_VAR_DIR": str(ROOT / "var" / "drill"),
        "LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)
    os.environ.update(env)
    python = sys.executable
    _admin(args.database_url, f'CREATE DATABASE "contextops_drill_{run}"')
    try:
        print(f"Source database contextops_drill_{run}: migrate, then {args.agents} agents write.")
        migrated = _run([python, "manage.py", "migrate", "--noinput", "-v0"], env)
        assert migrated.returncode == 0, migrated.stderr

        import django

        django.setup()
        from contextops.tenancy import api_key_create
        from tests.load.agents import run_load
        from tests.servers import free_port as _free_port

        keys = [
            api_key_create(org_name=f"Drill {i % 3}", agent_name=f"agent-{i}")[1]
            for i in range(args.agents)
        ]
        port = _free_port()
        web = subprocess.Popen(
            [
                python,
                "-m",
                "gunicorn",
                "contextops.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
        )
        base_url = f"http://127.0.0.1:{port}"
        outcome: dict = {}
        try:
            import httpx

            for _ in range(100):
                try:
                    if httpx.get(base_url + "/api/v1/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            writers = threading.Thread(
                target=lambda: outcome.update(
                    result=asyncio.run(run_load(base_url=base_url, keys=keys, seconds=args.seconds))
                )
            )
            writers.start()
            time.sleep(args.seconds / 3)
            print("Backup while they write (docs/operating.md):")
            dumped = _run(["pg_dump", "--format=custom", f"--file={dump}", source], env)
            assert dumped.returncode == 0, dumped.stderr
            at_dump = time.monotonic()
            writers.join()
            print(f"  the agents wrote on for {time.monotonic() - at_dump:.1f} s after the dump")
        finally:
            web.terminate()
            web.wait(timeout=30)
        from django.db import connections

        connections.close_all()

        print(f"Restore into a new database, contextops_drill_{run}_restored:")
        _admin(args.database_url, f'CREATE DATABASE "contextops_drill_{run}_restored"')
        restore = _run(["pg_restore", "--no-owner", f"--dbname={restored}", str(dump)], env)
        assert restore.returncode == 0, restore.stderr
        print("Check it there:")
        check = _run(
            [python, "manage.py", "rebuild_projections", "--verify", "--budgets"],
            {**env, "DATABASE_URL": restored},
        )
        print("  " + (check.stdout + check.stderr).strip().replace("\n", "\n  "))
        source_counts, restored_counts = _counts(source), _counts(restored)
        print(f"\n  {'':16}{'source now':>12}{'restored':>12}")
        for label in TABLES:
            print(f"  {label:16}{source_counts[label]:>12}{restored_counts[label]:>12}")
        errors = sum(outcome["result"].errors.values()) if "result" in outcome else 0
        print(f"\n  agent requests that failed: {errors}")
        ok = check.returncode == 0 and restored_counts["sessions"] > 0
        print("Drill passed." if ok else "Drill FAILED: the restored database does not check out.")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"Kept {source}, {restored} and {dump}.")
        else:
            for name in (f"contextops_drill_{run}_restored", f"contextops_drill_{run}"):
                _admin(args.database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            dump.unlink(missing_ok=True)
            dump.parent.rmdir()


if __name__ == "__main__":
    raise SystemExit(main())
