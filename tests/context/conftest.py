"""Factories for sessions, frames and handles written straight to the models.

They keep the context tests independent of the frames services; every count a real
write would store (``estimated_tokens``) is given explicitly.
"""

import pytest

from frames.models import ContextHandle, Frame, Session


@pytest.fixture
def org(api):
    return api.organization


def session_make(organization, **fields) -> Session:
    fields.setdefault(
        "identity",
        {"user_name": "Ada", "user_id": "u1", "authority": "employee", "department": "Ops"},
    )
    fields.setdefault("environment", {"timezone": "Europe/Paris", "location": "Paris"})
    fields.setdefault("context_window_tokens", 10_000)
    return Session.objects.create(organization=organization, **fields)


def frame_make(session, parent=None, goal="Investigate", **fields) -> Frame:
    fields.setdefault("budget_total", 100_000)
    return Frame.objects.create(
        session=session,
        organization=session.organization,
        parent=parent,
        depth=(parent.depth + 1) if parent else 0,
        goal=goal,
        **fields,
    )


@pytest.fixture
def make_session(org):
    def make(organization=None, **fields):
        return session_make(organization or org, **fields)

    return make


@pytest.fixture
def make_frame():
    return frame_make


@pytest.fixture
def make_handle():
    def make(frame, content="Some content.", tokens=None, **fields):
        fields.setdefault("kind", "document")
        fields.setdefault("priority", "medium")
        return ContextHandle.objects.create(
            frame=frame,
            session=frame.session,
            content=content,
            estimated_tokens=tokens if tokens is not None else max(1, len(content) // 4),
            **fields,
        )

    return make


@pytest.fixture
def session(make_session):
    return make_session()


@pytest.fixture
def frame(session, make_frame):
    return make_frame(session)
