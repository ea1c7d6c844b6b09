"""Middleware: a content security policy for every page, and JSON errors on /api/."""

from django.conf import settings
from django.http import HttpResponseBadRequest, JsonResponse


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
