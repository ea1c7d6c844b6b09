"""Request ids (contextops.requestid): every answer carries ``X-Request-ID``, the one the
request brought when it is sane, a new one otherwise; each log line of the request names
it, and a job the request sends carries it to the worker."""

import io
import logging
import re
import threading

import pytest
from django.http import HttpResponse
from django.test import Client

from contextops import health
from contextops.celery import app
from contextops.jobs import job_send
from contextops.requestid import (
    RequestIdFilter,
    request_id_current,
    request_id_enter,
    request_id_leave,
)
from frames import selectors as frames_selectors

GENERATED = re.compile(r"[0-9a-f]{32}")


def test_an_answer_without_an_incoming_id_gets_a_new_one(api):
    first = Client().get("/healthz")
    second = api.get("/sessions")
    assert second.status_code == 200
    ids = [first["X-Request-ID"], second["X-Request-ID"]]
    assert all(GENERATED.fullmatch(i) for i in ids), ids
    assert ids[0] != ids[1]


@pytest.mark.parametrize(
    "incoming",
    ["abc-123", "Root=1-67891233-abcdef012345678912345678", "a" * 200, "req:42/7@lb_1.~*"],
)
def test_a_sane_incoming_id_is_echoed(api, incoming):
    assert Client().get("/healthz", HTTP_X_REQUEST_ID=incoming)["X-Request-ID"] == incoming
    assert api.get("/sessions", HTTP_X_REQUEST_ID=incoming)["X-Request-ID"] == incoming


@pytest.mark.parametrize(
    "incoming",
    ["", "a" * 201, "two words", "line\nbreak", 'quo"te', "semi;colon", "a,b", "café", "tab\t"],
)
def test_an_insane_incoming_id_is_replaced(db, incoming):
    answered = Client().get("/healthz", HTTP_X_REQUEST_ID=incoming)["X-Request-ID"]
    assert GENERATED.fullmatch(answered), answered


def test_errors_carry_the_id_in_the_header_and_keep_their_documented_body(api):
    response = api.get("/no/such/thing", HTTP_X_REQUEST_ID="trace-404")
    assert response.status_code == 404
    assert response["X-Request-ID"] == "trace-404"
    assert response.json() == {"error": "not_found", "detail": "No such API path."}


@pytest.fixture
def console():
    """What the configured console handler (settings.LOGGING) writes, as text."""
    handlers = [
        h
        for h in logging.getLogger().handlers
        if isinstance(h, logging.StreamHandler)
        and any(isinstance(f, RequestIdFilter) for f in h.filters)
    ]
    assert handlers, "settings.LOGGING's console handler has no request id filter"
    stream = io.StringIO()
    previous = handlers[0].setStream(stream)
    try:
        yield stream
    finally:
        handlers[0].setStream(previous)


def test_every_log_line_of_a_request_names_its_id(db, monkeypatch, console):
    def probe(request):
        logging.getLogger("contextops.probe").warning("probed")
        return HttpResponse("ok")

    monkeypatch.setattr(health, "healthz", probe)
    given = Client().get("/healthz", HTTP_X_REQUEST_ID="trace-7")
    made = Client().get("/healthz")
    logging.getLogger("contextops.probe").warning("outside")

    lines = console.getvalue().splitlines()
    assert given["X-Request-ID"] == "trace-7"
    assert [line for line in lines if "probed" in line and "request_id=trace-7 " in line]
    assert [
        line for line in lines if "probed" in line and f"request_id={made['X-Request-ID']} " in line
    ]
    assert [line for line in lines if "outside" in line and "request_id=- " in line]
    assert request_id_current() == "-"  # nothing left behind once the request answered


def test_every_line_of_a_500_names_the_requests_id(api, monkeypatch, console):
    """Django logs a 5xx answer once the middleware has returned (django.request): that
    line names the request's id too, as does the API's own line with the traceback."""

    def broken(**kwargs):
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(frames_selectors, "session_list", broken)
    response = api.get("/sessions", HTTP_X_REQUEST_ID="trace-9")
    assert response.status_code == 500
    assert response.json()["error"] == "internal_error"
    lines = [line for line in console.getvalue().splitlines() if " ERROR " in line]
    assert {line.split()[3] for line in lines} == {"contextops.api", "django.request"}, lines
    assert all("request_id=trace-9 " in line for line in lines), lines


def test_a_log_record_carries_the_id_as_an_attribute(db, monkeypatch, caplog):
    seen = []

    def probe(request):
        record = logging.LogRecord("contextops.probe", logging.INFO, __file__, 1, "x", (), None)
        RequestIdFilter().filter(record)
        seen.append(record.request_id)
        return HttpResponse("ok")

    monkeypatch.setattr(health, "healthz", probe)
    Client().get("/healthz", HTTP_X_REQUEST_ID="trace-8")
    assert seen == ["trace-8"]


class _Task:
    name = "probe"

    def __init__(self):
        self.sent = []

    def apply_async(self, **options):
        self.sent.append(options)


def test_a_job_sent_during_a_request_carries_its_id_in_a_header():
    task = _Task()
    job_send(task, 1)
    token = request_id_enter("trace-9")
    try:
        job_send(task, 2)
    finally:
        request_id_leave(token)
    assert task.sent[0]["headers"] is None  # a beat sweep's job names no request
    assert task.sent[1]["headers"] == {"request_id": "trace-9"}
    assert task.sent[1]["args"] == (2,)


RAN: list[tuple[str, str]] = []
RAN_DONE = threading.Event()


@app.task(name="tests.request_id_probe")
def request_id_probe(marker: str) -> None:
    RAN.append((marker, request_id_current()))
    RAN_DONE.set()


def test_the_worker_runs_the_job_under_the_request_id(celery_worker):
    RAN.clear()
    RAN_DONE.clear()
    token = request_id_enter("trace-10")
    try:
        assert job_send(request_id_probe, "sent")
    finally:
        request_id_leave(token)
    assert RAN_DONE.wait(30), "the worker never ran the job"
    assert RAN == [("sent", "trace-10")]
    assert request_id_current() == "-"
