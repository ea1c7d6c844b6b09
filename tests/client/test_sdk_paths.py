"""Every way the OpenAI and Anthropic SDKs send a model call, through the wrappers: each
is checked against the paying frame before anything is sent and recorded after, with
the exact usage (cache fields included). The real SDKs talk to tests/fakes/, which speak
each API's JSON answers and event streams; the real contextops server is the live
server. docs/agents.md has the table these tests prove, path by path."""

import asyncio
import json

import anthropic
import openai
import pytest
from contextops_client import AsyncClient, InsufficientTokens
from contextops_client.anthropic import wrap as wrap_anthropic
from contextops_client.openai import wrap as wrap_openai
from pydantic import BaseModel

from frames.models import Usage
from tests.fakes import anthropic_server, openai_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

ANSWER = '{"answer": "forty two"}'
# OpenAI counts the cached tokens inside the prompt's: 1200 in, 1000 of them cached.
OPENAI_USAGE = {"prompt_tokens": 1200, "cached_tokens": 1000, "completion_tokens": 40}
OPENAI_RECORDED = {
    "input_tokens": 200,
    "output_tokens": 40,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 1000,
}
ANTHROPIC_USAGE = {
    "input_tokens": 12,
    "output_tokens": 9,
    "cache_creation_input_tokens": 5,
    "cache_read_input_tokens": 7,
}


class Answer(BaseModel):
    answer: str


# -- the paths: each sends one call and reads its answer to the end, as an agent would ------
# ``big`` asks for an output cap of 1000 tokens, which a 100-token frame cannot pay.

CHAT = {"model": "gpt-fake", "messages": [{"role": "user", "content": "The answer?"}]}
RESPONSES = {"model": "gpt-fake", "input": "The answer?"}


def _chat(big):
    return {**CHAT, "max_completion_tokens": 1000} if big else dict(CHAT)


def _responses(big):
    return {**RESPONSES, "max_output_tokens": 1000} if big else dict(RESPONSES)


def _chunks_text(chunks):
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def _sse_text(lines):
    texts = []
    for line in lines:
        if line.startswith("data: {"):
            data = json.loads(line[6:])
            for choice in data.get("choices") or []:
                texts.append(choice["delta"].get("content") or "")
            if data.get("type") == "response.output_text.delta":
                texts.append(data["delta"])
            if data.get("type") == "content_block_delta":
                texts.append(data["delta"].get("text", ""))
    return "".join(texts)


OPENAI_SYNC = {
    "chat.completions.create": lambda gpt, big: (
        gpt.chat.completions.create(**_chat(big)).choices[0].message.content
    ),
    "chat.completions.create(stream=True)": lambda gpt, big: _chunks_text(
        list(gpt.chat.completions.create(**_chat(big), stream=True))
    ),
    "chat.completions.parse": lambda gpt, big: (
        gpt.chat.completions.parse(**_chat(big), response_format=Answer)
        .choices[0]
        .message.parsed.answer
    ),
    "chat.completions.stream": lambda gpt, big: _read_chat_helper(
        gpt.chat.completions.stream(**_chat(big), response_format=Answer)
    ),
    "beta.chat.completions.parse": lambda gpt, big: (
        gpt.beta.chat.completions.parse(**_chat(big), response_format=Answer)
        .choices[0]
        .message.parsed.answer
    ),
    "beta.chat.completions.stream": lambda gpt, big: _read_chat_helper(
        gpt.beta.chat.completions.stream(**_chat(big))
    ),
    "chat.completions.with_raw_response.create": lambda gpt, big: (
        gpt.chat.completions.with_raw_response.create(**_chat(big))
        .parse()
        .choices[0]
        .message.content
    ),
    "chat.completions.with_raw_response.create(stream=True)": lambda gpt, big: _chunks_text(
        list(gpt.chat.completions.with_raw_response.create(**_chat(big), stream=True).parse())
    ),
    "chat.completions.with_streaming_response.create": lambda gpt, big: _read_body(
        gpt.chat.completions.with_streaming_response.create(**_chat(big)),
        lambda r: r.parse().choices[0].message.content,
    ),
    "chat.completions.with_streaming_response.create(stream=True)": lambda gpt, big: _read_body(
        gpt.chat.completions.with_streaming_response.create(**_chat(big), stream=True),
        lambda r: _sse_text(r.iter_lines()),
    ),
    "responses.create": lambda gpt, big: gpt.responses.create(**_responses(big)).output_text,
    "responses.create(stream=True)": lambda gpt, big: "".join(
        e.delta
        for e in gpt.responses.create(**_responses(big), stream=True)
        if e.type == "response.output_text.delta"
    ),
    "responses.parse": lambda gpt, big: (
        gpt.responses.parse(**_responses(big), text_format=Answer).output_parsed.answer
    ),
    "responses.stream": lambda gpt, big: _read_response_helper(
        gpt.responses.stream(**_responses(big))
    ),
    "responses.with_raw_response.create": lambda gpt, big: (
        gpt.responses.with_raw_response.create(**_responses(big)).parse().output_text
    ),
    "responses.with_streaming_response.create": lambda gpt, big: _read_body(
        gpt.responses.with_streaming_response.create(**_responses(big)),
        lambda r: r.parse().output_text,
    ),
    "responses.with_streaming_response.create(stream=True)": lambda gpt, big: _read_body(
        gpt.responses.with_streaming_response.create(**_responses(big), stream=True),
        lambda r: _sse_text(r.iter_lines()),
    ),
}


def _read_chat_helper(manager):
    with manager as stream:
        text = "".join(e.delta for e in stream if e.type == "content.delta")
    return text


def _read_response_helper(manager):
    with manager as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    return text


def _read_body(manager, read):
    with manager as response:
        return read(response)


async def _aread_body(manager, read):
    async with manager as response:
        return await read(response)


async def _alist(stream):
    return [item async for item in stream]


async def _alines(response):
    return _sse_text([line async for line in response.iter_lines()])


async def _achat_helper(manager):
    async with manager as stream:
        return "".join([e.delta async for e in stream if e.type == "content.delta"])


async def _aresponse_helper(manager):
    async with manager as stream:
        return "".join([e.delta async for e in stream if e.type == "response.output_text.delta"])


OPENAI_ASYNC = {
    "async chat.completions.create": lambda gpt, big: _then(
        gpt.chat.completions.create(**_chat(big)), lambda c: c.choices[0].message.content
    ),
    "async chat.completions.create(stream=True)": lambda gpt, big: _then(
        gpt.chat.completions.create(**_chat(big), stream=True),
        lambda s: _alist(s),
        _chunks_text,
    ),
    "async chat.completions.parse": lambda gpt, big: _then(
        gpt.chat.completions.parse(**_chat(big), response_format=Answer),
        lambda c: c.choices[0].message.parsed.answer,
    ),
    "async chat.completions.stream": lambda gpt, big: _achat_helper(
        gpt.chat.completions.stream(**_chat(big))
    ),
    "async beta.chat.completions.parse": lambda gpt, big: _then(
        gpt.beta.chat.completions.parse(**_chat(big), response_format=Answer),
        lambda c: c.choices[0].message.parsed.answer,
    ),
    "async chat.completions.with_raw_response.create": lambda gpt, big: _then(
        gpt.chat.completions.with_raw_response.create(**_chat(big)),
        lambda raw: raw.parse().choices[0].message.content,
    ),
    "async chat.completions.with_streaming_response.create(stream=True)": lambda gpt, big: (
        _aread_body(
            gpt.chat.completions.with_streaming_response.create(**_chat(big), stream=True),
            _alines,
        )
    ),
    "async beta.chat.completions.stream": lambda gpt, big: _achat_helper(
        gpt.beta.chat.completions.stream(**_chat(big))
    ),
    "async chat.completions.with_streaming_response.create": lambda gpt, big: _aread_body(
        gpt.chat.completions.with_streaming_response.create(**_chat(big)),
        lambda r: _then(r.parse(), lambda c: c.choices[0].message.content),
    ),
    "async responses.create": lambda gpt, big: _then(
        gpt.responses.create(**_responses(big)), lambda r: r.output_text
    ),
    "async responses.create(stream=True)": lambda gpt, big: _then(
        gpt.responses.create(**_responses(big), stream=True),
        _alist,
        lambda events: "".join(e.delta for e in events if e.type == "response.output_text.delta"),
    ),
    "async responses.parse": lambda gpt, big: _then(
        gpt.responses.parse(**_responses(big), text_format=Answer),
        lambda r: r.output_parsed.answer,
    ),
    "async responses.with_raw_response.create": lambda gpt, big: _then(
        gpt.responses.with_raw_response.create(**_responses(big)),
        lambda raw: raw.parse().output_text,
    ),
    "async responses.stream": lambda gpt, big: _aresponse_helper(
        gpt.responses.stream(**_responses(big))
    ),
    "async responses.with_streaming_response.create": lambda gpt, big: _aread_body(
        gpt.responses.with_streaming_response.create(**_responses(big)),
        lambda r: _then(r.parse(), lambda p: p.output_text),
    ),
}


async def _then(awaitable, *steps):
    value = await awaitable
    for step in steps:
        value = step(value)
        if asyncio.iscoroutine(value):
            value = await value
    return value


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def openai_fake():
    with openai_server.OpenAIFakeServer() as server:
        yield server


@pytest.fixture
def anthropic_fake():
    with anthropic_server.AnthropicFakeServer() as server:
        yield server


def _refused_before_sending(ops, wrapped, send, fake):
    """``send`` in a frame of 100 tokens asking for 1000: refused, nothing sent or kept."""
    session = ops.session()
    with ops.frame(session, goal="Tiny", budget=100):
        with pytest.raises(InsufficientTokens) as refused:
            send(wrapped(session), True)
    assert refused.value.requested > 1000 and refused.value.available == 100
    assert fake.requests == []  # nothing reached the model
    assert ops.turns(session) == []


async def _async_paths(agent, fake, make_sdk, wrap, paths, reply):
    """Each async path: refused in a 100-token frame before sending, then recorded in a
    roomy one. Answers, by path: (refused, what was read, usage totals, turns)."""
    async with AsyncClient(agent.url, agent.key) as ops:
        sdk = make_sdk()
        outcomes = {}
        for path, send in paths.items():
            fake.requests.clear()
            fake.script(reply)
            session = await ops.session(model="fake")
            wrapped = wrap(sdk, ops, session)
            async with ops.frame(session, goal="Tiny", budget=100):
                try:
                    await send(wrapped, True)
                    refused = False
                except InsufficientTokens:
                    refused = fake.requests == []
            async with ops.frame(session, goal=path, budget=10_000):
                read = await send(wrapped, False)
            totals = (await ops.session_get(session)).usage_totals
            turns = [t["assistant_response"] for t in await ops.turns(session)]
            outcomes[path] = (refused, read, totals, turns)
        await sdk.close()
        return outcomes


def _usage_of(session_id):
    rows = list(Usage.objects.filter(session_id=session_id))
    assert len(rows) == 1, rows
    return rows[0]


# -- OpenAI --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", list(OPENAI_SYNC))
def test_each_openai_path_is_recorded_with_its_exact_usage(path, ops, openai_fake):
    sdk = openai.OpenAI(base_url=openai_fake.base_url, api_key="test", max_retries=0)
    openai_fake.script(openai_server.Reply.message(ANSWER, usage=OPENAI_USAGE))
    session = ops.session(model="gpt-fake")
    gpt = wrap_openai(sdk, ops, session)
    with ops.frame(session, goal=path, budget=10_000) as frame:
        read = OPENAI_SYNC[path](gpt, False)
        assert frame.refresh().budget["used"] == sum(OPENAI_RECORDED.values())
    assert read in (ANSWER, "forty two")
    assert ops.session_get(session).usage_totals == OPENAI_RECORDED
    assert [t["assistant_response"] for t in ops.turns(session)] == [ANSWER]
    usage = _usage_of(session.id)
    assert str(usage.frame_id) == frame.id and usage.model == "gpt-fake"
    assert usage.message_id.startswith(("chatcmpl-fake", "resp_fake"))
    sent = openai_fake.requests[0].body
    if sent.get("stream") and "messages" in sent:  # Chat Completions streams ask for usage
        assert sent["stream_options"] == {"include_usage": True}
    sdk.close()


@pytest.mark.parametrize("path", list(OPENAI_SYNC))
def test_each_openai_path_is_refused_before_sending_when_the_frame_cannot_pay(
    path, ops, openai_fake
):
    sdk = openai.OpenAI(base_url=openai_fake.base_url, api_key="test", max_retries=0)
    wrapped = lambda session: wrap_openai(sdk, ops, session)  # noqa: E731
    _refused_before_sending(ops, wrapped, OPENAI_SYNC[path], openai_fake)
    sdk.close()


def test_each_async_openai_path_is_recorded_and_checked(agent, openai_fake):
    outcomes = asyncio.run(
        _async_paths(
            agent,
            openai_fake,
            lambda: openai.AsyncOpenAI(
                base_url=openai_fake.base_url, api_key="test", max_retries=0
            ),
            wrap_openai,
            OPENAI_ASYNC,
            openai_server.Reply.message(ANSWER, usage=OPENAI_USAGE),
        )
    )
    parsed = {
        p: (r, read in (ANSWER, "forty two"), t, turns)
        for p, (r, read, t, turns) in outcomes.items()
    }
    expected = (True, True, OPENAI_RECORDED, [ANSWER])
    assert {p: o for p, o in parsed.items() if o != expected} == {}
    assert len(outcomes) == len(OPENAI_ASYNC)


def test_a_chat_stream_without_include_usage_is_sent_asking_for_it(ops, openai_fake):
    sdk = openai.OpenAI(base_url=openai_fake.base_url, api_key="test", max_retries=0)
    openai_fake.script(openai_server.Reply.message("Plain words", usage=OPENAI_USAGE))
    session = ops.session()
    gpt = wrap_openai(sdk, ops, session)
    with ops.frame(session, goal="Stream", budget=10_000):
        chunks = list(gpt.chat.completions.create(**CHAT, stream=True))
    # the agent gets the stream it asked for (no usage-only chunk), the record has usage
    assert all(c.choices for c in chunks)
    assert openai_fake.requests[0].body["stream_options"] == {"include_usage": True}
    assert ops.session_get(session).usage_totals == OPENAI_RECORDED
    sdk.close()


# -- Anthropic -----------------------------------------------------------------------------

MESSAGES = {"model": "claude-fake", "messages": [{"role": "user", "content": "The answer?"}]}


def _messages(big):
    return {**MESSAGES, "max_tokens": 1000 if big else 50}


def _read_message_stream(manager):
    with manager as stream:
        return "".join(stream.text_stream)


ANTHROPIC_SYNC = {
    "messages.create": lambda claude, big: claude.messages.create(**_messages(big)).content[0].text,
    "messages.create(stream=True)": lambda claude, big: "".join(
        e.delta.text
        for e in claude.messages.create(**_messages(big), stream=True)
        if e.type == "content_block_delta"
    ),
    "messages.stream": lambda claude, big: _read_message_stream(
        claude.messages.stream(**_messages(big))
    ),
    "messages.parse": lambda claude, big: claude.messages.parse(**_messages(big)).content[0].text,
    "messages.with_raw_response.create": lambda claude, big: (
        claude.messages.with_raw_response.create(**_messages(big)).parse().content[0].text
    ),
    "messages.with_raw_response.create(stream=True)": lambda claude, big: "".join(
        e.delta.text
        for e in claude.messages.with_raw_response.create(**_messages(big), stream=True).parse()
        if e.type == "content_block_delta"
    ),
    "messages.with_streaming_response.create": lambda claude, big: _read_body(
        claude.messages.with_streaming_response.create(**_messages(big)),
        lambda r: r.parse().content[0].text,
    ),
    "messages.with_streaming_response.create(stream=True)": lambda claude, big: _read_body(
        claude.messages.with_streaming_response.create(**_messages(big), stream=True),
        lambda r: _sse_text(r.iter_lines()),
    ),
}

ANTHROPIC_ASYNC = {
    "async messages.create": lambda claude, big: _then(
        claude.messages.create(**_messages(big)), lambda m: m.content[0].text
    ),
    "async messages.create(stream=True)": lambda claude, big: _then(
        claude.messages.create(**_messages(big), stream=True),
        _alist,
        lambda events: "".join(e.delta.text for e in events if e.type == "content_block_delta"),
    ),
    "async messages.stream": lambda claude, big: _astream_text(
        claude.messages.stream(**_messages(big))
    ),
    "async messages.parse": lambda claude, big: _then(
        claude.messages.parse(**_messages(big)), lambda m: m.content[0].text
    ),
    "async messages.with_raw_response.create": lambda claude, big: _then(
        claude.messages.with_raw_response.create(**_messages(big)),
        lambda raw: raw.parse(),  # awaited
        lambda message: message.content[0].text,
    ),
    "async messages.with_streaming_response.create": lambda claude, big: _aread_body(
        claude.messages.with_streaming_response.create(**_messages(big)),
        lambda r: _then(r.parse(), lambda m: m.content[0].text),
    ),
    "async messages.with_streaming_response.create(stream=True)": lambda claude, big: _aread_body(
        claude.messages.with_streaming_response.create(**_messages(big), stream=True),
        _alines,
    ),
}


async def _astream_text(manager):
    async with manager as stream:
        return "".join([t async for t in stream.text_stream])


@pytest.mark.parametrize("path", list(ANTHROPIC_SYNC))
def test_each_anthropic_path_is_recorded_with_all_four_usage_fields(path, ops, anthropic_fake):
    sdk = anthropic.Anthropic(base_url=anthropic_fake.base_url, api_key="test", max_retries=0)
    anthropic_fake.script(anthropic_server.Reply.message(ANSWER, usage=ANTHROPIC_USAGE))
    session = ops.session(model="claude-fake")
    claude = wrap_anthropic(sdk, ops, session)
    with ops.frame(session, goal=path, budget=10_000) as frame:
        read = ANTHROPIC_SYNC[path](claude, False)
        assert frame.refresh().budget["used"] == sum(ANTHROPIC_USAGE.values())
    assert read == ANSWER
    assert ops.session_get(session).usage_totals == ANTHROPIC_USAGE
    assert [t["assistant_response"] for t in ops.turns(session)] == [ANSWER]
    usage = _usage_of(session.id)
    assert str(usage.frame_id) == frame.id and usage.model == "claude-fake"
    assert usage.message_id.startswith("msg_")
    sdk.close()


@pytest.mark.parametrize("path", list(ANTHROPIC_SYNC))
def test_each_anthropic_path_is_refused_before_sending_when_the_frame_cannot_pay(
    path, ops, anthropic_fake
):
    sdk = anthropic.Anthropic(base_url=anthropic_fake.base_url, api_key="test", max_retries=0)
    wrapped = lambda session: wrap_anthropic(sdk, ops, session)  # noqa: E731
    _refused_before_sending(ops, wrapped, ANTHROPIC_SYNC[path], anthropic_fake)
    sdk.close()


def test_each_async_anthropic_path_is_recorded_and_checked(agent, anthropic_fake):
    outcomes = asyncio.run(
        _async_paths(
            agent,
            anthropic_fake,
            lambda: anthropic.AsyncAnthropic(
                base_url=anthropic_fake.base_url, api_key="test", max_retries=0
            ),
            wrap_anthropic,
            ANTHROPIC_ASYNC,
            anthropic_server.Reply.message(ANSWER, usage=ANTHROPIC_USAGE),
        )
    )
    expected = (True, ANSWER, ANTHROPIC_USAGE, [ANSWER])
    assert {p: o for p, o in outcomes.items() if o != expected} == {}
    assert len(outcomes) == len(ANTHROPIC_ASYNC)


def test_count_tokens_and_batches_are_the_sdk_s_own_and_record_nothing(ops, anthropic_fake):
    sdk = anthropic.Anthropic(base_url=anthropic_fake.base_url, api_key="test", max_retries=0)
    session = ops.session()
    claude = wrap_anthropic(sdk, ops, session)
    with ops.frame(session, goal="Count", budget=100) as frame:
        # free and sends no prompt to a model: neither refused nor charged
        counted = claude.messages.count_tokens(**MESSAGES)
        assert counted.input_tokens > 0
        assert frame.refresh().budget["used"] == 0
    assert claude.messages.batches is sdk.messages.batches  # not recorded (docs/agents.md)
    assert [r.path for r in anthropic_fake.requests] == ["/v1/messages/count_tokens"]
    assert Usage.objects.filter(session_id=session.id).count() == 0
    assert ops.turns(session) == []
    sdk.close()
