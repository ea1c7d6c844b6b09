"""The summarizer tries again only what may pass, and waits as long as the provider asks.

The real anthropic SDK against the local Messages API server; sleeps are recorded, not slept.
"""

import pytest

from contextops.llm import (
    CONTINUATION_MESSAGE,
    MAX_RETRY_AFTER_SECONDS,
    AnthropicSummarizer,
    TurnText,
)
from tests.fakes.anthropic_server import AnthropicFakeServer, Reply

TURNS = [TurnText(0, "Fix the build", "Done.")]


@pytest.fixture
def server():
    with AnthropicFakeServer() as running:
        yield running


def _summarize(server, sleeps):
    summarizer = AnthropicSummarizer(
        api_key="test-key", model="claude-test", base_url=server.base_url, sleep=sleeps.append
    )
    return summarizer.summarize(TURNS)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_it_does_not_retry_a_refusal_that_will_not_change(server, status):
    server.script(Reply.status(status), Reply.message("never asked"))
    sleeps: list[float] = []

    outcome = _summarize(server, sleeps)

    assert (outcome.failed, outcome.retryable, outcome.attempts) == (True, False, 1)
    assert outcome.text == CONTINUATION_MESSAGE
    assert len(server.message_requests) == 1 and sleeps == []


def test_it_waits_as_long_as_retry_after_asks(server):
    server.script(
        Reply.status(429, headers={"retry-after": "7"}),
        Reply.status(529, headers={"retry-after-ms": "1500"}),
        Reply.message("Third time."),
    )
    sleeps: list[float] = []

    outcome = _summarize(server, sleeps)

    assert (outcome.text, outcome.attempts) == ("Third time.", 3)
    # Our own backoff is 1 s then 2 s; the provider asked for 7 s, then 1.5 s.
    assert sum(sleeps[:2]) == 7.0 and sum(sleeps[2:]) == 2.0


def test_it_caps_a_retry_after_that_asks_too_much(server):
    server.script(Reply.status(503, headers={"retry-after": "3600"}), Reply.message("Back."))
    sleeps: list[float] = []

    outcome = _summarize(server, sleeps)

    assert outcome.text == "Back." and sum(sleeps) == MAX_RETRY_AFTER_SECONDS


def test_a_failure_that_may_pass_later_says_so(server):
    server.script(Reply.status(500), Reply.status(529), Reply.status(429))
    outcome = _summarize(server, [])
    assert (outcome.failed, outcome.retryable, outcome.attempts) == (True, True, 3)
