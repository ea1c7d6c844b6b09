"""`make load`: 50 agents against gunicorn and a Celery worker on PostgreSQL and Redis.

Creates a fresh database, starts the real processes, runs the agents for a bounded
time, then stops them and checks that nothing was lost: `rebuild_projections --verify`
clean and every budget sum exact. Prints the figures and writes docs/benchmarks-load.md.

    python -m tests.load.main [--agents 50] [--seconds 60]
"""

import argparse
import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recreate_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "LOAD_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/contextops_load"
        ),
    )
    parser.add_argument(
        "--redis-url", default=os.environ.get("LOAD_REDIS_URL", "redis://127.0.0.1:6379/12")
    )
    parser.add_argument("--web-workers", type=int, default=4)
    args = parser.parse_args()

    _recreate_database(args.database_url)
    var_dir = ROOT / "var" / "load"
    var_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DATABASE_URL": args.database_url,
        "REDIS_URL": args.redis_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "CONTEXTOPS_RATE_LIMIT_PER_MINUTE": "0",
        "CONTEXTOPS_VAR_DIR": str(var_dir),
        "CONN_MAX_AGE": "60",
        "LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True
    )

    import django

    django.setup()
    from contextops.tenancy import api_key_create

    keys = [
        api_key_create(org_name=f"Load {i % 5}", agent_name=f"agent-{i}", authority="employee")[1]
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
            str(args.web_workers),
            "--threads",
            "4",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    worker = subprocess.Popen(
        [
            python,
            "-m",
            "celery",
            "-A",
            "contextops",
            "worker",
            "--loglevel",
            "WARNING",
            "--concurrency",
            "2",
        ],
        cwd=ROOT,
        env=env,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        for _ in range(100):
            try:
                if httpx.get(base_url + "/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        from tests.load.agents import run_load
        from tests.load.cpu import BackendSampler, process_cpu, tree_cpu

        database = args.database_url.rsplit("/", 1)[1]
        backends = BackendSampler(args.database_url.rsplit("/", 1)[0] + "/postgres", database)
        cpu_before = {"web": tree_cpu(web.pid), "worker": tree_cpu(worker.pid)}
        load_before = process_cpu(os.getpid())
        backends.start()
        load_average = os.getloadavg()[0]
        result = asyncio.run(run_load(base_url=base_url, keys=keys, seconds=args.seconds))
        cpu = {
            "web": tree_cpu(web.pid) - cpu_before["web"],
            "worker": tree_cpu(worker.pid) - cpu_before["worker"],
            "postgresql": backends.total(),
            "load generator": process_cpu(os.getpid()) - load_before,
        }
    finally:
        for process in (web, worker):
            process.terminate()
        for process in (web, worker):
            process.wait(timeout=30)

    from django.db import connections

    connections.close_all()
    from frames.models import Session
    from frames.projections import budget_audit, projection_diff

    differences = sum(len(projection_diff(s)) for s in Session.objects.all())
    problems = sum(len(budget_audit(s)) for s in Session.objects.all())
    served = max(result.requests, 1)
    cpu_rows = "\n".join(
        f"| {part} | {seconds:.1f} | {seconds * 1000 / served:.2f} |"
        for part, seconds in cpu.items()
    )
    summary = result.table() + (
        f"\n\nAfterwards: `rebuild_projections --verify` found {differences} difference(s); "
        f"budget audit found {problems} problem(s) over {Session.objects.count()} sessions."
        "\n\nCPU during the run (tests/load/cpu.py: /proc of the web and worker process trees, "
        "PostgreSQL's backends for the load's database), per request served:\n\n"
        "| part | CPU s | CPU ms per request |\n| --- | ---: | ---: |\n"
        + cpu_rows
        + f"\n\nThe machine's load average when the agents started: {load_average:.1f} on "
        f"{os.cpu_count()} cores (the throughput above is what was left by other work; the CPU "
        "per request is the steadier figure)."
    )
    print(summary)
    for line in result.unexpected[:20]:
        print("  unexpected:", line)
    (ROOT / "docs" / "benchmarks-load.md").write_text(
        f"## Load: {args.agents} agents, PostgreSQL and Redis, gunicorn {args.web_workers} workers x 4 threads\n\n{summary}\n"
    )
    return 1 if differences or problems or sum(result.errors.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
