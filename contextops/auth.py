"""Bearer-key authentication for the API."""

import hmac
from functools import lru_cache
from typing import cast

from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from .audit import client_address
from .errors import PermissionDenied, ReadOnlyKey, Unauthenticated
from .http import ApiRequest
from .models import KEY_PREFIX, Agent, ApiKey, Member, Organization, hash_secret
from .ratelimit import WRITE_METHODS, auth_failure_count, auth_failures_check, rate_limit_check
from .rows import columns, from_rows


def api_key_resolve(raw: str) -> ApiKey:
    """The active key for ``raw``, with its agent and organization; raises Unauthenticated."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1] or not parts[2]:
        raise Unauthenticated("The API key is malformed.")
    key = _key_read(parts[1][:16])
    if key is None or not hmac.compare_digest(key.hashed_secret, hash_secret(parts[2])):
        raise Unauthenticated("The API key is not valid.")
    if key.revoked_at is not None:
        raise Unauthenticated("The API key has been revoked.")
    return key


def api_key_of(request: HttpRequest, raw: str) -> ApiKey:
    """``api_key_resolve`` once per request: the idempotency middleware reads the key of a
    write before the API's own authentication does, and both get the same key."""
    resolved: tuple[str, ApiKey] | None = getattr(request, "_api_key_resolved", None)
    if resolved is not None and resolved[0] == raw:
        return resolved[1]
    key = api_key_resolve(raw)
    request._api_key_resolved = (raw, key)  # type: ignore[attr-defined]
    return key


@lru_cache(maxsize=1)
def _key_read_sql() -> str:
    """Every API request reads its key: the statement is written once per process, as
    compiling the ORM's three-table query took longer than the database took to answer."""
    qn = connection.ops.quote_name
    key, agent, org = (qn(model._meta.db_table) for model in (ApiKey, Agent, Organization))
    return (
        f"SELECT {columns(ApiKey, 'k')}, {columns(Agent, 'a')}, {columns(Organization, 'o')}"
        f" FROM {key} k INNER JOIN {agent} a ON a.{qn('id')} = k.{qn('agent_id')}"
        f" INNER JOIN {org} o ON o.{qn('id')} = a.{qn('organization_id')}"
        f" WHERE k.{qn('prefix')} = %s"
    )


def _key_read(prefix: str) -> ApiKey | None:
    """The key with ``prefix``, its agent and organization attached, from one statement."""
    with connection.cursor() as cursor:
        cursor.execute(_key_read_sql(), [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    key, agent, organization = from_rows(row, ApiKey, Agent, Organization)
    agent.organization = organization
    key.agent = agent
    return key


def api_key_person(key: ApiKey, *, permission: str) -> User:
    """The dashboard user a personal key acts for, when that user is active, still a
    member of the key's organization and holds ``permission`` (``app.codename``).

    Raises PermissionDenied otherwise: an agent's key (no user) never acts for a person.
    """
    if key.user_id is None:
        raise PermissionDenied(
            "This is an agent's key; a person decides with their own key "
            "(manage.py create_api_key --user USERNAME)."
        )
    user = key.user
    member = Member.objects.filter(user=user, organization_id=key.agent.organization_id)
    if user is None or not member.exists() or not user.has_perm(permission):
        raise PermissionDenied(f"{user}'s key may not do this: it needs {permission}.")
    return user


# POST operations that change nothing: a read-only key may call them (the URL names of
# their routes). Every other POST, PUT, PATCH and DELETE is a write.
READS_BY_POST = frozenset({"constraints_check"})


def is_write(request: HttpRequest) -> bool:
    """Whether ``request`` asks the API to change something."""
    if request.method not in WRITE_METHODS:
        return False
    match = getattr(request, "resolver_match", None)
    return match is None or match.url_name not in READS_BY_POST


def api_key_scope_check(key: ApiKey, request: HttpRequest) -> None:
    """Raise ReadOnlyKey (403 ``read_only_key``) when a read-only key asks for a write."""
    if key.read_only and is_write(request):
        raise ReadOnlyKey(
            f"Key {key.prefix} is read-only: it may read but not {request.method} here. "
            "Use a key issued without --read-only to change anything."
        )


class ApiKeyAuth(HttpBearer):
    def __call__(self, request: HttpRequest) -> ApiKey | None:
        """``Authorization: Bearer <key>``; any other scheme is no credential (401). Unlike
        django-ninja's, this never logs the header: under another scheme it is still a key."""
        scheme, _, token = request.headers.get(self.header, "").partition(" ")
        if scheme.lower() != self.openapi_scheme or not token:
            return None
        return self.authenticate(request, token)

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey:
        address = client_address(request)
        auth_failures_check(address=address)
        try:
            key = api_key_of(request, token)
        except Unauthenticated:
            auth_failure_count(address=address)
            raise
        api_key_scope_check(key, request)
        now = timezone.now()
        if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        rate_limit_check(key_id=str(key.pk), write=request.method in WRITE_METHODS)
        authed = cast(ApiRequest, request)
        authed.api_key = key
        authed.agent = key.agent
        authed.organization = key.agent.organization
        return key
