import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import (
    task_failure,
    task_postrun,
    task_prerun,
    task_retry,
    task_success,
    worker_init,
)
from django.conf import settings
from prometheus_client import Counter

from .requestid import request_id_enter, request_id_leave

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextops.settings")

app = Celery("contextops")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Every installed app's ``tasks`` module, and those of the frames packages that are not
# apps of their own (they keep their models in ``frames``).
app.autodiscover_tasks()
app.autodiscover_tasks(["frames.context", "frames.suspensions", "frames.ownership"])


# A job sent while a request was answered carries its id (contextops.jobs): the worker's
# log lines of that job carry it too.
@task_prerun.connect
def request_id_adopt(task: Any = None, **_: Any) -> None:
    request_id = getattr(task.request, "request_id", None) if task is not None else None
    if request_id:
        task.request.request_id_token = request_id_enter(str(request_id))


@task_postrun.connect
def request_id_drop(task: Any = None, **_: Any) -> None:
    token = getattr(task.request, "request_id_token", None) if task is not None else None
    if token is not None:
        task.request.request_id_token = None
        request_id_leave(token)


# GET /metrics (contextops/metrics.py): the jobs a worker ran, counted in the process that
# ran them. With PROMETHEUS_MULTIPROC_DIR set to the directory of this host's web
# processes, the worker's figures are written there too and their scrape adds them up.
JOBS = Counter(
    "contextops_jobs",
    "Jobs the workers ran, by task and outcome (success, failure, retry).",
    ["task", "outcome"],
)


def _job_count(task: Any, outcome: str) -> None:
    JOBS.labels(getattr(task, "name", None) or "unknown", outcome).inc()


@task_success.connect
def job_succeeded(sender: Any = None, **_: Any) -> None:
    _job_count(sender, "success")


@task_failure.connect
def job_failed(sender: Any = None, **_: Any) -> None:
    _job_count(sender, "failure")


@task_retry.connect
def job_retried(sender: Any = None, **_: Any) -> None:
    _job_count(sender, "retry")


@worker_init.connect
def metrics_dir_make(**_: Any) -> None:
    """The directory must exist before the first job writes its figures there; gunicorn
    makes it too, and whichever starts first does."""
    if settings.PROMETHEUS_MULTIPROC_DIR:
        Path(settings.PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)
