"""The two kinds of request the product serves, typed for what authentication adds.

``ApiRequest``: an API call whose bearer key ``ApiKeyAuth`` resolved (``api_key``,
``agent``, ``organization``). ``MemberRequest``: a dashboard request that passed
``organization_required`` (a signed-in member: ``user``, ``organization``, and ``htmx``
from django-htmx's middleware). Handlers and views annotate ``request`` with one of them.
"""

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

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
