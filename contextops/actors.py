"""Who did something, as the event log and the audit trail name them: one rule for every
API module, view and task."""

from typing import Protocol

from django.http import HttpRequest


class _Named(Protocol):
    name: str


class _User(Protocol):
    def get_username(self) -> str: ...


def agent_actor(agent: _Named) -> str:
    """``agent:<name>``: an agent acting through its API key."""
    return f"agent:{agent.name}"


def user_actor(user: _User) -> str:
    """``user:<username>``: a person acting in the dashboard or the admin."""
    return f"user:{user.get_username()}"


def system_actor(job: str) -> str:
    """``system:<job>``: the server acting on its own (an expiry, a purge)."""
    return f"system:{job}"


def request_actor(request: HttpRequest) -> str:
    """The actor of a request: its agent for an API call, its user in the dashboard."""
    agent = getattr(request, "agent", None)
    return agent_actor(agent) if agent is not None else user_actor(request.user)


def admin_actor(user: _User) -> str:
    """``admin:<username>``: a person acting through the Django admin (a policy fact edit)."""
    return f"admin:{user.get_username()}"
