"""Middleware: a content security policy for every page, JSON errors on /api/, and a 503
page when the database is away."""

import io
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.template.loader import render_to_string
from django.utils.deprecation import MiddlewareMixin

from . import health
from .auth import api_key_of, is_write
from .errors import DomainError, Invalid
from .http import GetResponse, api_error, content_length_refused
from .idempotency import (
    HEADER,
    Replay,
    idempotency_claim,
    idempotency_complete,
    idempotency_key_check,
    idempotency_release,
    idempotency_unlock,
    keeps_answer,
    request_fingerprint,
)
from .ratelimit import WRITE_METHODS

logger = logging.getLogger(__name__)

# Where IdempotencyMiddleware keeps a request's claim between the view and the answer.
_RECORD = "_idempotency_record"


def probes() -> dict[str, Callable[[HttpRequest], HttpResponse]]:
    """The probes by path, looked up when a middleware is made (a test may replace one)."""
    return {"/healthz": health.healthz, "/readyz": health.readyz}


class ProbeMiddleware:
    """``/healthz`` and ``/readyz``, answered before anything reads the request's host: a
    load balancer or an orchestrator probes an instance by its own address, which
    ``ALLOWED_HOSTS`` has no reason to name (Django would answer 400 and log an error on
    every probe). The probes answer nothing but their status, so no host is trusted."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        self.probes = probes()

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        probe = self.probes.get(request.path_info)
        if probe is not None and request.method in ("GET", "HEAD"):
            return probe(request)
        return self.get_response(request)


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        response.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


def _chunked_body_read(request: HttpRequest, limit: int) -> JsonResponse | None:
    """A body sent in chunks (no Content-Length): Django would read it as empty. Read it
    here, at most ``limit`` bytes (413 past that), when the server ends the chunked stream
    for us (gunicorn: ``wsgi.input_terminated``); a server that does not (the development
    server) gets 411, asking for a Content-Length."""
    if not request.META.get("wsgi.input_terminated"):
        return api_error(
            411, "length_required", "Send the body with a Content-Length header, not in chunks."
        )
    stream = request.META["wsgi.input"]
    body = stream.read(limit + 1)
    if len(body) > limit:
        return api_error(
            413, "too_large", f"The body is over {limit} bytes, the limit.", limit=limit
        )
    request._body = body
    request._stream = io.BytesIO(body)
    request.META["CONTENT_LENGTH"] = str(len(body))
    return None


class ApiBodyLimitMiddleware(MiddlewareMixin):
    """Refuse an oversized API body from its Content-Length, before reading any of it,
    and a NUL character anywhere in the address."""

    def process_request(self, request: HttpRequest) -> HttpResponseBase | None:
        if "\x00" in request.path or "%00" in request.META.get("QUERY_STRING", ""):
            # No column can hold a NUL character; refuse it before any view sees it.
            if request.path.startswith("/api/"):
                return api_error(
                    422,
                    "validation_error",
                    "The address may not contain NUL characters.",
                    errors=[{"loc": ["path"], "msg": "NUL character"}],
                )
            return HttpResponseBadRequest("The address may not contain NUL characters.")
        if request.path.startswith("/api/"):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
                refused = _chunked_body_read(request, limit)
                if refused is not None:
                    return refused
            return content_length_refused(request, limit)
        return None


class ApiErrorMiddleware(MiddlewareMixin):
    """Turn Django's own HTML error pages under /api/ into the documented JSON format."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if not request.path.startswith("/api/") or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        codes = {
            400: ("bad_request", "The request could not be read."),
            403: ("permission_denied", "You may not do this."),
            404: ("not_found", "No such API path."),
            405: ("method_not_allowed", "This method is not allowed on this path."),
            413: ("too_large", "The body is too large."),
        }
        code, detail = codes.get(response.status_code, ("error", "The request failed."))
        return api_error(response.status_code, code, detail)

    def process_exception(self, request: HttpRequest, exception: Exception) -> None:
        return None


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """The dashboard's answer while the database is away (a restart, a failover): 503 with
    Retry-After and a page that needs no database, instead of a server error. The API
    answers the same in its own format (contextops.api)."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not health.database_lost(exception):
            return None
        if request.path.startswith("/api/"):
            return None  # the API's own handler answers (contextops.api)
        logger.warning("database unavailable on %s %s: %s", request.method, request.path, exception)
        response = HttpResponse(render_to_string("503.html"), status=503)
        response["Retry-After"] = "2"
        return response


def _unavailable(key: str) -> JsonResponse:
    logger.warning("database unavailable while claiming %s %s", HEADER, key)
    response = api_error(
        503, "unavailable", "The database is unavailable; nothing was changed. Retry shortly."
    )
    response["Retry-After"] = "2"
    return response


class IdempotencyMiddleware:
    """``Idempotency-Key`` on API writes (contextops.idempotency): claim the key before the
    view runs, replay the stored answer to a repeat, store the first answer after.

    It acts only on a write whose bearer key resolves and may write; anything else goes
    to the API unchanged, which answers 401 or 403 itself.
    """

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        try:
            response = self.get_response(request)
            record = getattr(request, _RECORD, None)
            if record is None:
                return response
            try:
                # A streaming answer is not an HttpResponse: it has no content to keep.
                if keeps_answer(response.status_code) and isinstance(response, HttpResponse):
                    idempotency_complete(
                        record=record,
                        status=response.status_code,
                        content_type=response.get("Content-Type", ""),
                        body=response.content,
                    )
                else:
                    idempotency_release(record=record)
            except (DatabaseError, InterfaceError) as error:
                if not health.database_lost(error):
                    raise
                # The write's own answer stands; the claim stays open, and a retry takes
                # it over once this request's lock is gone (contextops.idempotency).
                logger.warning("could not store the answer for %s %s", HEADER, record.key)
            return response
        finally:
            # The claim's advisory lock lives on the connection, which outlives the
            # request (CONN_MAX_AGE): released on every path, exceptions included.
            record = getattr(request, _RECORD, None)
            if record is not None:
                idempotency_unlock(record=record)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., HttpResponseBase],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        raw = request.headers.get(HEADER)
        if raw is None or not request.path.startswith("/api/"):
            return None
        if request.method not in WRITE_METHODS:
            return None
        try:
            key = idempotency_key_check(raw)
        except Invalid as exc:
            return JsonResponse(exc.body_at(("header",)), status=exc.status)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        try:
            api_key = api_key_of(request, token.strip()) if scheme.lower() == "bearer" else None
        except DomainError:
            api_key = None
        except (DatabaseError, InterfaceError) as error:
            if not health.database_lost(error):
                raise
            return _unavailable(key)
        if api_key is None or (api_key.read_only and is_write(request)):
            return None  # the API refuses it, and there is nothing to remember
        try:
            claimed = idempotency_claim(
                organization_id=api_key.agent.organization_id,
                api_key_id=api_key.pk,
                key=key,
                method=request.method,
                path=request.get_full_path(),
                fingerprint=request_fingerprint(
                    method=request.method, path=request.get_full_path(), body=request.body
                ),
            )
        except DomainError as exc:
            response = JsonResponse(exc.as_body(), status=exc.status)
            if "retry_after" in exc.extra:
                response["Retry-After"] = str(exc.extra["retry_after"])
            return response
        except (DatabaseError, InterfaceError) as error:
            if not health.database_lost(error):
                raise
            return _unavailable(key)
        if isinstance(claimed, Replay):
            replay = HttpResponse(
                claimed.body, status=claimed.status, content_type=claimed.content_type or None
            )
            replay["Idempotent-Replayed"] = "true"
            return replay
        setattr(request, _RECORD, claimed)
        return None
