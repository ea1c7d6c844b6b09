"""The facts dashboard: the organization's facts, and the lineage of a key."""

from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from contextops.dashboard import organization_required, render_page
from contextops.errors import DomainError, NotFound

from . import selectors, services
from .lineage_graph import lineage_graph
from .models import Fact

PAGE_SIZE = 25
VALIDITY = {"valid": True, "invalid": False, "all": None}


@require_GET
@organization_required
def fact_list(request: HttpRequest) -> HttpResponse:
    request.nav_section = "facts"
    params = request.GET
    filters = {
        "scope": params.get("scope", "") if params.get("scope", "") in Fact.Scope.values else "",
        "memory_type": params.get("memory_type", "")
        if params.get("memory_type", "") in Fact.MemoryType.values
        else "",
        "subject": params.get("subject", "").strip()[:200].replace("\x00", ""),
        "validity": params.get("validity", "valid")
        if params.get("validity") in VALIDITY
        else "valid",
        "needs_review": params.get("needs_review") == "1",
    }
    facts = selectors.fact_list(
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
        "review_count": Fact.objects.filter(
            organization=request.organization, needs_review=True
        ).count(),
    }
    return render_page(request, "facts/fact_list.html", context, partial="fact-table")


def _lineage_context(request: HttpRequest, key: str, error: str = "") -> dict:
    try:
        lineage = selectors.fact_lineage(organization=request.organization, key=key)
    except NotFound:
        raise Http404("No such fact.") from None
    timeline = [
        {
            "fact": fact,
            "previous": lineage.chain[i - 1] if i else None,
            "rule": fact.supersession_rule,
        }
        for i, fact in enumerate(lineage.chain)
    ]
    return {
        "key": key,
        "lineage": lineage,
        "timeline": list(reversed(timeline)),
        "graph": lineage_graph(lineage),
        "error": error,
    }


@require_GET
@organization_required
def fact_lineage(request: HttpRequest, key: str) -> HttpResponse:
    request.nav_section = "facts"
    return render_page(
        request, "facts/lineage.html", _lineage_context(request, key), partial="lineage-body"
    )


@require_POST
@organization_required
@transaction.atomic  # the answer (a fragment) is rendered before the commit
def fact_review_clear(request: HttpRequest, key: str) -> HttpResponse:
    """A reviewer clears ``needs_review`` on ``key``; htmx gets the lineage body back."""
    request.nav_section = "facts"
    back = request.POST.get("lineage") or key
    error = ""
    try:
        services.fact_review_clear(organization=request.organization, key=key)
    except NotFound:
        raise Http404("No such fact.") from None
    except DomainError as exc:
        error = exc.detail
    if request.htmx:
        return render_page(
            request,
            "facts/lineage.html",
            _lineage_context(request, back, error),
            partial="lineage-body",
        )
    return redirect(reverse("facts:lineage", args=[back]))
