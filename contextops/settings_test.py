"""Settings for the test suite: the production settings with test-friendly overrides.

With nothing set, tests run on SQLite and an in-memory broker; with DATABASE_URL and
REDIS_URL they run on PostgreSQL and Redis.
"""

import copy
import os
import secrets

os.environ.setdefault("DEBUG", "0")
# Production settings refuse to start without a key; the suite (and every server process
# it starts, which inherits this environment) shares one made for this run.
os.environ.setdefault("SECRET_KEY", "test-" + secrets.token_urlsafe(40))
if not os.environ.get("REDIS_URL") and not os.environ.get("CELERY_BROKER_URL"):
    os.environ["CELERY_BROKER_URL"] = "memory://"

from .settings import *  # noqa: E402,F403
from .settings import DATABASES, VAR_DIR  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
SECURE_SSL_REDIRECT = False
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
MEDIA_ROOT = VAR_DIR / "test-media"
CONTEXTOPS_RATE_LIMIT_PER_MINUTE = int(os.environ.get("CONTEXTOPS_RATE_LIMIT_PER_MINUTE", "0"))
CONTEXTOPS_READ_RATE_LIMIT_PER_MINUTE = int(
    os.environ.get("CONTEXTOPS_READ_RATE_LIMIT_PER_MINUTE", "0")
)
# The authorization matrix and the fuzzer send hundreds of bad keys from one address;
# the tests of the throttle turn it on.
CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE = int(
    os.environ.get("CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE", "0")
)
CELERY_BEAT_SCHEDULE = {}

# Test databases are named per run (xdist's run id, shared by its workers, or this
# process's id), so two runs on one machine never open or drop each other's.
_run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:12] or str(os.getpid())
# Connections close after each request and job unless a run asks for reuse: threads of
# the live server and the in-process worker must not hold the test database open when it
# is dropped. Server processes that tests start get the production default.
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("CONN_MAX_AGE", "0"))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not the in-memory default: the live server, the in-process worker and the
    # test thread then share one database through SQLite's normal locking, which waits
    # on busy_timeout instead of failing with "database table is locked".
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-contextops-{_run}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{_run}"}

WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# Parallel test processes share one Redis: each gets its own queue so an in-process
# worker never picks up a job whose rows live in another process's test database, and
# its own cache key prefix (this run, this worker), so the cache stays Redis, as in
# production, without two processes counting into one rate-limit or lockout key.
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker:
    CELERY_TASK_DEFAULT_QUEUE = f"contextops-test-{_xdist_worker}"
CACHES = copy.deepcopy(CACHES)  # noqa: F405
CACHES["default"]["KEY_PREFIX"] = f"test-{_run}-{_xdist_worker or 'main'}"
