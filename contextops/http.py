"""The two kinds of request the product serves, typed for what authentication adds, and
the API's answer written without validation (``prebuilt_json_response``).

``ApiRequest``: an API call whose bearer key ``ApiKeyAuth`` resolved (``api_key``,
``agent``, ``organization``). ``MemberRequest``: a dashboard request that passed
``organization_required`` (a signed-in member: ``user``, ``organization``, and ``htmx``
from django-htmx's middleware). Handlers and views annotate ``request`` with one of them.
"""

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django_htmx.middleware import HtmxDetails
from ninja.renderers import JSONRenderer

from .models import Agent, ApiKey, Organization


class ApiRequest(HttpRequest):
    api_key: ApiKey
    agent: Agent
    organization: Organization


class MemberRequest(HttpRequest):
    user: User  # type: ignore[assignment]  # organization_required admits signed-in users only
    organization: Organization
    htmx: HtmxDetails
    nav_section: str


_RENDERER = JSONRenderer()  # the API's renderer (contextops.api sets none of its own)


def prebuilt_json_response(request: HttpRequest, body: Any) -> HttpResponse:
    """A 200 answer of ``body`` in the bytes django-ninja would send for it after
    validating it against the operation's ``response`` schema, without the validation.

    For a body built field by field, in its schema's order, from values that have the
    schema's types already: a large answer (a lineage, a context pack) holds thousands of
    nested items that validation and ``model_dump`` would walk again for nothing. The
    operation keeps declaring its schema, so the OpenAPI document is unchanged."""
    return HttpResponse(
        _RENDERER.render(request, body, response_status=200),
        content_type=f"{_RENDERER.media_type}; charset={_RENDERER.charset}",
    )
