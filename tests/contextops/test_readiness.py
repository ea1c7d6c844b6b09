"""/readyz reaches the database and the broker; /healthz only says the process answers."""

import socket

from django.test import Client

from tests.s3 import S3Bucket


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_it_is_ready_when_the_database_and_the_broker_answer(db):
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "broker": "ok",
        "storage": "ok",
        "static": "ok",
    }


def test_it_names_the_broker_when_it_cannot_be_reached(db, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{_closed_port()}/0"

    response = Client().get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["database"]) == ("unavailable", "ok")
    assert body["broker"].startswith("unavailable")
    assert Client().get("/healthz").status_code == 200  # alive, only not ready


def test_a_probe_by_the_instances_own_address_is_answered_and_logs_no_error(db, caplog):
    # ALLOWED_HOSTS names the site, not the address an orchestrator probes a pod by.
    for path in ("/healthz", "/readyz"):
        response = Client().get(path, HTTP_HOST="10.1.2.3:8000")
        assert response.status_code == 200, (path, response.content)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    # Every other page still checks the host.
    assert Client().get("/accounts/login/", HTTP_HOST="10.1.2.3:8000").status_code == 400


def test_it_names_a_bucket_that_is_not_there_before_the_first_write_needs_it(
    db, settings, s3_bucket
):
    settings.STORAGES = s3_bucket.storages()
    assert Client().get("/readyz").json()["storage"] == "ok"
    missing = S3Bucket(server=s3_bucket.server, name=s3_bucket.name + "-missing")
    settings.STORAGES = missing.storages()
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["database"], body["broker"]) == ("unavailable", "ok", "ok")
    assert body["storage"].startswith("unavailable")
