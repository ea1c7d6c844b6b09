import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

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
def request_id_adopt(task=None, **_) -> None:
    request_id = getattr(task.request, "request_id", None) if task is not None else None
    if request_id:
        task.request.request_id_token = request_id_enter(str(request_id))


@task_postrun.connect
def request_id_drop(task=None, **_) -> None:
    token = getattr(task.request, "request_id_token", None) if task is not None else None
    if token is not None:
        task.request.request_id_token = None
        request_id_leave(token)
