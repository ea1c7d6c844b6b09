"""The one NinjaAPI: routers of every app, bearer auth, query parameters each operation
declares (no others), and the error mapping.

Every error leaves here as ``{"error": code, "detail": sentence, ...}``.
"""

import functools
import json
import logging
import math
import re
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.datastructures import MultiValueDict
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.parser import Parser

from facts.api import router as facts_router
from frames.api import router as frames_router
from frames.context.api import router as context_router
from frames.conversation.api import router as conversation_router
from frames.graphs.api import router as graphs_router
from frames.ownership.api import routes_add as ownership_routes_add
from frames.rlm.api import router as rlm_router
from frames.suspensions.api import router as suspension_router

from .auth import ApiKeyAuth
from .errors import DomainError, Invalid
from .health import database_lost
from .notifications.api import router as notifications_router

logger = logging.getLogger(__name__)

MAX_JSON_DEPTH = 64


def _located(loc: list[str | int], detail: str) -> Invalid:
    # Found while reading the request itself, before any service: the HTTP location is
    # known here and is the right thing to name.
    return Invalid(detail, errors=[{"loc": loc, "msg": detail}])


def _check_text(value: object, loc: list[str | int], depth: int = 0) -> None:
    """Refuse what no database column can hold: NUL characters, lone surrogates, deep nesting."""
    if depth > MAX_JSON_DEPTH:
        raise _located(loc, f"The JSON nests deeper than {MAX_JSON_DEPTH} levels.")
    if isinstance(value, str):
        if "\x00" in value:
            raise _located(loc, "Text may not contain NUL characters.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _located(loc, "Text must be valid Unicode (no lone surrogates).") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, [*loc, key], depth + 1)
            _check_text(item, [*loc, key], depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_text(item, [*loc, index], depth + 1)


class _NotJsonNumber(ValueError):
    pass


def _refuse_constant(name: str) -> NoReturn:
    # Python's parser reads NaN and Infinity, which JSON has no room for: storing one
    # breaks the database's JSON and answering it breaks every client's parser.
    raise _NotJsonNumber(f"{name} is not a JSON number.")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotJsonNumber(f"{text} is too large for a JSON number.")
    return value


class StrictJsonParser(Parser):
    """JSON bodies: valid UTF-8, well formed, storable; anything else is a 422, never a 500."""

    def parse_body(self, request: HttpRequest) -> Any:  # any JSON value, not only an object
        raw = request.body
        if not raw:
            return {}
        try:
            data = json.loads(
                raw.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite_float
            )
        except UnicodeDecodeError:
            raise _located(["body"], "The body is not valid UTF-8.") from None
        except _NotJsonNumber as exc:
            raise _located(["body"], str(exc)) from None
        except RecursionError:
            raise _located(["body"], "The body nests too deeply to be read.") from None
        except ValueError:
            raise _located(["body"], "The body is not valid JSON.") from None
        _check_text(data, ["body"])
        return data

    def parse_querydict(
        self, data: MultiValueDict[str, str], list_fields: list[str], request: HttpRequest
    ) -> dict[str, Any]:
        result = super().parse_querydict(data, list_fields, request)
        _check_text(result, ["query"])
        return result


class ContextopsAPI(NinjaAPI):
    """The NinjaAPI whose OpenAPI schema carries links between operations."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        return openapi_links_add(super().get_openapi_schema(*args, **kwargs))


api = ContextopsAPI(
    title="contextops API",
    version="1",
    description="Working context for LLM agents: frames, budgets, facts, context packs.",
    auth=ApiKeyAuth(),
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
    parser=StrictJsonParser(),
)


# Pydantic's words for a body field its schema does not know (``extra="forbid"``): an
# unknown query parameter is answered with the same.
EXTRA_FORBIDDEN = "Extra inputs are not permitted"


def declared_query(view_func: Callable[..., Any]) -> frozenset[str]:
    """The query parameters the operation of ``view_func`` declares: the fields of its
    ``Query[...]`` schemas (by alias) and its plain arguments that are neither in the path
    nor the body, as its OpenAPI ``parameters`` list them."""
    operation = getattr(view_func, "_ninja_operation", None)
    if operation is None:  # ninja marks every function it routes with its operation
        raise TypeError(f"{view_func!r} is not a ninja operation's function")
    return frozenset(
        name
        for model in operation.models
        if model.__ninja_param_source__ == "query"
        for name in model.__ninja_flatten_map__
    )


def undeclared_query_refuse(view_func: Callable[..., Any]) -> Callable[..., Any]:
    """Refuse a query parameter the operation does not declare, as a body refuses a field
    it does not know: ``?stauts=active`` or ``?limt=5`` would otherwise be dropped and the
    request answered without it. The answer is 422 ``validation_error`` naming each such
    parameter at ``["query", name]``, after the key's checks and the declared parameters'
    validation, in place of the operation: it never runs, so nothing changes."""
    declared = declared_query(view_func)

    @functools.wraps(view_func)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        unknown = [name for name in request.GET if name not in declared]
        if unknown:
            raise NinjaValidationError(
                [
                    {"type": "extra_forbidden", "loc": ("query", name), "msg": EXTRA_FORBIDDEN}
                    for name in unknown
                ]
            )
        return view_func(request, *args, **kwargs)

    return checked


api.add_decorator(undeclared_query_refuse)  # every operation, /health included


def error_response(
    request: HttpRequest, status: int, code: str, detail: str, **extra: Any
) -> HttpResponse:
    return api.create_response(request, {"error": code, "detail": detail, **extra}, status=status)


READ_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def field_location(request: HttpRequest, field: tuple[str | int, ...]) -> tuple[str, ...]:
    """Where the request carried ``field``: a path parameter, the query string or the body."""
    if not field:
        return ()
    match = getattr(request, "resolver_match", None)
    if match is not None and field[0] in match.kwargs:
        return ("path",)
    if request.method in READ_METHODS or field[0] in request.GET:
        return ("query",)
    return ("body",)


@api.exception_handler(DomainError)
def on_domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    body = (
        exc.body_at(field_location(request, exc.field))
        if isinstance(exc, Invalid)
        else exc.as_body()
    )
    response = api.create_response(request, body, status=exc.status)
    if exc.status == 429:
        response["Retry-After"] = str(exc.extra.get("retry_after", 60))
    return response


def _loc(loc: Iterable[str | int]) -> list[str | int]:
    # ninja prefixes locations with the parameter kind and name ("body", "payload", ...);
    # keep "body"/"query"/"path" and drop the internal argument name.
    parts = list(loc)
    if (
        len(parts) >= 2
        and parts[0] in {"body", "query", "path"}
        and parts[1] in {"payload", "filters", "params"}
    ):
        parts = [parts[0], *parts[2:]]
    return parts


@api.exception_handler(NinjaValidationError)
def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    errors: list[dict[str, Any]] = [
        {"loc": _loc(e.get("loc", [])), "msg": e.get("msg", "invalid")} for e in exc.errors
    ]
    loc: list[str | int] = errors[0]["loc"] if errors else []
    msg = str(errors[0]["msg"]) if errors else "invalid"
    where = ".".join(str(p) for p in loc[1:] or loc)
    detail = f"{where}: {msg}" if where else msg
    return error_response(request, 422, "validation_error", detail, errors=errors)


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(
        request,
        401,
        "unauthenticated",
        "A valid API key is required (Authorization: Bearer <key>).",
    )


@api.exception_handler(Http404)
def on_not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(request, 404, "not_found", "Not found.")


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, DomainError):  # raised by StrictJsonParser, wrapped by ninja
        return on_domain_error(request, exc.__cause__)
    if exc.status_code == 400:
        return error_response(request, 400, "bad_request", str(exc))
    return error_response(request, exc.status_code, "error", str(exc))


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
@api.exception_handler(DatabaseError)
def on_database_unavailable(
    request: HttpRequest, exc: DatabaseError | InterfaceError
) -> HttpResponse:
    # The database went away (a restart, a failover, a dropped connection): the request
    # did not happen, and the next one reconnects (CONN_HEALTH_CHECKS). Any other
    # database error on a live connection is ours (contextops.health.database_lost).
    if not database_lost(exc):
        return on_unexpected(request, exc)
    logger.warning("database unavailable on %s %s: %s", request.method, request.path, exc)
    response = error_response(
        request,
        503,
        "unavailable",
        "The database is unavailable; nothing was changed. Retry shortly.",
    )
    response["Retry-After"] = "2"
    return response


@api.exception_handler(OverflowError)
@api.exception_handler(DataError)
def on_data_error(request: HttpRequest, exc: OverflowError | DataError) -> HttpResponse:
    # A value the schema let through but the column (or SQLite's driver, which raises
    # OverflowError) cannot hold: a number out of range.
    return error_response(
        request,
        422,
        "validation_error",
        "A value is out of range for storage.",
        errors=[{"loc": ["body"], "msg": str(exc)[:200]}],
    )


@api.exception_handler(Exception)
def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("Unhandled error on %s %s", request.method, request.path)
    return error_response(
        request, 500, "internal_error", "Something went wrong on our side; it has been logged."
    )


@api.get("/health", auth=None, tags=["meta"], summary="Liveness: the API answers")
def health(request: HttpRequest) -> dict[str, str]:
    return {"status": "ok"}


ownership_routes_add(frames_router)  # export and delete share the sessions' paths
api.add_router("", frames_router)
api.add_router("", suspension_router)
api.add_router("", context_router)
api.add_router("", facts_router)
api.add_router("", conversation_router)
api.add_router("/rlm", rlm_router)
api.add_router("/langgraph", graphs_router)
api.add_router("", notifications_router)
__all__ = ["api"]


# OpenAPI links: where a success answer names an object that later calls take in their
# path, so clients and stateful fuzzers can chain operations (create a session, push a
# frame into it, pop that frame). Producer (method, path) -> {path parameter: where its
# value is}: a pointer into the answer's body, or ``$request.path.NAME`` for an object the
# producer's own path names (it is then linked only to the operations on that same path).
# Parameters the producer does not name come from its own path: a checkpoint made in a
# state links to that state's checkpoint, not to another state's.
LINK_PRODUCERS: dict[tuple[str, str], dict[str, str]] = {
    ("post", "/api/v1/sessions"): {"session_id": "id", "seq": "last_event_seq"},
    ("post", "/api/v1/sessions/{session_id}/frames"): {"frame_id": "id"},
    ("post", "/api/v1/frames/{frame_id}/handles"): {"handle_id": "id"},
    ("post", "/api/v1/frames/{frame_id}/suspend"): {"token": "token"},
    ("post", "/api/v1/sessions/{session_id}/context-pack"): {"a": "id", "b": "id", "pack_id": "id"},
    ("get", "/api/v1/sessions/{session_id}/calls"): {"call_id": "items/0/id"},
    ("put", "/api/v1/sessions/{session_id}/working-set/{key}"): {"key": "$request.path.key"},
    ("post", "/api/v1/sessions/{session_id}/compactions"): {"compaction_id": "id"},
    ("post", "/api/v1/imports"): {"import_id": "id"},
    ("post", "/api/v1/facts"): {"key": "key", "conflict_id": "proposed_conflicts/0/id"},
    ("get", "/api/v1/fact-conflicts"): {"conflict_id": "items/0/id"},
    ("post", "/api/v1/rlm/states"): {
        "state_id": "state_id",
        "checkpoint_id": "checkpoints/0/checkpoint_id",
    },
    ("post", "/api/v1/rlm/states/import"): {"state_id": "state_id"},
    ("put", "/api/v1/rlm/states/{state_id}/variables/{name}"): {"name": "$request.path.name"},
    ("post", "/api/v1/rlm/states/{state_id}/checkpoints"): {"checkpoint_id": "checkpoint_id"},
    ("post", "/api/v1/langgraph/checkpoints"): {"thread_id": "thread_id"},
    ("post", "/api/v1/langgraph/threads/{thread_id}/copy"): {"thread_id": "thread_id"},
    ("post", "/api/v1/notifications/destinations"): {"destination_id": "id"},
}

# Links that fill a request body: a checkpoint is what a rollback of its state takes.
LINK_BODIES: dict[tuple[str, str], dict[tuple[str, str], dict[str, str]]] = {
    ("post", "/api/v1/rlm/states"): {
        ("post", "/api/v1/rlm/states/{state_id}/rollback"): {
            "checkpoint_id": "checkpoints/0/checkpoint_id"
        },
    },
    ("post", "/api/v1/rlm/states/{state_id}/checkpoints"): {
        ("post", "/api/v1/rlm/states/{state_id}/rollback"): {"checkpoint_id": "checkpoint_id"},
    },
}


def _path_params(path: str) -> set[str]:
    return set(re.findall(r"\{(\w+)\}", path))


def _expression(where: str) -> str:
    return where if where.startswith("$") else f"$response.body#/{where}"


def _link(
    producer: tuple[str, str], named: dict[str, str], target: tuple[str, str], body: bool
) -> dict[str, str] | None:
    """The parameters of a link from ``producer`` to ``target``, or None where none fits:
    the target takes none of the objects the producer names (in its path, or in its
    ``body``), or takes a parameter that neither the answer nor the producer's own path
    can fill."""
    own = _path_params(producer[1])
    wanted = _path_params(target[1])
    from_path = {name for name, where in named.items() if where.startswith("$request.path.")}
    if not (body or wanted & set(named)) or not wanted <= own | set(named):
        return None
    if wanted & from_path and target[1] != producer[1]:
        return None
    return {
        name: _expression(named[name]) if name in named else f"$request.path.{name}"
        for name in sorted(wanted)
    }


def openapi_links_add(schema: dict[str, Any]) -> dict[str, Any]:
    """Add links from each producer's success answers to every operation it feeds."""
    paths = schema.get("paths", {})
    operations = {
        (method, path): op
        for path, item in paths.items()
        for method, op in item.items()
        if isinstance(op, dict) and "operationId" in op
    }
    for producer, named in LINK_PRODUCERS.items():
        source = operations.get(producer)
        if source is None:
            continue
        bodies = LINK_BODIES.get(producer, {})
        links = {}
        for target, op in operations.items():
            parameters = _link(producer, named, target, target in bodies)
            if parameters is None:
                continue
            link: dict[str, Any] = {"operationId": op["operationId"], "parameters": parameters}
            if target in bodies:
                link["requestBody"] = {k: _expression(v) for k, v in bodies[target].items()}
            links[op["operationId"]] = link
        for status, response in source.get("responses", {}).items():
            if links and str(status).startswith("2"):
                response["links"] = links
    return schema
