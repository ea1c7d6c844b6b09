"""Our own work as OpenTelemetry spans, sent to any OTLP/HTTP collector (Langfuse's OTLP
endpoint, an OpenTelemetry Collector, Jaeger, ...).

Off unless ``CONTEXTOPS_OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL; ``/v1/traces`` is
added) or one of the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; headers, timeout and compression come from
the standard ``OTEL_EXPORTER_OTLP_*`` variables, the service name from
``OTEL_SERVICE_NAME`` (default ``contextops``). Off, ``span`` is a no-op context and
``TracingMiddleware`` leaves the middleware chain: no request pays for it.

On, spans go through the SDK's ``BatchSpanProcessor``: a request only adds its span to an
in-memory queue; a background thread exports, so a slow or dead collector never delays
an answer (the exporter logs the failure and the queue drops what it cannot hold).

What is traced: every request (``TracingMiddleware``); a context pack
(``gen_ai.operation.name = search_memory``, ``gen_ai.memory.*``: records returned, the
budget, tokens used, the compaction level); a fact write or supersession
(``update_memory``); a compaction run; an approval decided; an import.
"""

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from .http import GetResponse, route_template

logger = logging.getLogger(__name__)

SETTING = "CONTEXTOPS_OTEL_EXPORTER_OTLP_ENDPOINT"
STANDARD = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SCOPE = "contextops"

_tracer: Any = None
_provider: Any = None


def export_endpoint() -> str:
    """Where spans go: our setting's base URL plus ``/v1/traces``, else "" (the standard
    variables, read by the exporter itself, or nothing)."""
    base = str(getattr(settings, SETTING, "") or os.environ.get(SETTING, "")).strip()
    return f"{base.rstrip('/')}/v1/traces" if base else ""


def export_configured() -> bool:
    return bool(export_endpoint() or any(os.environ.get(name) for name in STANDARD))


def tracing_setup(*, endpoint: str = "", exporter: Any = None) -> Any:
    """Install the tracer provider and its batch exporter; returns the provider. Called
    once per process at start (contextops.apps) when export is configured; tests pass an
    ``endpoint`` or an ``exporter`` of their own."""
    global _tracer, _provider
    if exporter is None:
        target = endpoint or export_endpoint()
        exporter = OTLPSpanExporter(endpoint=target) if target else OTLPSpanExporter()
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "contextops"}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if _provider is not None:
        _provider.shutdown()
    _provider, _tracer = provider, provider.get_tracer(SCOPE)
    return provider


def tracing_teardown() -> None:
    """Flush and stop the exporter; ``span`` is a no-op again."""
    global _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    _tracer = _provider = None


def tracing_on() -> bool:
    return _tracer is not None


def span(name: str, attributes: Mapping[str, Any] | None = None) -> Any:
    """A span around the block (yielding it, to add attributes); a no-op context when
    export is off. Attributes whose value is None are left out."""
    if _tracer is None:
        return nullcontext(None)
    return _span(name, attributes)


@contextmanager
def _span(name: str, attributes: Mapping[str, Any] | None) -> Iterator[Any]:
    clean = {k: v for k, v in (attributes or {}).items() if v is not None}
    with _tracer.start_as_current_span(name, attributes=clean) as current:
        yield current


def span_set(current: Any, attributes: Mapping[str, Any]) -> None:
    """Add attributes to ``current`` (a ``span``'s value; None when export is off)."""
    if current is not None:
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def current_span_set(attributes: Mapping[str, Any]) -> None:
    """Add attributes to whatever span is current (the ``search_memory`` span of the pack
    being assembled, say): the one line a service adds to say more about its work. A no-op
    when export is off."""
    if _tracer is None:
        return
    trace.get_current_span().set_attributes({k: v for k, v in attributes.items() if v is not None})


def memory_search_attributes(*, session_id: Any, pack: Mapping[str, Any]) -> dict[str, Any]:
    """A context pack as a GenAI memory search: what it returned, its budget and level."""
    summary = pack.get("token_summary") or {}
    returned = sum(len(pack.get(part) or []) for part in ("facts", "working_set", "segments"))
    return {
        "gen_ai.memory.store.id": str(session_id),
        "gen_ai.memory.search.result.count": returned,
        "gen_ai.memory.budget_tokens": summary.get("budget"),
        "gen_ai.memory.used_tokens": summary.get("used"),
        "gen_ai.memory.compaction_level": summary.get("compaction_level"),
        "gen_ai.memory.format": pack.get("format"),
        "gen_ai.memory.dropped.count": len(pack.get("dropped") or []),
    }


class TracingMiddleware:
    """A server span per request (method, route, status); not in the chain when export
    is off (``MiddlewareNotUsed``)."""

    def __init__(self, get_response: GetResponse) -> None:
        if not tracing_on():
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if _tracer is None:  # turned off since the chain was built (tests)
            return self.get_response(request)
        with _tracer.start_as_current_span(
            f"{request.method} {request.path}",
            kind=SpanKind.SERVER,
            attributes={"http.request.method": request.method or "", "url.path": request.path},
        ) as current:
            response = self.get_response(request)
            match = getattr(request, "resolver_match", None)
            if match is not None and match.route:
                route = route_template(match.route)
                current.update_name(f"{request.method} {route}")
                current.set_attribute("http.route", route)
            current.set_attribute("http.response.status_code", response.status_code)
            return response
