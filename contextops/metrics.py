"""``GET /metrics``: what the web processes answered and what waits in the database, in
Prometheus's text format (prometheus_client), for an operator's scraper.

Off unless ``CONTEXTOPS_METRICS_TOKEN`` is set: then it answers a request that carries
``Authorization: Bearer <token>`` and 401 any other; without the setting it is 404, and
``MetricsMiddleware`` leaves the middleware chain, so no request counts or pays. Like
the probes (contextops.middleware.ProbeMiddleware) it is answered before anything reads
the request's host, so a scraper may address an instance by its own address, and it
touches no session, cookie or row: the figures are read, never written.

Two kinds of figures:

* per request, counted by ``MetricsMiddleware`` in the process that answered: requests
  by method, route and status, and their durations by method and route. The route is the
  URL pattern that matched (``/api/v1/sessions/{session_id}``), never the address asked
  for, so the number of series stays bounded; anything no pattern matched is
  ``unmatched``. With gunicorn's several worker processes each one writes its figures to
  files in ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode) and a
  scrape, whichever worker answers it, adds up every process's files. The Celery
  workers count their jobs the same way (``contextops_jobs_total``, contextops/celery.py):
  when they run on a web host with the same directory, a scrape adds theirs too. Without
  that directory (tests, a single process) the figures live in the process's memory.
* read from the database at each scrape by ``DatabaseCollector``: jobs waiting, running
  or failed, frames suspended and awaiting a person's approval, sessions by lifecycle
  state; five aggregate statements whatever the size of the tables.
"""

import hmac
import logging
import time
from collections.abc import Iterable, Iterator, Mapping

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.db import DatabaseError
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from prometheus_client import REGISTRY, Counter, Histogram, disable_created_metrics
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from frames.conversation.models import CompactionRun, Import
from frames.models import ContextHandle, Session, Suspension

from .http import GetResponse, route_template
from .middleware import probes

logger = logging.getLogger(__name__)

PATH = "/metrics"
UNMATCHED = "unmatched"
PROBE_PATHS = frozenset(probes())  # answered by ProbeMiddleware, before any URL resolving
# Any other method (a client may send anything) is counted as "other": bounded labels.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Agents' long polls wait up to 30 s for a person (GET /suspensions/{token}?wait=30).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# No ``_created`` series: multiprocess mode has none, so a scrape reads alike either way.
disable_created_metrics()

HTTP_REQUESTS = Counter(
    "contextops_http_requests",
    "Requests answered, by method, route (the URL pattern that matched) and status.",
    ["method", "route", "status"],
)
HTTP_DURATION = Histogram(
    "contextops_http_request_duration_seconds",
    "Seconds from the request reaching the application to its answer leaving it.",
    ["method", "route"],
    buckets=DURATION_BUCKETS,
)


def route_of(request: HttpRequest) -> str:
    """The label of what answered ``request``: its URL pattern, a probe, or ``unmatched``."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.route:
        return route_template(match.route)
    if request.path_info in PROBE_PATHS:
        return request.path_info
    return UNMATCHED


class MetricsMiddleware:
    """Answers ``GET /metrics`` and counts every other request; early in MIDDLEWARE so the
    answers of the middleware after it (probes, refusals) are counted too. A few dict
    lookups and two writes to memory (or a mapped file) per request; no database."""

    def __init__(self, get_response: GetResponse) -> None:
        if not settings.CONTEXTOPS_METRICS_TOKEN:
            # Off: the middleware leaves the chain, so a request pays nothing for it.
            raise MiddlewareNotUsed("CONTEXTOPS_METRICS_TOKEN is not set")
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info == PATH:
            if request.method in ("GET", "HEAD"):
                return metrics(request)
            return self.get_response(request)  # not counted either
        started = time.perf_counter()
        response = self.get_response(request)
        try:
            method = request.method if request.method in METHODS else "other"
            route = route_of(request)
            HTTP_REQUESTS.labels(method, route, str(response.status_code)).inc()
            HTTP_DURATION.labels(method, route).observe(time.perf_counter() - started)
        except Exception:  # the answer stands whatever happens to a figure
            logger.exception("metrics: could not record %s %s", request.method, request.path)
        return response


def _gauge(
    name: str, documentation: str, labels: list[str], values: Mapping[tuple[str, ...], float]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for key, value in values.items():
        family.add_metric(list(key), value)
    return family


# Finished jobs are not counted: they grow without bound, and each status below is one
# range of the status index (failures are few).
JOB_STATUSES = ("queued", "running", "failed")


class DatabaseCollector:
    """Figures read from the database at each scrape: five aggregate statements, each
    over an index (sessions excepted: one pass over its table, without their rows'
    columns), never per organization (labels stay bounded)."""

    def collect(self) -> Iterator[Metric]:
        try:
            families, up = self._read(), 1
        except DatabaseError as error:
            logger.warning("metrics: database unavailable: %s", error)
            families, up = [], 0
        yield _gauge("contextops_database_up", "1 when the scrape read the database.", [], {(): up})
        yield from families

    def _read(self) -> list[Metric]:
        jobs: dict[tuple[str, ...], int] = {}
        for kind, model in (("compaction", CompactionRun), ("import", Import)):
            jobs.update({(kind, status): 0 for status in JOB_STATUSES})
            rows = (
                model.objects.filter(status__in=JOB_STATUSES)
                .order_by()
                .values_list("status")
                .annotate(n=Count("pk"))
            )
            jobs.update({(kind, status): n for status, n in rows})
        jobs[("page_out", "queued")] = ContextHandle.objects.filter(
            page_out_requested_at__isnull=False
        ).count()
        suspensions = Suspension.objects.filter(status__in=Suspension.OPEN_STATUSES).aggregate(
            open=Count("pk"),
            awaiting=Count(
                "pk", filter=Q(status=Suspension.Status.PENDING, requires_approval=True)
            ),
        )
        sessions: dict[tuple[str, ...], int] = {(state,): 0 for state in Session.Lifecycle.values}
        sessions.update(
            {
                (state,): n
                for state, n in Session.objects.order_by()
                .values_list("lifecycle_state")
                .annotate(n=Count("pk"))
            }
        )
        return [
            _gauge(
                "contextops_jobs_in_database",
                "Jobs by kind (compaction, import, page_out) and status (queued, running, failed).",
                ["kind", "status"],
                jobs,
            ),
            _gauge(
                "contextops_frames_suspended",
                "Frames suspended: their suspension is pending or approved, not yet resumed.",
                [],
                {(): suspensions["open"]},
            ),
            _gauge(
                "contextops_frames_awaiting_approval",
                "Frames suspended until a person approves or rejects them.",
                [],
                {(): suspensions["awaiting"]},
            ),
            _gauge("contextops_sessions", "Sessions by lifecycle state.", ["state"], sessions),
        ]


class _Scrape:
    """What one scrape reads: the processes' figures, then the database's."""

    def __init__(self, *sources: Collector) -> None:
        self.sources = sources

    def collect(self) -> Iterable[Metric]:
        for source in self.sources:
            yield from source.collect()


def _processes() -> Collector:
    """The figures of every process writing to the directory (this host's web workers,
    and its Celery workers when they share it), or without one this process's own."""
    directory = settings.PROMETHEUS_MULTIPROC_DIR
    if not directory:
        return REGISTRY
    return MultiProcessCollector(None, path=directory)


def _authorized(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def metrics(request: HttpRequest) -> HttpResponse:
    """404 unless CONTEXTOPS_METRICS_TOKEN is set, 401 without that bearer token, else the
    figures; 503 (never 500) when they cannot be gathered."""
    token = settings.CONTEXTOPS_METRICS_TOKEN
    if not token:
        return HttpResponse("Not found.\n", status=404, content_type="text/plain")
    if not _authorized(request, token):
        response = HttpResponse(
            "A bearer token is required.\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    try:
        body = encoder(_Scrape(_processes(), DatabaseCollector()))
    except Exception:
        logger.exception("metrics: could not gather the figures")
        return HttpResponse(
            "The figures could not be gathered.\n", status=503, content_type="text/plain"
        )
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
