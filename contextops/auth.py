"""Bearer-key authentication for the API."""

import hmac
from typing import cast

from django.contrib.auth.models import User
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from .errors import PermissionDenied, ReadOnlyKey, Unauthenticated
from .http import ApiRequest
from .models import KEY_PREFIX, ApiKey, Member, hash_secret
from .ratelimit import WRITE_METHODS, rate_limit_check


def api_key_resolve(raw: str) -> ApiKey:
    """The active key for ``raw``, with its agent and organization; raises Unauthenticated."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1] or not parts[2]:
        raise Unauthenticated("The API key is malformed.")
    key = ApiKey.objects.select_related("agent__organization").filter(prefix=parts[1][:16]).first()
    if key is None or not hmac.compare_digest(key.hashed_secret, hash_secret(parts[2])):
        raise Unauthenticated("The API key is not valid.")
    if key.revoked_at is not None:
        raise Unauthenticated("The API key has been revoked.")
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
    def authenticate(self, request: HttpRequest, token: str):
        key = api_key_resolve(token)
        api_key_scope_check(key, request)
        now = timezone.now()
        if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        if request.method in WRITE_METHODS:
            rate_limit_check(key_id=str(key.pk))
        authed = cast(ApiRequest, request)
        authed.api_key = key
        authed.agent = key.agent
        authed.organization = key.agent.organization
        return key
