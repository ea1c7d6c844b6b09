"""Sessions and frames through the frames services, as an agent would get them."""

import pytest

from frames.services.sessions import session_create
from frames.services.stack import frame_push


@pytest.fixture
def make_session(api):
    def make(organization=None, frame: bool = True, **fields):
        fields.setdefault("identity", {"user_name": "Ada", "user_id": "u1"})
        fields.setdefault("context_window_tokens", 200_000)
        session = session_create(organization=organization or api.organization, **fields)
        if frame:
            frame_push(session=session, goal="Work on the repository", budget_total=10_000_000)
        return session

    return make


@pytest.fixture
def session(make_session):
    return make_session()


def user(text):
    return {"role": "user", "content": text}


def assistant(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def text(value):
    return {"type": "text", "text": value}


def tool_use(id, name, **input):
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def tool_result(id, output, is_error=False):
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output, "is_error": is_error}
        ],
    }


@pytest.fixture(autouse=True)
def offline_summaries(settings):
    """No test reaches the real Anthropic API, whatever the environment says."""
    settings.ANTHROPIC_API_KEY = ""
    settings.CONTEXTOPS_SUMMARIZER = "extractive"
    settings.ANTHROPIC_BASE_URL = None
