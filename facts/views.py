"""The facts dashboard: the organization's facts, and the lineage of a key."""

from datetime import UTC, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from contextops.dashboard import organization_required, render_page
from contextops.errors import DomainError, NotFound
from contextops.http import MemberRequest

from . import services
from .admin import admin_authority
from .lineage_graph import lineage_graph
from .models import Fact, FactConflict
from .selectors import lineage, lookup
from .selectors.lineage import Lineage
from .valid_timeline import picked, valid_timeline

PAGE_SIZE = 25
VALIDITY = {"valid": True, "invalid": False, "all": None}


@require_GET
@organization_required
def fact_list(request: MemberRequest) -> HttpResponse:
    request.nav_section = "facts"
    params = request.GET
    scope = params.get("scope", "")
    memory_type = params.get("memory_type", "")
    validity = params.get("validity", "valid")
    filters: dict[str, Any] = {
        "scope": scope if scope in Fact.Scope.values else "",
        "memory_type": memory_type if memory_type in Fact.MemoryType.values else "",
        "subject": params.get("subject", "").strip()[:200].replace("\x00", ""),
        "validity": validity if validity in VALIDITY else "valid",
        "needs_review": params.get("needs_review") == "1",
    }
    facts = lookup.fact_list(
        organization=request.organization,
        valid=VALIDITY[filters["validity"]],
        scope=filters["scope"],
        subject=filters["subject"],
        memory_type=filters["memory_type"],
        needs_review=True if filters["needs_review"] else None,
    )
    page = Paginator(facts, PAGE_SIZE).get_page(params.get("page"))
    query = params.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "facts": page.object_list,
        "filters": filters,
        "scopes": Fact.Scope.values,
        "memory_types": Fact.MemoryType.values,
        "query": query.urlencode(),
        "review_count": lookup.fact_review_count(organization=request.organization),
    }
    return render_page(request, "facts/fact_list.html", context, partial="fact-table")


def _lineage_context(
    request: MemberRequest, key: str, error: str = "", versions: Lineage | None = None
) -> dict[str, Any]:
    """The lineage page of ``key``: ``versions`` when a write already read it, else read now
    (the page of versions below ``?before_version=``, the newest by default)."""
    at_text = request.GET.get("at", "")[:20]
    at = picked(at_text, UTC) if at_text else None
    held: Fact | None = None
    at_notice = ""
    if at_text and at is None:
        at_notice = "Pick a date (YYYY-MM-DD)."
    elif at is not None:
        try:
            held = lookup.fact_current_get(organization=request.organization, key=key, at=at)
        except NotFound as exc:
            if "held at" not in exc.detail:
                raise Http404("No such fact.") from None
            at_notice = f"No version of this chain held on {at_text}."
    if versions is None:
        before = request.GET.get("before_version", "")
        before_version = int(before) if before.isdigit() and int(before) < 2**31 else None
        if before_version is None and held is not None:
            before_version = held.version + 1  # the chain as it stood then: up to that version
        try:
            versions = lineage.fact_lineage(
                organization=request.organization, key=key, before_version=before_version
            )
        except NotFound:
            raise Http404("No such fact.") from None
    timeline = [
        {
            "fact": fact,
            "previous": versions.chain[i - 1] if i else versions.older,
            "rule": fact.supersession_rule,
        }
        for i, fact in enumerate(versions.chain)
    ]
    # Versions of this chain flagged because a fact they depend on changed: what to check
    # and the button that says it was checked, at the top of the page.
    to_review = [
        {"fact": fact, "depends_on": versions.depends_on.get(fact.pk, [])}
        for fact in reversed(versions.chain)
        if fact.needs_review
    ]
    return {
        "key": key,
        "lineage": versions,
        "to_review": to_review,
        "timeline": list(reversed(timeline)),
        "graph": lineage_graph(versions),
        "valid": valid_timeline(versions.chain, timezone.now(), at),
        "at": at_text if at is not None else "",
        "held": held,
        "at_notice": at_notice,
        "error": error,
    }


@require_GET
@organization_required
def fact_lineage(request: MemberRequest, key: str) -> HttpResponse:
    request.nav_section = "facts"
    return render_page(
        request, "facts/lineage.html", _lineage_context(request, key), partial="lineage-body"
    )


@require_POST
@organization_required
def fact_review_clear(request: MemberRequest, key: str) -> HttpResponse:
    """A reviewer clears ``needs_review`` on ``key``; htmx gets the lineage body back, read
    by the service before its commit."""
    request.nav_section = "facts"
    back = request.POST.get("lineage") or key
    error = ""
    versions = None
    try:
        if request.htmx:
            versions = services.fact_review_clear_in_lineage(
                organization=request.organization, key=key, lineage_key=back, user=request.user
            )
        else:
            services.fact_review_clear(
                organization=request.organization, key=key, user=request.user
            )
    except NotFound:
        raise Http404("No such fact.") from None
    except DomainError as exc:
        error = exc.detail
    if request.htmx:
        return render_page(
            request,
            "facts/lineage.html",
            _lineage_context(request, back, error, versions),
            partial="lineage-body",
        )
    return redirect(reverse("facts:lineage", args=[back]))


# The review queue of proposed supersessions -------------------------------------------

# Who may settle a proposal in the dashboard: an organization's admins and its approvers.
CONFLICT_DECIDERS = ("facts.edit_policy", "frames.approve_suspension")
AGES = {"": None, "1": 1, "24": 24, "168": 168}


def _can_decide(request: MemberRequest) -> bool:
    return any(request.user.has_perm(p) for p in CONFLICT_DECIDERS)


def _queue_filters(request: MemberRequest) -> tuple[dict[str, str], dict[str, Any]]:
    """The queue's filters as the page shows them, and as ``lookup.conflict_list`` takes them."""
    params = request.GET
    filters = {
        "subject": params.get("subject", "").strip()[:200].replace("\x00", ""),
        "source": params.get("source", "").strip()[:120].replace("\x00", ""),
        "age": params.get("age", "") if params.get("age", "") in AGES else "",
    }
    hours = AGES[filters["age"]]
    query = {
        "subject": filters["subject"],
        "source": filters["source"],
        "older_than": timezone.now() - timedelta(hours=hours) if hours else None,
    }
    return filters, query


def _conflict_queue(request: MemberRequest, error: str = "", status: int = 200) -> HttpResponse:
    request.nav_section = "conflicts"
    filters, query = _queue_filters(request)
    conflicts = lookup.conflict_list(organization=request.organization, **query)
    page = Paginator(conflicts, PAGE_SIZE).get_page(request.GET.get("page"))
    decided = lookup.conflict_list(organization=request.organization, status="").exclude(
        status=FactConflict.Status.PROPOSED
    )[:10]
    context = {
        "page": page,
        "conflicts": page.object_list,
        "decided": decided,
        "filters": filters,
        "can_decide": _can_decide(request),
        "error": error,
    }
    return render_page(request, "facts/conflicts.html", context, status=status)


@require_GET
@organization_required
def conflict_queue(request: MemberRequest) -> HttpResponse:
    return _conflict_queue(request)


@require_POST
@organization_required
def conflict_decide(request: MemberRequest, conflict_id: int, decision: str) -> HttpResponse:
    """Accept, reject, or "not the same thing"; the person who decided is recorded (and
    audited), with the authority an admin writes with. A refused decision shows why."""
    if decision not in services.CONFLICT_DECISIONS:
        raise Http404("No such decision.")
    if not _can_decide(request):
        raise PermissionDenied("You may not settle proposed supersessions.")
    request.nav_section = "conflicts"
    settle: dict[str, Any] = {
        "organization": request.organization,
        "conflict_id": conflict_id,
        "decision": decision,
        "authority": admin_authority(request.user, request.organization),
        "actor": request.user.get_username(),
        "user": request.user,
    }
    try:
        if request.htmx:
            filters, query = _queue_filters(request)
            pending, decided = services.conflict_decide_in_queue(
                queue=query, limit=PAGE_SIZE, **settle
            )
            context = {
                "conflicts": pending,
                "decided": decided,
                "filters": filters,
                "can_decide": True,
            }
            return render_page(request, "facts/conflicts.html", context, partial="queue")
        services.conflict_decide(**settle)
    except NotFound:
        raise Http404("No such proposal.") from None
    except DomainError as exc:
        return _conflict_queue(request, error=exc.detail, status=exc.status)
    return redirect(reverse("facts:conflicts"))
