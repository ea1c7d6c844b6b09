"""The summarizers: the real anthropic SDK against a local Messages API server, and the offline one."""

import os

import anthropic
import pytest

from contextops.llm import (
    CONTINUATION_MESSAGE,
    SUMMARY_PROMPT,
    AnthropicSummarizer,
    ExtractiveSummarizer,
    TurnText,
    summarizer_default,
)
from tests.fakes.anthropic_server import AnthropicFakeServer, Reply

TURNS = [
    TurnText(
        0,
        "Fix the failing build in app.py",
        "I will look.",
        [{"name": "Edit", "input": {"file_path": "app.py"}}],
        [{"output": "boom", "is_error": True}],
    ),
    TurnText(
        1,
        "Run the tests",
        "All tests pass now.",
        [{"name": "Bash", "input": {"command": "pytest"}}],
        [{"output": "5 tests pass"}],
        "task-completion",
    ),
]


@pytest.fixture
def server():
    with AnthropicFakeServer() as running:
        yield running


@pytest.fixture
def sleeps():
    return []


def make(server, sleeps, **kwargs):
    return AnthropicSummarizer(
        api_key="test-key",
        model="claude-test",
        base_url=server.base_url,
        sleep=sleeps.append,
        **kwargs,
    )


def test_it_returns_the_model_summary(server, sleeps):
    server.script(
        Reply.message(
            "The user fixed app.py; tests pass.", usage={"input_tokens": 321, "output_tokens": 9}
        )
    )
    outcome = make(server, sleeps).summarize(TURNS)
    assert (outcome.text, outcome.failed, outcome.attempts) == (
        "The user fixed app.py; tests pass.",
        False,
        1,
    )
    assert outcome.usage["input_tokens"] == 321
    assert sleeps == []
    request = server.message_requests[0]
    assert request.body["model"] == "claude-test"
    assert request.body["max_tokens"] == 1024
    # The SDK authenticates with x-api-key (1.x) or a bearer token (2.x).
    assert "test-key" in (
        request.headers.get("x-api-key", ""),
        request.headers.get("authorization", "").removeprefix("Bearer "),
    )
    prompt = request.body["messages"][0]["content"]
    assert prompt.startswith(SUMMARY_PROMPT)
    assert "Fix the failing build in app.py" in prompt and "Tool error: boom" in prompt


def test_it_retries_after_an_overloaded_529(server, sleeps):
    server.script(Reply.status(529), Reply.message("Second time lucky."))
    outcome = make(server, sleeps).summarize(TURNS)
    assert (outcome.text, outcome.failed, outcome.attempts) == ("Second time lucky.", False, 2)
    assert sleeps == [1.0]
    assert len(server.message_requests) == 2


def test_llm_summary_retry_logic(server, sleeps):
    """Three failures: 0 / 1 / 2 s backoff, then the continuation message recorded as a failure."""
    server.script(Reply.status(500), Reply.status(529), Reply.status(429))
    outcome = make(server, sleeps).summarize(TURNS)
    assert outcome.failed is True
    assert outcome.text == CONTINUATION_MESSAGE
    assert outcome.attempts == 3
    assert "RateLimitError" in outcome.error
    assert sleeps == [1.0, 2.0]
    assert len(server.message_requests) == 3


def test_it_survives_a_malformed_body(server, sleeps):
    server.script(Reply.malformed(), Reply.message("Recovered."))
    outcome = make(server, sleeps).summarize(TURNS)
    assert (outcome.text, outcome.failed, outcome.attempts) == ("Recovered.", False, 2)


def test_it_records_a_failure_when_every_body_is_malformed(server, sleeps):
    server.script(
        Reply.malformed(),
        Reply.malformed(),
        Reply.raw(200, '{"id": "x", "type": "message", "content": []}'),
    )
    outcome = make(server, sleeps).summarize(TURNS)
    assert outcome.failed and outcome.text == CONTINUATION_MESSAGE
    assert "no text content" in outcome.error


def test_it_uses_a_configured_prompt_and_caps_output_tokens(server, sleeps):
    server.script(Reply.message("ok"))
    make(server, sleeps, prompt="Summarize tersely.", max_tokens=5000).summarize(TURNS)
    body = server.message_requests[0].body
    assert body["messages"][0]["content"].startswith("Summarize tersely.")
    assert body["max_tokens"] == 1024


def test_the_fake_server_streams_for_the_real_sdk(server):
    server.script(
        Reply.message(
            "streamed summary text", usage={"input_tokens": 40, "cache_read_input_tokens": 7}
        )
    )
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
    with client.messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "streamed summary text"
    assert final.usage.input_tokens == 40 and final.usage.cache_read_input_tokens == 7


def test_the_fake_server_streams_tool_use_and_thinking(server):
    blocks = [
        {"type": "thinking", "thinking": "Let me check.", "signature": "s1"},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.py"}},
    ]
    server.script(Reply.message(content=blocks, stop_reason="tool_use"))
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
    with client.messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "tool_use"]
    assert final.content[1].input == {"file_path": "a.py"}
    assert final.stop_reason == "tool_use"


def test_the_extractive_summarizer_needs_no_network():
    outcome = ExtractiveSummarizer().summarize(TURNS)
    assert outcome.provider == "extractive" and not outcome.failed
    assert "Goal: Fix the failing build in app.py" in outcome.text
    assert "app.py" in outcome.text and "1 failed" in outcome.text
    assert "All tests pass now." in outcome.text


def test_the_default_is_extractive_without_an_api_key(settings):
    settings.ANTHROPIC_API_KEY = ""
    settings.CONTEXTOPS_SUMMARIZER = ""
    assert summarizer_default().name == "extractive"
    settings.ANTHROPIC_API_KEY = "sk-test"
    chosen = summarizer_default()
    assert chosen.name == "anthropic" and chosen.model == settings.CONTEXTOPS_SUMMARY_MODEL
    assert chosen.prompt == SUMMARY_PROMPT


def test_the_web_app_and_the_worker_start_without_importing_the_sdk():
    """anthropic takes about 2 s to import: a process loads it when it makes a summarizer
    that calls it, not when it starts."""
    import subprocess
    import sys

    probe = (
        "import sys, django; django.setup(); import contextops.urls, contextops.celery, "
        "frames.tasks; print('anthropic' in sys.modules)"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "contextops.settings", "DEBUG": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.split() == ["False"], loaded.stderr[-2000:]
