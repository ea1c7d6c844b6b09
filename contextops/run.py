"""`make run`: the web server and a Celery worker (with beat) side by side, stopped together.

Usage: python -m contextops.run [--port 8000]
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CONTEXTOPS_VAR_DIR", ROOT / "var"))


def broker_named(environ: Mapping[str, str]) -> str:
    """The broker the worker uses, as the banner names it (settings pick it the same
    way: CELERY_BROKER_URL, else REDIS_URL, else the filesystem), without a password."""
    url = environ.get("CELERY_BROKER_URL") or environ.get("REDIS_URL") or ""
    if not url or url.startswith("filesystem://"):
        return f"the filesystem broker in {VAR_DIR / 'broker'}"
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"the broker at {parts.scheme}://{parts.hostname or ''}{port}{parts.path}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    args = parser.parse_args()

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "contextops.settings")
    python = sys.executable
    processes: list[subprocess.Popen[bytes]] = []
    stopping: list[object] = []  # the signals received

    def stop(*signum: object) -> None:
        stopping.extend(signum[:1])
        for p in processes:
            if p.poll() is None:
                p.terminate()

    # Each server runs in a process group of its own, so a signal to this one's group
    # (Ctrl-C in a terminal, a process manager, ``kill -TERM -<pgid>``) reaches this
    # process only, which stops each server through its main process, and that process
    # its own children. Sent to the whole group, it also reached the Celery worker's
    # pool processes: one killed while it held the pool's queue lock left the worker
    # waiting for that lock at its exit until the 15 s below ran out (a stop of 16-18 s
    # instead of the worker's warm shutdown, a few seconds). SIGHUP too: a closed
    # terminal hangs up this process, and the servers would otherwise outlive it. The
    # handlers come first, and a signal that came before both servers were listed still
    # ends the loop below, so no server outlives this process.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    web = subprocess.Popen(
        [
            python,
            "-m",
            "gunicorn",
            "--config",
            "python:contextops.gunicorn_conf",
            "contextops.wsgi:application",
            "--bind",
            f"{args.host}:{args.port}",
            "--access-logfile",
            "-",
        ],
        cwd=ROOT,
        env=env,
        process_group=0,
    )
    worker = subprocess.Popen(
        [
            python,
            "-m",
            "celery",
            "-A",
            "contextops",
            "worker",
            "--beat",
            "--loglevel",
            "INFO",
            "--concurrency",
            "2",
            "--schedule",
            str(VAR_DIR / "celerybeat-schedule"),
        ],
        cwd=ROOT,
        env=env,
        process_group=0,
    )
    processes += [web, worker]
    time.sleep(2)
    password = os.environ.get("CONTEXTOPS_DEMO_PASSWORD", "demo-password")  # as seed_demo sets it
    key_file = VAR_DIR / "demo-api-key.txt"
    api_key = (
        key_file.read_text().strip() if key_file.exists() else "python manage.py create_api_key ..."
    )
    print(
        "\n  contextops is running\n"
        f"  Dashboard: http://{args.host}:{args.port}/   (log in as demo / {password})\n"
        f"  API:       http://{args.host}:{args.port}/api/v1/docs\n"
        f"  API key:   {api_key}\n"
        f"  Agents:    CONTEXTOPS_URL=http://{args.host}:{args.port} CONTEXTOPS_API_KEY={api_key}\n"
        f"  Worker:    a Celery worker with beat, on {broker_named(os.environ)}\n"
        "  Stop with Ctrl-C.\n",
        flush=True,
    )
    try:
        while not stopping and all(p.poll() is None for p in processes):
            time.sleep(0.5)
    finally:
        stop()
        for p in processes:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
