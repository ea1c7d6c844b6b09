"""Gunicorn's settings for contextops in production, and for ``make run`` and ``make load``:

    gunicorn -c python:contextops.gunicorn_conf contextops.wsgi:application

The web work is Python on the CPU between short database round trips, so a web host runs
one worker process per core (``WEB_WORKERS``, default the host's cores) with threads
(``WEB_THREADS``, default 8) to cover those waits and the long polls of agents waiting for
a person (``GET /suspensions/{token}?wait=30`` holds its thread up to 30 s); each thread keeps its database
connection (``CONN_MAX_AGE``, settings.py). The application is loaded once, before the
workers fork, and what it loaded is frozen out of the garbage collector's sweeps, so the
workers share those pages and a request's collections look only at its own objects.
``BIND`` (default 127.0.0.1:8000), ``WEB_KEEPALIVE`` (seconds, default 5) and
``WEB_TIMEOUT`` (seconds, default 60) are the rest. Each request is one line of the access
log (``WEB_ACCESS_LOG``: standard output by default, a file name, or empty for none): the
client, the request line, the status, the size, the time taken in milliseconds, the
user agent and the request's id (the ``X-Request-ID`` answer header, which the
application's own log lines of that request carry too); API keys travel in a header and
are never in it.

With ``PROMETHEUS_MULTIPROC_DIR`` set, each worker writes the figures of ``GET /metrics``
(contextops/metrics.py) to files there: the master removes the files of processes that
are gone when it starts (an earlier run's would otherwise be added to this run's) and
forgets a worker's live figures when it exits.
"""

import gc
import os
from pathlib import Path
from typing import Any

from prometheus_client import multiprocess

bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_WORKERS", 0)) or os.cpu_count() or 1
threads = int(os.environ.get("WEB_THREADS", 8))
# gthread, answering the requests gunicorn itself refuses (414, 431, 400) in JSON.
worker_class = "contextops.gunicorn_worker.JsonErrorThreadWorker"
keepalive = int(os.environ.get("WEB_KEEPALIVE", 5))
timeout = int(os.environ.get("WEB_TIMEOUT", 60))
preload_app = True
accesslog = os.environ.get("WEB_ACCESS_LOG", "-") or None
access_log_format = '%({x-forwarded-for}i)s %(h)s "%(r)s" %(s)s %(B)s %(M)sms "%(a)s" request_id=%({x-request-id}o)s'
metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def on_starting(server: Any) -> None:  # gunicorn's Arbiter: gunicorn ships no types
    """Before the first worker: the files of processes that are gone (the last run's
    workers) go, so the figures start again from zero; those of a process still running
    (a Celery worker of this host, contextops/celery.py) stay. A file is named after
    the process that writes it (``counter_<pid>.db``)."""
    if metrics_dir:
        directory = Path(metrics_dir)
        directory.mkdir(parents=True, exist_ok=True)
        for path in directory.glob("*.db"):
            pid = path.stem.rpartition("_")[2]
            if not (pid.isdigit() and _alive(int(pid))):
                path.unlink(missing_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    """A worker is gone: its counters stay (they add up), its live gauges go."""
    if metrics_dir:
        multiprocess.mark_process_dead(worker.pid, metrics_dir)


def when_ready(server: Any) -> None:
    """Loaded, before the first fork: what is here now lives as long as the process.

    The tokenizer's tables are loaded here too, once for every worker, rather than by
    each worker's first request that counts tokens."""
    # Gunicorn reads this file before it loads the application (and Django's settings).
    from contextops.tokens import encoding

    encoding()
    gc.collect()
    gc.freeze()
