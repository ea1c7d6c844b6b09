"""Middleware: a content security policy for every page, JSON errors on /api/, and a 503
page when the database is away."""

import logging

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


def _api_error(status: int, code: str, detail: str, **extra) -> JsonResponse:
    return JsonResponse({"error": code, "detail": detail, **extra}, status=status)


class ApiBodyLimitMiddleware:
    """Refuse an oversized API body from its Content-Length, before reading any of it,
    and a NUL character anywhere in the address."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or "%00" in request.META.get("QUERY_STRING", ""):
            # No column can hold a NUL character; refuse it before any view sees it.
            if request.path.startswith("/api/"):
                return _api_error(
                    422,
                    "validation_error",
                    "The address may not contain NUL characters.",
                    errors=[{"loc": ["path"], "msg": "NUL character"}],
                )
            return HttpResponseBadRequest("The address may not contain NUL characters.")
        if request.path.startswith("/api/"):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return _api_error(400, "bad_request", "Content-Length is not a number.")
            if length > limit:
                return _api_error(
                    413,
                    "too_large",
                    f"The body is {length} bytes; the limit is {limit}.",
                    limit=limit,
                )
        return self.get_response(request)


class ApiErrorMiddleware:
    """Turn Django's own HTML error pages under /api/ into the documented JSON format."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
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
        return _api_error(response.status_code, code, detail)

    def process_exception(self, request, exception):
        return None


class DatabaseUnavailableMiddleware:
    """The dashboard's answer while the database is away (a restart, a failover): 503 with
    Retry-After and a page that needs no database, instead of a server error. The API
    answers the same in its own format (contextops.api)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        if request.path.startswith("/api/"):
            return None  # the API's own handler answers (contextops.api)
        logger.warning("database unavailable on %s %s: %s", request.method, request.path, exception)
        response = HttpResponse(render_to_string("503.html"), status=503)
        response["Retry-After"] = "2"
        return response
