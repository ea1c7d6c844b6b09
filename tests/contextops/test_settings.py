"""Production settings pass Django's deployment checklist; the default install needs no server."""

import os
import secrets
import subprocess
import sys

from django.conf import settings


def _clean_environ() -> dict:
    # The browser tests allow async-unsafe ORM calls in this process; a server never would.
    return {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}


def _manage(*args, **env):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env={**_clean_environ(), "DJANGO_SETTINGS_MODULE": "contextops.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_reports_nothing_with_production_values(tmp_path):
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(60),
        ALLOWED_HOSTS="ops.example.com",
        CONTEXTOPS_VAR_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_flags_a_debug_server(tmp_path):
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING", DEBUG="1", CONTEXTOPS_VAR_DIR=str(tmp_path)
    )
    assert result.returncode != 0
    assert "DEBUG" in result.stdout + result.stderr


def _without_secret_key() -> dict:
    unset = {"SECRET_KEY", "DATABASE_URL"}
    return {k: v for k, v in _clean_environ().items() if k not in unset}


def _manage_bare(*args, **env):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env={**_without_secret_key(), "DJANGO_SETTINGS_MODULE": "contextops.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    result = _manage_bare(
        "check",
        DEBUG="0",
        DATABASE_URL="postgres://contextops@127.0.0.1:5432/contextops",
        CONTEXTOPS_VAR_DIR=str(tmp_path),
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set in production" in result.stderr
    assert "set DEBUG=1" in result.stderr  # what a developer on a database server does
    assert not (tmp_path / "secret-key").exists()  # no key invented for this process


def test_the_embedded_default_keeps_one_key_per_installation(tmp_path):
    first = _manage_bare(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        DEBUG="0",
        CONTEXTOPS_VAR_DIR=str(tmp_path),
        DATABASE_URL="",
    )
    again = _manage_bare(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        DEBUG="0",
        CONTEXTOPS_VAR_DIR=str(tmp_path),
        DATABASE_URL="",
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout == again.stdout and len(first.stdout.strip()) > 40


def _conn_max_age(argv: list[str], tmp_path) -> int:
    probe = (
        f"import sys; sys.argv = {argv!r}; import django; django.setup(); "
        "from django.conf import settings; print(settings.DATABASES['default']['CONN_MAX_AGE'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=settings.BASE_DIR,
        env={
            **_clean_environ(),
            "DJANGO_SETTINGS_MODULE": "contextops.settings",
            "DATABASE_URL": "postgres://contextops@127.0.0.1:5432/contextops",
            "SECRET_KEY": secrets.token_urlsafe(60),
            "CONN_MAX_AGE": "60",
            "CONTEXTOPS_VAR_DIR": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().splitlines()[-1])


def test_the_development_server_keeps_no_database_connections(tmp_path):
    """runserver answers each request on a new thread: kept connections would pile up
    until PostgreSQL refused clients. Every other process keeps them (CONN_MAX_AGE)."""
    assert _conn_max_age(["manage.py", "runserver"], tmp_path) == 0
    assert _conn_max_age(["gunicorn", "contextops.wsgi:application"], tmp_path) == 60
    assert _conn_max_age(["celery", "-A", "contextops", "worker"], tmp_path) == 60


def test_make_runs_banner_names_the_broker_its_worker_uses():
    from contextops.run import VAR_DIR, broker_named

    assert broker_named({}) == f"the filesystem broker in {VAR_DIR / 'broker'}"
    redis = {"REDIS_URL": "redis://:s3cret@127.0.0.1:6379/8"}
    assert broker_named(redis) == "the broker at redis://127.0.0.1:6379/8"
    chosen = {**redis, "CELERY_BROKER_URL": "amqp://guest:pw@mq:5672/vhost"}
    assert broker_named(chosen) == "the broker at amqp://mq:5672/vhost"
