"""Suspending a frame, learning the decision (long poll), resuming with the token."""

from collections.abc import Callable
from typing import Any

from django.urls import reverse
from ninja import Query, Router
from ninja.responses import Status

from contextops.actors import request_actor
from contextops.auth import api_key_person
from contextops.http import ApiRequest
from contextops.waits import wait_slots
from frames.models import Suspension
from frames.schemas import FrameOut, frame_out
from frames.selectors import frame_get

from . import selectors, services
from .schemas import (
    SuspendIn,
    SuspensionDecisionIn,
    SuspensionOut,
    SuspensionWaitQuery,
    suspension_out,
)

router = Router(tags=["suspensions"])
# What deciding needs, from the inbox or from a terminal (a person's own key).
APPROVE_PERMISSION = "frames.approve_suspension"


def _approve_url(request: ApiRequest, suspension: Suspension) -> str:
    return (
        request.build_absolute_uri(reverse("suspensions:inbox")) + f"#frame-{suspension.frame_id}"
    )


def _decide(
    request: ApiRequest,
    token: str,
    payload: SuspensionDecisionIn,
    decide: Callable[..., Suspension],
) -> dict[str, Any]:
    """Approve or reject (``decide``) as the person whose own key this is, with the
    approver's right."""
    suspension = selectors.suspension_get(organization=request.organization, token=token)
    user = api_key_person(request.api_key, permission=APPROVE_PERMISSION)
    decided = decide(suspension=suspension, user=user, note=payload.note)
    return suspension_out(decided, approve_url=_approve_url(request, decided))


@router.post(
    "/frames/{frame_id}/suspend",
    response={201: SuspensionOut},
    summary="Suspend a frame; returns its token",
)
def frame_suspend(request: ApiRequest, frame_id: str, payload: SuspendIn):
    frame = frame_get(organization=request.organization, frame_id=frame_id)
    suspension = services.suspension_create(
        frame=frame,
        reason=payload.reason,
        requires_approval=payload.requires_approval,
        expires_in_seconds=payload.expires_in_seconds,
        actor=request_actor(request),
    )
    return Status(201, suspension_out(suspension, approve_url=_approve_url(request, suspension)))


@router.get(
    "/suspensions/{token}",
    response=SuspensionOut,
    summary="A suspension's status; with ?wait=N (≤ 30 s) waits while it is pending",
)
def suspension_get(request: ApiRequest, token: str, filters: Query[SuspensionWaitQuery]):
    if filters.wait > 0:  # holds a thread: one of the slots waits may take (contextops.waits)
        with wait_slots.hold(str(request.api_key.pk)):
            suspension = selectors.suspension_wait(
                organization=request.organization, token=token, wait_seconds=filters.wait
            )
    else:
        suspension = selectors.suspension_get(organization=request.organization, token=token)
    if services.suspension_expire_if_overdue(suspension):  # a read applies an expiry at once
        suspension = selectors.suspension_get(organization=request.organization, token=token)
    return suspension_out(suspension, approve_url=_approve_url(request, suspension))


@router.post(
    "/suspensions/{token}/resume",
    response=FrameOut,
    summary="Resume the suspended frame (single use)",
)
def suspension_resume(request: ApiRequest, token: str):
    suspension = selectors.suspension_get(organization=request.organization, token=token)
    return frame_out(
        services.suspension_resume(suspension=suspension, actor=request_actor(request))
    )


@router.post(
    "/suspensions/{token}/approve",
    response=SuspensionOut,
    summary="Approve a pending suspension (a person's own key, with the approver's right)",
)
def suspension_approve(request: ApiRequest, token: str, payload: SuspensionDecisionIn):
    return _decide(request, token, payload, services.suspension_approve)


@router.post(
    "/suspensions/{token}/reject",
    response=SuspensionOut,
    summary="Reject a pending suspension with a note: the frame fails (a person's own key)",
)
def suspension_reject(request: ApiRequest, token: str, payload: SuspensionDecisionIn):
    return _decide(request, token, payload, services.suspension_reject)
