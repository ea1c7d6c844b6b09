"""The two kinds of request the product serves, typed for what authentication adds, and
the API's answer written without validation (``prebuilt_json_response``).

``ApiRequest``: an API call whose bearer key ``ApiKeyAuth`` resolved (``api_key``,
``agent``, ``organization``). ``MemberRequest``: a dashboard request that passed
``organization_required`` (a signed-in member: ``user``, ``organization``, and ``htmx``
from django-htmx's middleware). Handlers and views annotate ``request`` with one of them.
"""

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import orjson
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django_htmx.middleware import HtmxDetails
from ninja.renderers import JSONRenderer

from .models import Agent, ApiKey, Organization

# What a middleware is given to call the rest of the chain with.
GetResponse = Callable[[HttpRequest], HttpResponseBase]


class ApiRequest(HttpRequest):
    api_key: ApiKey
    agent: Agent
    organization: Organization


class MemberRequest(HttpRequest):
    user: User  # organization_required admits signed-in users only
    organization: Organization
    htmx: HtmxDetails
    nav_section: str


_RENDERER = JSONRenderer()  # the API's renderer (contextops.api sets none of its own)
_ENCODER = _RENDERER.encoder_class()
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS


def prebuilt_json_response(request: HttpRequest, body: Any) -> HttpResponse:
    """A 200 answer of ``body``, the JSON django-ninja would send for it after validating
    it against the operation's ``response`` schema, without the validation.

    For a body built field by field, in its schema's order, from values that have the
    schema's types already: a large answer (a lineage, a context pack) holds thousands of
    nested items that validation and ``model_dump`` would walk again for nothing. The
    operation keeps declaring its schema, so the OpenAPI document is unchanged.

    Encoded by orjson (a pack's 200 KB in a tenth of the time), compact and in UTF-8;
    what it does not encode as the API's renderer would (times, which the renderer
    writes to the millisecond) goes through the renderer's encoder, and a body orjson
    refuses (an integer beyond 64 bits in a fact's value) is rendered by the renderer."""
    try:
        content = orjson.dumps(body, default=_ENCODER.default, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        content = _RENDERER.render(request, body, response_status=200).encode()
    return HttpResponse(
        content, content_type=f"{_RENDERER.media_type}; charset={_RENDERER.charset}"
    )


_CONVERTER = re.compile(r"(?<!\?P)<(?:\w+:)?(\w+)>")


@lru_cache(maxsize=1024)
def route_template(route: str) -> str:
    """``api/v1/sessions/<session_id>`` -> ``/api/v1/sessions/{session_id}``: the path as
    the API reference writes it (a metric's label, a span's ``http.route``)."""
    return "/" + _CONVERTER.sub(r"{\1}", route)


def api_error(status: int, code: str, detail: str, **extra: Any) -> JsonResponse:
    """An error answer in the API's documented format, ``{"error", "detail", ...}``, from
    outside a django-ninja operation (a middleware, a plain view)."""
    return JsonResponse({"error": code, "detail": detail, **extra}, status=status)


def content_length_refused(request: HttpRequest, limit: int) -> JsonResponse | None:
    """The answer to a request whose Content-Length is not a number (400) or is over
    ``limit`` bytes (413, before any of the body is read); None for one within it."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return api_error(400, "bad_request", "Content-Length is not a number.")
    if length > limit:
        return api_error(
            413, "too_large", f"The body is {length} bytes; the limit is {limit}.", limit=limit
        )
    return None
