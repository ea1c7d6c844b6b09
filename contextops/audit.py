"""The audit log of human actions (``AuditEntry``): who, when, from where and what.

Services call ``audit_record`` inside their own transaction, so an act and its entry are
stored together or not at all. Where a request came from (the client's address, the
method and path) is known to ``AuditRequestMiddleware``, which keeps it for the request
in a context variable; outside a request (a management command) it is empty.
"""

import ipaddress
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from .http import GetResponse
from .ids import uuid_or_none
from .models import AuditEntry, Member, Organization

_where: ContextVar[tuple[str, str]] = ContextVar("contextops_audit_where", default=("", ""))


def _trusted(address: str, proxies: Iterable[Any]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(proxy, strict=False) for proxy in proxies)


def client_address(request: HttpRequest) -> str:
    """The address the request came from, which the audit log records, django-axes
    counts logins by (``AXES_CLIENT_IP_CALLABLE``) and failed API authentication is
    throttled by: the socket's peer, unless that peer is one of ``TRUSTED_PROXIES``
    (``CONTEXTOPS_TRUSTED_PROXIES``: addresses or networks). Only then is
    ``X-Forwarded-For`` read, from its end, where each trusted proxy appended its own
    peer: the first entry that is not a trusted proxy is the client. A client that
    reaches the server directly, or writes the header itself, names nothing but its
    own socket."""
    peer = str(request.META.get("REMOTE_ADDR", ""))[:64]
    proxies = settings.TRUSTED_PROXIES
    if not proxies or not _trusted(peer, proxies):
        return peer
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    client = peer
    for entry in reversed([a for a in forwarded if a]):
        try:
            ipaddress.ip_address(entry)
        except ValueError:
            return client  # not an address a proxy wrote: what came before it is forged
        client = entry
        if not _trusted(entry, proxies):
            break
    return client[:64]


def request_where(request: HttpRequest) -> tuple[str, str]:
    return client_address(request), f"{request.method} {request.path}"[:300]


def user_organization(user: Any) -> Organization | None:
    if getattr(user, "pk", None) is None:
        return None
    member = Member.objects.filter(user_id=user.pk).select_related("organization").first()
    return member.organization if member is not None else None


def audit_record(
    *,
    action: str,
    actor: str = "",
    user: User | None = None,
    organization: Organization | None = None,
    organization_id: int | None = None,
    target: str = "",
    detail: dict[str, Any] | None = None,
    request: HttpRequest | None = None,
) -> AuditEntry:
    """Append one entry. ``actor`` defaults to the user's name; the organization to the
    user's; where to the current request's (or ``request``'s when given)."""
    address, via = request_where(request) if request is not None else _where.get()
    if organization is not None:
        organization_id = organization.pk
    elif organization_id is None and user is not None:
        found = user_organization(user)
        organization_id = found.pk if found is not None else None
    return AuditEntry.objects.create(
        organization_id=organization_id,
        user=user if user is not None and user.pk else None,
        actor=(actor or (user.get_username() if user is not None else ""))[:200] or "unknown",
        action=action,
        address=address,
        via=via,
        target=target[:300],
        detail=detail or {},
    )


def audit_person_act(
    user: User | None, *, action: str, organization_id: int, target: str, detail: dict[str, Any]
) -> AuditEntry | None:
    """Record a change made in the dashboard when a person (``user``) made it; None,
    the same change made by an agent through the API, is not audited (the session's
    events name the agent). The one place that rule lives (docs/operating.md)."""
    if user is None:
        return None
    return audit_record(
        action=action, user=user, organization_id=organization_id, target=target, detail=detail
    )


class AuditRequestMiddleware:
    """Remember where the current request comes from, for the audit entries it writes."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        token = _where.set(request_where(request))
        try:
            return self.get_response(request)
        finally:
            _where.reset(token)


def session_target(session_id: Any) -> str:
    """An audit entry's target naming a session (what ``session_deleted_title`` looks for)."""
    return f"session {session_id}"


def session_deleted_title(*, organization: Organization, session_id: str) -> str:
    """The title a session of ``organization`` had when it was deleted, as the audit entry
    of its deletion recorded it (its id when it had none); "" when no such entry exists,
    so an address naming a session proves nothing by itself."""
    pk = uuid_or_none(session_id)
    if pk is None:
        return ""
    entry = (
        AuditEntry.objects.filter(
            organization=organization,
            action=AuditEntry.Action.SESSION_DELETED,
            target=session_target(pk),
        )
        .only("detail")
        .first()
    )
    return (entry.detail.get("title") or str(pk)) if entry else ""
