"""`make load`: agents against gunicorn and a Celery worker on PostgreSQL and Redis, with
jobs (compactions, page-outs, imports) and, with ``LOAD_FAULTS=1``, faults.

Creates a fresh database, starts the real processes, runs the agents for a bounded time
(tests/load/agents.py), waits for every job they queued to finish (a bounded drain while
the worker is alive), stops the processes and checks that nothing was lost:

- every write answered 2xx is in the database (``missing_writes``);
- every job queued finished (``jobs_completed`` == ``jobs_queued``), and none ran twice
  with a visible effect (``jobs_duplicated``: two ``compaction.completed`` events for one
  run, two ``handle.paged_out`` for one handle, two ``conversation.imported`` for one
  import or an imported session holding more turns than the others);
- ``rebuild_projections --verify`` finds no difference and every budget sum is exact.

With faults (``--faults``, or ``LOAD_FAULTS=1``) it runs a PostgreSQL cluster and a
redis-server of its own (tests/servers.py: own ports and data folders; the machine's
services are never touched) and, at spread-out moments of the run, SIGKILLs the Celery
worker (its whole process group) and starts another, restarts Redis, and restarts
PostgreSQL (``pg_ctl restart -m fast``). Gunicorn keeps running throughout. While it runs,
a thread does what beat does in production, every few seconds instead of every minute:
the compaction, import and page-out requeue sweeps.

It ends with one JSON line on stdout (the first keys fixed: see ``SUMMARY_KEYS``) and
exits non-zero when any check fails. Unless ``--no-docs``, it writes
docs/benchmarks-load.md, its figures into docs/benchmarks.json and its section of
docs/reliability.md (between the ``make load`` markers), each with the commit measured.

    python -m tests.load.main [--agents 50] [--seconds 60] [--faults] [--no-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from tests.servers import PrivatePostgres, PrivateRedis, free_port, with_database

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = (
    "requests",
    "errors",
    "acknowledged_writes",
    "missing_writes",
    "jobs_queued",
    "jobs_completed",
    "jobs_duplicated",
    "verify_differences",
    "budget_problems",
)
# With faults: how soon a dead worker's job comes back. Production keeps the defaults
# (docs/operating.md); here they are short so the run recovers within its drain.
FAULT_SETTINGS = {
    "CONTEXTOPS_BROKER_VISIBILITY_TIMEOUT": "15",
    "CONTEXTOPS_BROKER_RESTORE_INTERVAL": "1",
    "CONTEXTOPS_BROKER_RESTORE_THROTTLE": "1",
    "CONTEXTOPS_COMPACTION_STALE_SECONDS": "12",
    "CONTEXTOPS_IMPORT_STALE_SECONDS": "12",
}
# Not CONTEXTOPS_IDEMPOTENCY_CLAIM_SECONDS: a claim whose request PostgreSQL's restart cut
# off is taken over at the first retry (its advisory lock went with the connection).


def _recreate_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


class Worker:
    """The Celery worker, in a process group of its own so a kill takes its children too,
    supervised as deploy/systemd/contextops-worker.service does (``Restart=on-failure``):
    a worker that exits by itself is started again after ``RESTART_SECONDS``, and counted
    (``exits``). Celery's consumer can die of a lost broker connection (kombu's
    "Unrecoverable error ... 'NoneType' object has no attribute 'hostname'" while it
    restores unacknowledged messages); production relies on that restart, so the load
    does too, and says how often it was needed."""

    RESTART_SECONDS = 5.0

    def __init__(self, env: dict, log: Path) -> None:
        self.env, self.log, self.process = env, log, None
        self.started = self.exits = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.supervisor = threading.Thread(target=self._supervise, daemon=True)

    def _supervise(self) -> None:
        while not self.stopping.wait(0.5):
            with self.lock:
                if self.process is None or self.process.poll() is None or self.stopping.is_set():
                    continue
                self.exits += 1
                _log(f"  worker exited ({self.process.returncode}); restarting it")
            if self.stopping.wait(self.RESTART_SECONDS):
                return
            with self.lock:  # unless the fault injector started one meanwhile
                if not self.stopping.is_set() and self.process.poll() is not None:
                    self.start()

    def start(self) -> None:
        if not self.supervisor.is_alive() and not self.stopping.is_set():
            self.supervisor.start()
        self.started += 1
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "contextops",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                "2",
                "--hostname",
                f"load{self.started}@%h",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=open(self.log, "a"),  # noqa: SIM115 (kept open for the worker's life)
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill_and_start(self) -> None:
        """The fault: the worker and its children killed, another started at once."""
        with self.lock:
            assert self.process is not None
            if self.process.poll() is None:  # not already exited (then the start suffices)
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
            self.start()

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            pass  # a restart under way has finished
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


class Sweeper(threading.Thread):
    """What beat does in production, every few seconds: send again the jobs of compactions
    and imports left queued (a broker outage) or claimed and abandoned (a dead worker, a
    database that went away mid-job), and of page-outs whose job the broker lost."""

    def __init__(self, every: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.every, self.stopped, self.sent = every, threading.Event(), 0

    def run(self) -> None:
        from django.db import connections

        from frames.context.paging import handles_page_out_requeue
        from frames.conversation.compaction import compactions_requeue
        from frames.conversation.importing.receiving import imports_requeue

        while not self.stopped.wait(self.every):
            try:
                self.sent += compactions_requeue(older_than_seconds=15)
                self.sent += imports_requeue(older_than_seconds=15)
                self.sent += handles_page_out_requeue(older_than_seconds=15)
            except Exception as error:  # the database or Redis is away: next time
                _log(f"  sweep skipped: {type(error).__name__}")
            finally:
                connections.close_all()


def _faults(at: list[tuple[float, str]], started: float, actions: dict, done: list) -> None:
    for offset, name in at:
        time.sleep(max(0.0, started + offset - time.monotonic()))
        begun = time.monotonic()
        try:
            actions[name]()
            outcome = "done"
        except Exception as error:  # recorded: a fault that failed to happen is a failure
            outcome = f"failed: {type(error).__name__}: {error}"[:200]
        done.append(
            {
                "fault": name,
                "at_s": round(begun - started, 1),
                "took_s": round(time.monotonic() - begun, 1),
                "outcome": outcome,
            }
        )
        _log(f"  fault {name} at {begun - started:.1f} s: {outcome}")


def _check_writes(result) -> tuple[int, int]:
    """(missing, duplicated): acknowledged writes not in the database, and usage records
    stored more than once for one message id."""
    from django.db.models import Count

    from facts.models import Fact
    from frames.conversation.models import Turn
    from frames.models import ContextHandle, Frame, Session, Usage

    acked = result.acknowledged
    missing = len(set(acked.sessions)) - Session.objects.filter(pk__in=acked.sessions).count()
    missing += len(set(acked.frames)) - Frame.objects.filter(pk__in=acked.frames).count()
    missing += (
        len(set(acked.popped))
        - Frame.objects.filter(pk__in=acked.popped, status="completed").count()
    )
    missing += len(set(acked.handles)) - ContextHandle.objects.filter(pk__in=acked.handles).count()
    stored = Counter(
        Usage.objects.filter(message_id__in=acked.usage).values_list("message_id", flat=True)
    )
    missing += sum(1 for message_id in set(acked.usage) if not stored[message_id])
    duplicated = sum(1 for n in stored.values() if n > 1)
    keys = {key for _, key in acked.facts}
    missing += len(keys) - Fact.objects.filter(key__in=keys).values("key").distinct().count()
    turns = dict(
        Turn.objects.filter(session_id__in=list(acked.turns))
        .values_list("session_id")
        .annotate(n=Count("id"))
        .values_list("session_id", "n")
    )
    missing += sum(max(0, n - turns.get(s, turns.get(_uuid(s), 0))) for s, n in acked.turns.items())
    return missing, duplicated


def _uuid(value: str):
    import uuid

    return uuid.UUID(value)


def _unfinished_page_outs(jobs) -> list[str]:
    """What the database says of each page-out whose ``handle.paged_out`` never came: the
    handle's state and the events that name it."""
    from frames.models import ContextHandle, Event

    lines = []
    for handle_id, _ in jobs.page_outs:
        if jobs.status.get(handle_id) == "indexed":
            continue
        handle = ContextHandle.objects.filter(pk=handle_id).first()
        events = [
            f"{seq} {type_}"
            for seq, type_ in Event.objects.filter(payload__handle_id=str(handle_id))
            .order_by("seq")
            .values_list("seq", "type")
        ]
        state = handle.state if handle is not None else "missing"
        lines.append(f"page-out of {handle_id}: handle {state}; events {events or 'none'}")
    return lines


def _check_jobs(result) -> int:
    """Jobs that ran twice with a visible effect."""
    from django.db.models import Count

    from frames.conversation.models import Import, Turn
    from frames.models import Event

    jobs = result.jobs

    def twice(types: tuple[str, ...], field: str, ids: list[str]) -> int:
        wanted = {str(i) for i in ids}
        seen = Counter(
            str(payload.get(field))
            for payload in Event.objects.filter(type__in=types).values_list("payload", flat=True)
        )
        return sum(1 for i in wanted if seen[i] > 1)

    duplicated = twice(
        ("compaction.completed", "compaction.failed"),
        "compaction_id",
        [i for i, _ in jobs.compactions],
    )
    duplicated += twice(("handle.paged_out",), "handle_id", [i for i, _ in jobs.page_outs])
    imports = [i for i, _ in jobs.imports]
    duplicated += twice(("conversation.imported",), "import_id", imports)
    # Every import is of the same transcript: a session holding more turns than the
    # others got some of it twice.
    sessions = list(
        Import.objects.filter(pk__in=imports, status="completed").values_list(
            "session_id", flat=True
        )
    )
    counts = dict(
        Turn.objects.filter(session_id__in=sessions)
        .values_list("session_id")
        .annotate(n=Count("id"))
        .values_list("session_id", "n")
    )
    if counts:
        fewest = min(counts.values())
        duplicated += sum(1 for n in counts.values() if n > fewest)
    # Two imports never share a session (each names its own transcript).
    duplicated += len(sessions) - len(set(sessions))
    return duplicated


def _markdown(args, summary: dict, result, cpu: dict, faults: list, load_average: float) -> str:
    served = max(result.requests, 1)
    cpu_rows = "\n".join(
        f"| {part} | {seconds:.1f} | {seconds * 1000 / served:.2f} |"
        for part, seconds in cpu.items()
    )
    jobs = result.jobs
    text = (
        f"## Load: {args.agents} agents, PostgreSQL and Redis, gunicorn {args.web_workers} "
        f"workers x {os.environ.get('WEB_THREADS', 8)} threads{', faults injected' if args.faults else ''}\n\n"
        + result.table()
        + f"\n\nJobs: {len(jobs.compactions)} compactions, {len(jobs.page_outs)} page-outs, "
        f"{len(jobs.imports)} imports queued; {summary['jobs_completed']} completed, "
        f"{summary['jobs_duplicated']} ran twice."
        f"\n\nAfterwards: {summary['missing_writes']} of {summary['acknowledged_writes']} "
        f"acknowledged writes missing; `rebuild_projections --verify` found "
        f"{summary['verify_differences']} difference(s); budget audit found "
        f"{summary['budget_problems']} problem(s) over {summary['sessions']} sessions."
    )
    if faults:
        text += "\n\nFaults injected:\n\n" + _faults_table(faults)
    text += (
        "\n\nCPU during the run (tests/load/cpu.py: /proc of the web and worker process trees"
        + (
            "; PostgreSQL's backends are not sampled while the cluster restarts"
            if faults
            else ", PostgreSQL's backends for the load's database"
        )
        + "), per request served:\n\n"
        "| part | CPU s | CPU ms per request |\n| --- | ---: | ---: |\n"
        + cpu_rows
        + f"\n\nThe machine's load average when the agents started: {load_average:.1f} on "
        f"{os.cpu_count()} cores (the throughput above is what was left by other work; the CPU "
        "per request is the steadier figure)."
    )
    return text


def _faults_table(faults: list) -> str:
    rows = "\n".join(
        f"| {f['at_s']} s | {f['fault']} | {f['took_s']} s | {f['outcome']} |" for f in faults
    )
    return "| at | fault | took | outcome |\n| ---: | --- | ---: | --- |\n" + rows


FAULT_NAMES = {
    "worker_sigkill": "the Celery worker and its children killed (SIGKILL), another started",
    "redis_restart": "Redis restarted (SIGTERM, AOF on; started again)",
    "postgres_restart": "PostgreSQL restarted (`pg_ctl restart -m fast`)",
}


def _reliability_section(args, line: str, faults: list) -> str:
    from tests.bench.report import stamp

    command = f"LOAD_FAULTS={1 if args.faults else 0} LOAD_AGENTS={args.agents} LOAD_SECONDS={args.seconds:g} make load"
    text = f"`{command}` printed, verbatim:\n\n```\n{line}\n```\n"
    if faults:
        text += (
            "\nThe faults, at seconds from the agents' start:\n\n"
            + "\n".join(
                f"- {f['at_s']} s: {FAULT_NAMES.get(f['fault'], f['fault'])}; took "
                f"{f['took_s']} s, {f['outcome']}"
                for f in faults
            )
            + "\n"
        )
    return text + "\n" + stamp("postgresql")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument(
        "--faults",
        action=argparse.BooleanOptionalAction,
        default=os.environ.get("LOAD_FAULTS", "0") not in ("", "0"),
        help="private PostgreSQL and Redis, restarted during the run; a worker killed",
    )
    parser.add_argument(
        "--drain", type=float, default=120, help="seconds to wait for the jobs after the load"
    )
    parser.add_argument("--docs", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "LOAD_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/contextops_load"
        ),
        help="without faults: the database to recreate (with faults: a private cluster's)",
    )
    parser.add_argument(
        "--redis-url", default=os.environ.get("LOAD_REDIS_URL", "redis://127.0.0.1:6379/12")
    )
    parser.add_argument("--web-workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    var_dir = ROOT / "var" / "load"
    var_dir.mkdir(parents=True, exist_ok=True)
    postgres = redis = None
    cleanups: list = []
    try:
        if args.faults:
            postgres = PrivatePostgres(options="-c max_connections=200").start()
            cleanups.append(postgres.close)
            args.database_url = with_database(postgres.url, "contextops_load")
            redis = PrivateRedis().start()
            cleanups.append(redis.close)
            args.redis_url = redis.url(0)
            _log(f"Private PostgreSQL on port {postgres.port}, Redis on port {redis.port}.")
        return _run(args, var_dir, postgres, redis)
    finally:
        for cleanup in reversed(cleanups):
            cleanup()


def _run(args, var_dir: Path, postgres, redis) -> int:
    _recreate_database(args.database_url)
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
        "CONTEXTOPS_SUMMARIZER": "extractive",
        "CONN_MAX_AGE": "60",
        "LOG_LEVEL": "WARNING",
        **(FAULT_SETTINGS if args.faults else {}),
    }
    # This process sends jobs too (the sweeper): its broker is the private Redis as well,
    # whatever broker the caller's environment named (the test settings' memory://).
    env.pop("CELERY_BROKER_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
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
    from django.db import connections

    connections.close_all()

    port = free_port()
    web = subprocess.Popen(
        [
            python,
            "-m",
            "gunicorn",
            "--config",
            "python:contextops.gunicorn_conf",
            "contextops.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(args.web_workers),
            "--log-level",
            "warning",
            "--access-logfile",
            str(var_dir / "access.log"),
        ],
        cwd=ROOT,
        env=env,
    )
    worker = Worker(env, var_dir / "worker.log")
    worker.start()
    sweeper = Sweeper()
    base_url = f"http://127.0.0.1:{port}"
    faults: list[dict] = []
    try:
        import httpx

        for _ in range(150):
            try:
                if httpx.get(base_url + "/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        from tests.load.agents import jobs_drain, run_load
        from tests.load.cpu import BackendSampler, process_cpu, tree_cpu

        database = args.database_url.rsplit("/", 1)[1]
        backends = BackendSampler(with_database(args.database_url, "postgres"), database)
        cpu_before = {"web": tree_cpu(web.pid), "worker": tree_cpu(worker.process.pid)}
        worker_cpu = 0.0
        load_before = process_cpu(os.getpid())
        if not args.faults:
            backends.start()
        sweeper.start()
        load_average = os.getloadavg()[0]
        injector = None
        if args.faults:

            def kill_worker():
                nonlocal worker_cpu
                worker_cpu += tree_cpu(worker.process.pid) - cpu_before["worker"]
                worker.kill_and_start()
                cpu_before["worker"] = tree_cpu(worker.process.pid)

            actions = {
                "worker_sigkill": kill_worker,
                "redis_restart": redis.restart,
                "postgres_restart": lambda: postgres.restart("fast"),
            }
            schedule = [
                (args.seconds * 0.2, "worker_sigkill"),
                (args.seconds * 0.45, "redis_restart"),
                (args.seconds * 0.7, "postgres_restart"),
            ]
            injector = threading.Thread(
                target=_faults, args=(schedule, time.monotonic(), actions, faults), daemon=True
            )
            injector.start()
        result = asyncio.run(
            run_load(base_url=base_url, keys=keys, seconds=args.seconds, jobs=True)
        )
        if injector is not None:
            injector.join()
        _log(f"Load done: {result.requests} requests; draining {result.jobs.queued} jobs.")
        drain_started = time.monotonic()
        asyncio.run(jobs_drain(base_url=base_url, keys=keys, result=result, seconds=args.drain))
        _log(f"  drained in {time.monotonic() - drain_started:.1f} s")
        cpu = {
            "web": tree_cpu(web.pid) - cpu_before["web"],
            "worker": worker_cpu + tree_cpu(worker.process.pid) - cpu_before["worker"],
            "postgresql": backends.total() if not args.faults else 0.0,
            "load generator": process_cpu(os.getpid()) - load_before,
        }
        if args.faults:
            cpu.pop("postgresql")  # its backends restart with the cluster: not sampled
        web_survived = web.poll() is None
    finally:
        sweeper.stopped.set()
        web.terminate()
        worker.stop()
        web.wait(timeout=30)
        sweeper.join(10)

    connections.close_all()
    from frames.models import Session
    from frames.projections import budget_audit, projection_diff

    sessions = list(Session.objects.all())
    differences = sum(len(projection_diff(s)) for s in sessions)
    problems = sum(len(budget_audit(s)) for s in sessions)
    missing, duplicated_writes = _check_writes(result)
    jobs = result.jobs
    duplicated_jobs = _check_jobs(result)
    errors = sum(result.errors.values()) + (0 if web_survived else 1)
    summary = {
        "requests": result.requests,
        "errors": errors,
        "acknowledged_writes": result.acknowledged.count(),
        "missing_writes": missing,
        "jobs_queued": jobs.queued,
        "jobs_completed": jobs.completed(),
        "jobs_duplicated": duplicated_jobs,
        "verify_differences": differences,
        "budget_problems": problems,
        "duplicated_writes": duplicated_writes,
        "requests_per_s": round(result.requests / args.seconds, 1),
        "p95_ms": round(result.p95_ms(), 1),
        "agents": args.agents,
        "seconds": args.seconds,
        "retries": sum(result.retries.values()),
        "jobs": {
            "compactions": len(jobs.compactions),
            "page_outs": len(jobs.page_outs),
            "imports": len(jobs.imports),
        },
        "sessions": len(sessions),
        "gunicorn_survived": web_survived,
        "faults": [f"{f['fault']}@{f['at_s']}s" for f in faults],
        "worker_exits": worker.exits,
    }
    unfinished = Counter(
        status
        for status in (jobs.status.get(i) for i, _ in jobs.all())
        if status not in ("completed", "indexed")
    )
    _log(result.table())
    for line in result.unexpected[:20]:
        _log("  unexpected:", line)
    if unfinished:
        _log(f"  jobs not completed, by last status: {dict(unfinished)}")
        for line in _unfinished_page_outs(jobs):
            _log("   ", line)
    failed_faults = [f for f in faults if f["outcome"] != "done"]
    ok = (
        not errors
        and not missing
        and not duplicated_jobs
        and not duplicated_writes
        and not differences
        and not problems
        and jobs.completed() == jobs.queued
        and not failed_faults
    )
    line = json.dumps(summary)
    if args.docs:
        from tests.bench.report import benchmarks_assemble, record, write_marked, write_section

        write_section(
            "load",
            _markdown(args, summary, result, cpu, faults, load_average),
            database="postgresql",
        )
        record(
            {
                "load": {
                    "agents": args.agents,
                    "requests_per_s": summary["requests_per_s"],
                    "p95_ms": summary["p95_ms"],
                    "errors": errors,
                    "jobs_queued": jobs.queued,
                    "jobs_completed": jobs.completed(),
                    "faults": bool(args.faults),
                }
            },
            database="postgresql",
        )
        write_marked("reliability.md", "make load", _reliability_section(args, line, faults))
        benchmarks_assemble()  # docs/benchmarks.md holds the load section too
    print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
