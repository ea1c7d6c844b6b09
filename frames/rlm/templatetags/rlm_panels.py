"""The RLM panels other pages show (a session's states, a frame's states).

A template tag, so the session and frame pages of frames core include them by name at
render time without importing the RLM package that sits above frames."""

from django import template
from django.db.models import Q

from frames.models import Frame, Session

from ..selectors import state_list

register = template.Library()

STATES_SHOWN = 20


@register.inclusion_tag("rlm/partials/_session_states.html")
def rlm_session_states(session: Session) -> dict:
    """The session's newest RLM states."""
    states = state_list(organization=session.organization_id, session_id=str(session.pk))
    return {"rlm_states": list(states[:STATES_SHOWN])}


@register.inclusion_tag("frames/partials/_frame_rlm_states.html")
def rlm_frame_states(frame: Frame) -> dict:
    """States attached to the frame, and those of the task tree rooted at it."""
    states = state_list(organization=frame.organization_id).filter(
        Q(frame=frame) | Q(root_frame=frame)
    )
    return {"rlm_states": list(states[:STATES_SHOWN]), "frame": frame}
