"""``POST /v1/traces`` and ``POST /api/v1/otel/v1/traces``: the OTLP/HTTP trace receiver.

Authenticated with an API key, as ``Authorization: Bearer <key>`` or ``x-api-key: <key>``
(some exporters can only set a plain header); a read-only key answers 403
``read_only_key``. Errors are the API's JSON (``{"error", "detail", ...}``); a body that
was read answers ``ExportTraceServiceResponse`` in the request's own encoding, with
``partial_success`` (``rejected_spans``, ``error_message``) when some spans were refused.
"""

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from contextops.auth import ApiKeyAuth
from contextops.errors import DomainError, Unauthenticated
from contextops.http import api_error, content_length_refused

from . import spans as otlp
from .ingest import spans_ingest

logger = logging.getLogger(__name__)

MAX_BYTES = 4 * 1024 * 1024
MAX_DECODED_BYTES = 32 * 1024 * 1024
MAX_SPANS = 5_000


def _limits() -> tuple[int, int, int]:
    return (
        int(getattr(settings, "CONTEXTOPS_OTLP_MAX_BYTES", MAX_BYTES)),
        int(getattr(settings, "CONTEXTOPS_OTLP_MAX_DECODED_BYTES", MAX_DECODED_BYTES)),
        int(getattr(settings, "CONTEXTOPS_OTLP_MAX_SPANS", MAX_SPANS)),
    )


def _key_of(request: HttpRequest) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key", "").strip()


@csrf_exempt
def traces(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        response = api_error(405, "method_not_allowed", "Send spans with POST.")
        response["Allow"] = "POST"
        return response
    raw = _key_of(request)
    try:
        if not raw:
            raise Unauthenticated(
                "Send an API key as Authorization: Bearer <key> or in the x-api-key header."
            )
        key = ApiKeyAuth().authenticate(request, raw)
    except DomainError as exc:
        return JsonResponse(exc.as_body(), status=exc.status)
    max_bytes, max_decoded, max_spans = _limits()
    media = otlp.media_type(request.content_type or request.headers.get("Content-Type", ""))
    if media not in (otlp.PROTOBUF, otlp.JSON):
        return api_error(
            415,
            "unsupported_media_type",
            f"Send {otlp.PROTOBUF} or {otlp.JSON}, not {media or 'no Content-Type'}.",
        )
    refused = content_length_refused(request, max_bytes)
    if refused is not None:
        return refused
    body = request.read(max_bytes + 1)
    if len(body) > max_bytes:
        return api_error(413, "too_large", f"The body is over {max_bytes} bytes.", limit=max_bytes)
    try:
        body = otlp.decompressed(
            body, request.headers.get("Content-Encoding", ""), limit=max_decoded
        )
        message = (
            otlp.request_from_json(body) if media == otlp.JSON else otlp.request_from_protobuf(body)
        )
    except otlp.BodyTooLarge as exc:
        return api_error(
            413,
            "too_large",
            f"The decompressed body is over {exc.limit} bytes.",
            limit=exc.limit,
        )
    except otlp.BodyInvalid as exc:
        return api_error(400, "bad_request", str(exc))
    count = otlp.span_count(message)
    if count > max_spans:
        return api_error(
            413,
            "too_large",
            f"The request holds {count} spans; the limit is {max_spans} per request: "
            "lower the exporter's batch size (OTEL_BSP_MAX_EXPORT_BATCH_SIZE).",
            limit=max_spans,
        )
    export = otlp.spans_of(message)
    outcome = spans_ingest(organization=key.agent.organization, agent=key.agent, spans=export.spans)
    rejected = export.rejected + outcome.rejected
    errors = export.errors + outcome.errors
    if errors:
        logger.info("OTLP export: %s spans rejected: %s", rejected, "; ".join(errors[:5]))
    body = otlp.response_body(
        rejected=rejected, error_message="; ".join(errors)[:2000], as_json=media == otlp.JSON
    )
    return HttpResponse(body, status=200, content_type=media)
