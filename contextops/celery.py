import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextops.settings")

app = Celery("contextops")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Every installed app's ``tasks`` module, and those of the frames packages that are not
# apps of their own (they keep their models in ``frames``).
app.autodiscover_tasks()
app.autodiscover_tasks(["frames.context", "frames.suspensions"])
