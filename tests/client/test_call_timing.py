"""The SDK wrappers record when each call left and how long its answer took; the calls
trace (GET /sessions/{id}/calls) shows them. Real SDKs against the fake providers, the
real server behind the live server fixture."""

from datetime import timedelta

import anthropic
import openai
import pytest
from contextops_client.anthropic import wrap as wrap_anthropic
from contextops_client.openai import wrap as wrap_openai
from django.utils import timezone

from frames.models import Usage
from tests.fakes.anthropic_server import AnthropicFakeServer
from tests.fakes.anthropic_server import Reply as ClaudeReply
from tests.fakes.openai_server import OpenAIFakeServer
from tests.fakes.openai_server import Reply as GptReply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]


def _timed(session_id):
    call = Usage.objects.get(session_id=session_id)
    assert call.started_at is not None and call.latency_ms is not None
    assert timezone.now() - timedelta(minutes=1) < call.started_at <= timezone.now()
    assert 0 <= call.latency_ms < 60_000
    return call


def test_the_anthropic_wrapper_records_each_calls_timing(ops):
    with AnthropicFakeServer() as fake:
        sdk = anthropic.Anthropic(base_url=fake.base_url, api_key="test", max_retries=0)
        session = ops.session(model="claude-sonnet-4-6")
        claude = wrap_anthropic(sdk, ops, session)
        fake.script(ClaudeReply.message("Hello", usage={"input_tokens": 10, "output_tokens": 2}))
        with ops.frame(session, goal="Chat", budget=10_000):
            claude.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=50,
                messages=[{"role": "user", "content": "Hi"}],
            )
        sdk.close()
    _timed(session.id)


def test_the_openai_wrapper_records_each_calls_timing(ops):
    with OpenAIFakeServer() as fake:
        sdk = openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
        session = ops.session(model="gpt-4o")
        gpt = wrap_openai(sdk, ops, session)
        fake.script(GptReply.message("Hello"))
        with ops.frame(session, goal="Chat", budget=10_000):
            gpt.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], max_tokens=50
            )
        sdk.close()
    _timed(session.id)
