"""Shared pieces of the dashboard: the organization guard, fragment choice, navigation."""

from collections.abc import Callable
from functools import wraps
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from .http import MemberRequest
from .models import AuditEntry
from .version import __version__

AUDIT_ENTRIES_PER_PAGE = 100


def organization_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Login required, and the user must belong to an organization (``request.organization``)."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        member = getattr(request.user, "member", None)
        if member is None:
            raise PermissionDenied("This account does not belong to an organization.")
        cast(MemberRequest, request).organization = member.organization
        return view(request, *args, **kwargs)

    return wrapper


def render_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only ``partial`` when htmx asked for a fragment.

    Either answer says ``Vary: HX-Request``: one URL answers a page or a fragment by that
    header, so a browser's or a proxy's cache must not give one for the other (the back
    button showing a bare fragment)."""
    htmx = getattr(request, "htmx", None)
    if partial and htmx and not htmx.boosted:
        response = render(request, f"{template}#{partial}", context, status=status)
    else:
        response = render(request, template, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def navigation(request: HttpRequest) -> dict[str, str]:
    return {"nav_section": getattr(request, "nav_section", ""), "contextops_version": __version__}


def audit_detail_text(value: Any) -> str:
    """A value of an entry's ``detail`` as a person reads it: a mapping as "name value"
    pairs and a list as its items, separated by commas (nested ones in parentheses),
    never Python's repr: ``{"frames.Event": 1}`` reads "frames.Event 1"."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_audit_nested(v)}".rstrip() for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_audit_nested(v) for v in value)
    return "" if value is None else str(value)


def _audit_nested(value: Any) -> str:
    text = audit_detail_text(value)
    return f"({text})" if isinstance(value, dict | list | tuple) and text else text


def audit_details(detail: Any) -> list[tuple[str, str]]:
    """An entry's particulars as (name, text) lines; empty ones are left out."""
    if not isinstance(detail, dict):
        text = audit_detail_text(detail)
        return [("detail", text)] if text else []
    lines = [(str(k), audit_detail_text(v)) for k, v in detail.items()]
    return [(k, text) for k, text in lines if text]


@require_GET
@organization_required
def audit_log(request: MemberRequest) -> HttpResponse:
    """The organization's audit log, newest first: for its admins, to read only."""
    if not request.user.is_staff:
        raise PermissionDenied("Only an administrator of the organization reads the audit log.")
    request.nav_section = "audit"
    action = request.GET.get("action", "")
    if action not in AuditEntry.Action.values:
        action = ""
    entries = AuditEntry.objects.filter(organization=request.organization)
    if action:
        entries = entries.filter(action=action)
    page = Paginator(entries, AUDIT_ENTRIES_PER_PAGE).get_page(request.GET.get("page"))
    rows = [(entry, audit_details(entry.detail)) for entry in page.object_list]
    return render(
        request,
        "audit/audit_log.html",
        {"page": page, "rows": rows, "action": action, "actions": AuditEntry.Action.choices},
    )


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for on pages that name no icon (Django's admin):
    the dashboard's own icon, instead of a 404 in the console. A temporary redirect: in
    production the icon's name carries a hash of its content, which the next release
    that changes the icon replaces, and a browser keeps a permanent redirect for good."""
    return redirect(static("favicon.svg"))
