"""Request ids: one per request, in the ``X-Request-ID`` answer header and on every log line
the request writes, so a line of an operator's logs, an agent's report and a proxy's
access log can be matched.

An ``X-Request-ID`` the request brings (a proxy or a load balancer that made one, an
agent that sent its own) is kept when it is sane: 1 to 200 characters, each an HTTP token
character (letters, digits and ``!#$%&'*+-.^_`|~``) or one of ``=:/@``. Anything else,
spaces, quotes, control characters or a newline that would forge a log line, is replaced
by a new id (32 hex digits, a uuid4), as is a missing one.

The id lives in a context variable for the length of the request (each gunicorn thread
has its own), which :class:`RequestIdFilter` copies onto each log record as
``request_id`` ("-" outside a request). Django logs a 4xx or 5xx answer
(``django.request``) after the middleware has returned: the filter takes that line's id
from the request the record names. Jobs a request sends carry it in a message header
(``contextops.celery``), and the worker's log lines of that job carry it in turn.
"""

import contextvars
import logging
import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest
from django.http.response import HttpResponseBase

HEADER = "X-Request-ID"
NONE = "-"
MAX_LENGTH = 200
SANE = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~=:/@]{1," + str(MAX_LENGTH) + "}")

_current: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default=NONE)


def request_id_choose(incoming: str | None) -> str:
    """The id a request keeps: its own when sane, else a new one."""
    if incoming is not None and SANE.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


def request_id_current() -> str:
    """The id of the request (or job) this code runs for, "-" outside any."""
    return _current.get()


def request_id_enter(request_id: str) -> contextvars.Token[str]:
    """Make ``request_id`` current; give the token to :func:`request_id_leave` after."""
    return _current.set(request_id)


def request_id_leave(token: contextvars.Token[str]) -> None:
    """Make current again the id that was before :func:`request_id_enter`."""
    _current.reset(token)


class RequestIdFilter(logging.Filter):
    """Give every record a ``request_id`` (the current one unless it has its own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            of_request = getattr(getattr(record, "request", None), "request_id", None)
            record.request_id = of_request if isinstance(of_request, str) else _current.get()
        return True


class RequestIdMiddleware:
    """First of all middleware: every answer carries the id, probes and errors included."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        request_id = request_id_choose(request.headers.get(HEADER))
        # Read back through getattr by RequestIdFilter, on any request it finds.
        request.request_id = request_id  # type: ignore[attr-defined]
        token = request_id_enter(request_id)
        try:
            response = self.get_response(request)
        finally:
            request_id_leave(token)
        response[HEADER] = request_id
        return response
