from .version import __version__

# Celery is optional for importing the package (the deprecated contextops.client alias
# re-exports contextops_client, which needs neither Django nor Celery).
try:
    from .celery import app as celery_app
except ImportError:
    celery_app = None

__all__ = ("__version__", "celery_app")
