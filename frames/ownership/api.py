"""``GET /sessions/{id}/export`` and ``DELETE /sessions/{id}``: a session as one document,
and gone with everything that belongs only to it."""

from typing import Any

from ninja import Router, Schema

from contextops.actors import request_actor
from contextops.http import ApiRequest
from frames import selectors

from . import services


class SessionDeletedOut(Schema):
    session_id: str
    deleted: dict[str, int]


def _actor(request: ApiRequest) -> str:
    return f"{request_actor(request)} (key {request.api_key.prefix})"


def session_export(request: ApiRequest, session_id: str) -> dict:
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    return services.session_export(session=session, actor=_actor(request))


def session_delete(request: ApiRequest, session_id: str) -> dict:
    session = selectors.session_get(organization=request.organization, session_id=session_id)
    return services.session_delete(session=session, actor=_actor(request))


def routes_add(router: Router) -> None:
    """Add both operations to the sessions router: ``DELETE /sessions/{id}`` shares its
    path with ``GET`` and ``PATCH`` there, and one path lives in one router."""
    router.add_api_operation(
        "/sessions/{session_id}/export",
        ["GET"],
        session_export,
        response=dict[str, Any],
        summary="The whole session as one JSON document",
    )
    router.add_api_operation(
        "/sessions/{session_id}",
        ["DELETE"],
        session_delete,
        response=SessionDeletedOut,
        summary="Delete a session and everything that belongs only to it",
    )
