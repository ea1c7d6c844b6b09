# The agent client (contextops.client) runs where neither Django nor Celery is installed.
try:
    from .celery import app as celery_app
except ImportError:
    celery_app = None

__all__ = ("celery_app",)
