"""Bearer-key authentication for the API."""

import hmac
from typing import cast

from django.contrib.auth.models import User
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from .errors import PermissionDenied, Unauthenticated
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


class ApiKeyAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        key = api_key_resolve(token)
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
