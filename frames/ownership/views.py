"""The session page's Export and Delete: a download of the session's document, and the
deletion (an organization's admins only), both audited."""

import json

from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from contextops.dashboard import organization_required
from contextops.errors import NotFound
from contextops.http import MemberRequest
from frames import selectors

from . import services


def _session(request: MemberRequest, session_id):
    try:
        return selectors.session_get(organization=request.organization, session_id=session_id)
    except NotFound as error:
        raise Http404(str(error)) from None


@require_GET
@organization_required
def session_export(request: MemberRequest, session_id) -> HttpResponse:
    session = _session(request, session_id)
    document = services.session_export(
        session=session, actor=request.user.get_username(), user=request.user
    )
    response = HttpResponse(
        json.dumps(document, cls=DjangoJSONEncoder, indent=1),
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="session-{session.pk}.json"'
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@organization_required
def session_delete(request: MemberRequest, session_id) -> HttpResponse:
    session = _session(request, session_id)
    if not request.user.is_staff:
        raise PermissionDenied("Only an administrator of the organization deletes a session.")
    # The answer needs nothing read or written after the commit (no flash message in the
    # session either): the list it sends the person to says what went, read from the
    # audit entry the deletion wrote (``?deleted=<id>``).
    services.session_delete(session=session, actor=request.user.get_username(), user=request.user)
    listed = f"{reverse('frames:session_list')}?deleted={session.pk}"
    if request.htmx:  # htmx follows HX-Redirect to the list; a plain form the redirect
        response = HttpResponse("")
        response["HX-Redirect"] = listed
        return response
    return redirect(listed)
