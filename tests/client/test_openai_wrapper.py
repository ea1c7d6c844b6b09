"""The OpenAI wrapper: the real SDK against tests/fakes/openai_server.py, the real
contextops server behind the live server fixture."""

import asyncio
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import openai
import pytest
from contextops_client import AsyncClient, Client, FrameNotActive, InsufficientTokens
from contextops_client.openai import estimate_tokens, wrap
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from frames.conversation.models import Message
from frames.models import Usage
from tests.fakes.openai_server import OpenAIFakeServer, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
# OpenAI counts the cached tokens inside prompt_tokens: 1200 in, 1000 of them cached.
CACHED = {"prompt_tokens": 1200, "cached_tokens": 1000, "completion_tokens": 40}
RECORDED = {
    "input_tokens": 200,
    "output_tokens": 40,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 1000,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
def fake():
    with OpenAIFakeServer() as server:
        yield server


@pytest.fixture
def sdk(fake):
    client = openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
    yield client
    client.close()


def _user(text):
    return {"role": "user", "content": text}


def _tool_calls(*calls):
    return [{"id": i, "name": name, "arguments": json.dumps(args)} for i, name, args in calls]


def _sum(figures):
    return sum(figures.values())


# -- Chat Completions ----------------------------------------------------------------------


def test_a_tool_calling_chat_is_recorded_as_turns_with_tool_calls_and_results(ops, sdk, fake):
    session = ops.session(model="gpt-fake")
    gpt = wrap(sdk, ops, session)
    fake.script(
        Reply.message(
            "",
            tool_calls=_tool_calls(
                ("call_paris", "weather", {"city": "Paris"}),
                ("call_atlantis", "weather", {"city": "Atlantis"}),
            ),
            usage=CACHED,
        ),
        Reply.message("Paris is sunny; Atlantis is not a city I know.", usage=CACHED),
        Reply.message("You are welcome.", usage=CACHED),
    )
    history = [
        {"role": "system", "content": "You are a weather bot."},
        _user("Weather in Paris and Atlantis?"),
    ]
    with ops.frame(session, goal="Weather", budget=50_000) as frame:
        first = gpt.chat.completions.create(
            model="gpt-fake", messages=history, tools=[WEATHER_TOOL], max_completion_tokens=200
        )
        assert isinstance(first, ChatCompletion)  # the SDK's own object, unchanged
        assert [c.function.name for c in first.choices[0].message.tool_calls] == ["weather"] * 2
        history += [
            first.choices[0].message,  # the SDK object, as agents append it
            {"role": "tool", "tool_call_id": "call_paris", "content": "sunny, 24 C"},
            {"role": "tool", "tool_call_id": "call_atlantis", "content": "Error: unknown city"},
        ]
        second = gpt.chat.completions.create(
            model="gpt-fake", messages=history, tools=[WEATHER_TOOL]
        )
        history += [
            second.choices[0].message.model_dump(exclude_none=True),  # or as a dict
            _user("Thanks!"),
        ]
        gpt.chat.completions.create(model="gpt-fake", messages=history)
        assert frame.refresh().budget["used"] == 3 * _sum(RECORDED)

    turns = ops.turns(session)
    assert [(t["user_message"], t["assistant_response"]) for t in turns] == [
        ("Weather in Paris and Atlantis?", "Paris is sunny; Atlantis is not a city I know."),
        ("Thanks!", "You are welcome."),
    ]
    assert turns[0]["tool_calls"] == [
        {"id": "call_paris", "name": "weather", "input": {"city": "Paris"}},
        {"id": "call_atlantis", "name": "weather", "input": {"city": "Atlantis"}},
    ]
    assert turns[0]["tool_results"] == [
        {"tool_use_id": "call_paris", "output": "sunny, 24 C", "is_error": False},
        {"tool_use_id": "call_atlantis", "output": "Error: unknown city", "is_error": True},
    ]
    assert turns[1]["previous_error"] is True
    # each message recorded once, in the Anthropic shape; the system prompt is not a message
    stored = [(m.role, m.content) for m in Message.objects.filter(session_id=session.id)]
    assert stored[:2] == [
        ("user", [{"type": "text", "text": "Weather in Paris and Atlantis?"}]),
        (
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "call_paris",
                    "name": "weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "call_atlantis",
                    "name": "weather",
                    "input": {"city": "Atlantis"},
                },
            ],
        ),
    ]
    assert [role for role, _ in stored] == ["user", "assistant", "user", "user", "assistant"] + [
        "user",
        "assistant",
    ]
    # the SDK sent the agent's whole history, system prompt and tool messages included
    sent = fake.chat_requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'


def test_usage_counts_cached_tokens_once_and_names_the_model_and_completion(ops, sdk, fake):
    session = ops.session()
    gpt = wrap(sdk, ops, session)
    fake.script(Reply.message("Cached answer", usage=CACHED))
    with ops.frame(session, goal="Cache", budget=10_000) as frame:
        completion = gpt.chat.completions.create(
            model="gpt-4o-fake",
            messages=iter([_user("hi")]),  # any iterable, read once
            max_tokens=openai.NOT_GIVEN,  # the SDK's markers of an argument not given
            stream=openai.omit,
        )
        assert frame.refresh().budget["used"] == 1200 + 40  # the window: every prompt token
    assert ops.session_get(session).usage_totals == RECORDED
    assert fake.chat_requests[0].body["messages"] == [_user("hi")]
    assert [t["user_message"] for t in ops.turns(session)] == ["hi"]
    usage = Usage.objects.get(session_id=session.id)
    assert (usage.model, usage.message_id) == ("gpt-4o-fake", completion.id)
    assert usage.frame_id is not None and str(usage.frame_id) == frame.id


def test_a_streamed_chat_is_recorded_once_when_read_to_the_end(ops, sdk, fake):
    session = ops.session()
    gpt = wrap(sdk, ops, session)
    fake.script(
        Reply.message("Streamed words arrive one by one", usage=CACHED),
        Reply.message(
            "", tool_calls=_tool_calls(("call_s", "weather", {"city": "Oslo"})), usage=CACHED
        ),
    )
    with ops.frame(session, goal="Stream", budget=10_000) as frame:
        stream = gpt.chat.completions.create(
            model="gpt-fake",
            messages=[_user("Stream please")],
            stream=True,
            stream_options={"include_usage": True},
        )
        assert isinstance(stream, openai.Stream)
        assert ops.session_get(session).usage_totals["input_tokens"] == 0  # not read yet
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Streamed words arrive one by one"
        assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 1200  # asked for
        assert frame.refresh().budget["used"] == _sum(RECORDED)

        # without stream_options the agent sees the stream it asked for; usage is recorded
        history = [
            _user("Stream please"),
            {"role": "assistant", "content": text},
            _user("Now the weather in Oslo"),
        ]
        with gpt.chat.completions.create(model="gpt-fake", messages=history, stream=True) as s:
            chunks = list(s)
        assert all(c.choices for c in chunks)
        assert fake.chat_requests[1].body["stream_options"] == {"include_usage": True}
        assert frame.refresh().budget["used"] == 2 * _sum(RECORDED)

    assert ops.session_get(session).usage_totals == {k: 2 * v for k, v in RECORDED.items()}
    turns = ops.turns(session)
    assert [t["assistant_response"] for t in turns] == [text, ""]
    assert turns[1]["tool_calls"] == [
        {"id": "call_s", "name": "weather", "input": {"city": "Oslo"}}
    ]
    assert Message.objects.filter(session_id=session.id).count() == 4  # nothing twice


# -- Responses -----------------------------------------------------------------------------


def test_responses_calls_are_recorded_with_their_items_and_usage(ops, sdk, fake):
    session = ops.session()
    gpt = wrap(sdk, ops, session)
    fake.script(
        Reply.message(
            "",
            reasoning="Need the weather first.",
            tool_calls=_tool_calls(("fc_1", "weather", {"city": "Lima"})),
            usage=CACHED,
        ),
        Reply.message("Lima: foggy.", usage=CACHED),
        Reply.message("Bring a coat.", usage=CACHED),
    )
    items = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Lima?"}]},
    ]
    with ops.frame(session, goal="Responses", budget=50_000) as frame:
        first = gpt.responses.create(model="gpt-fake", input=items, instructions="Weather bot.")
        assert isinstance(first, Response)
        items += [
            *first.output,  # the SDK's output items, as agents pass them back
            {"type": "function_call_output", "call_id": "fc_1", "output": "foggy, 16 C"},
        ]
        second = gpt.responses.create(model="gpt-fake", input=items)
        assert second.output_text == "Lima: foggy."
        # a stored conversation: only the new input is sent, and recorded after the rest
        third = gpt.responses.create(
            model="gpt-fake", input="Do I need a coat?", previous_response_id=second.id
        )
        assert frame.refresh().budget["used"] == 3 * _sum(RECORDED)

    turns = ops.turns(session)
    assert [(t["user_message"], t["assistant_response"]) for t in turns] == [
        ("Weather in Lima?", "Lima: foggy."),
        ("Do I need a coat?", "Bring a coat."),
    ]
    assert turns[0]["tool_calls"] == [{"id": "fc_1", "name": "weather", "input": {"city": "Lima"}}]
    assert turns[0]["tool_results"] == [
        {"tool_use_id": "fc_1", "output": "foggy, 16 C", "is_error": False}
    ]
    assert ops.session_get(session).usage_totals == {k: 3 * v for k, v in RECORDED.items()}
    assert set(
        Usage.objects.filter(session_id=session.id).values_list("message_id", flat=True)
    ) == {
        first.id,
        second.id,
        third.id,
    }
    stored = [(m.role, m.content) for m in Message.objects.filter(session_id=session.id)]
    assert stored[1] == (
        "assistant",
        [
            {"type": "thinking", "thinking": "Need the weather first."},
            {"type": "tool_use", "id": "fc_1", "name": "weather", "input": {"city": "Lima"}},
        ],
    )
    assert len(stored) == 6  # user, assistant, tool result, assistant, user, assistant


def test_a_stored_conversation_records_its_new_input_even_when_it_repeats_itself(ops, sdk, fake):
    session = ops.session()
    gpt = wrap(sdk, ops, session)
    fake.script(Reply.message("Hi!"), Reply.message("Hi again!"))
    with ops.frame(session, goal="Repeat", budget=10_000):
        first = gpt.responses.create(model="gpt-fake", input="Hello")
        gpt.responses.create(model="gpt-fake", input="Hello", previous_response_id=first.id)
    assert fake.responses_requests[1].body["input"] == "Hello"  # only the new input is sent
    assert [(t["user_message"], t["assistant_response"]) for t in ops.turns(session)] == [
        ("Hello", "Hi!"),
        ("Hello", "Hi again!"),
    ]


def test_a_streamed_response_is_recorded_once(ops, sdk, fake):
    session = ops.session()
    gpt = wrap(sdk, ops, session)
    fake.script(Reply.message("Streamed response text", usage=CACHED))
    with ops.frame(session, goal="Stream", budget=10_000) as frame:
        stream = gpt.responses.create(model="gpt-fake", input="Tell me", stream=True)
        assert isinstance(stream, openai.Stream)
        events = list(stream)
        assert events[-1].type == "response.completed"
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == "Streamed response text"
        assert frame.refresh().budget["used"] == _sum(RECORDED)
    assert ops.session_get(session).usage_totals == RECORDED
    assert [t["assistant_response"] for t in ops.turns(session)] == [text]
    assert Usage.objects.filter(session_id=session.id).count() == 1


# -- refusal before sending ------------------------------------------------------------------


def test_a_call_the_frame_cannot_pay_is_refused_before_it_is_sent(ops, sdk, fake):
    session = ops.session()
    gpt = wrap(sdk, ops, session)
    messages = [_user("Write a long essay about TLS.")]
    with ops.frame(session, goal="Tiny", budget=50):
        with pytest.raises(InsufficientTokens) as caught:
            gpt.chat.completions.create(
                model="gpt-fake", messages=messages, max_completion_tokens=1000
            )
        with pytest.raises(InsufficientTokens):
            gpt.chat.completions.create(
                model="gpt-fake", messages=messages, max_tokens=1000, stream=True
            )
        with pytest.raises(InsufficientTokens) as by_responses:
            gpt.responses.create(model="gpt-fake", input=messages, max_output_tokens=1000)
    assert caught.value.requested == estimate_tokens(
        {"max_completion_tokens": 1000, "messages": messages}
    )
    assert caught.value.requested > 1000 and caught.value.available == 50
    assert by_responses.value.requested > 1000
    assert fake.requests == []  # the fake server saw nothing
    assert ops.turns(session) == []
    assert ops.session_get(session).usage_totals["output_tokens"] == 0


def test_a_call_on_a_closed_pinned_frame_is_refused_before_it_is_sent(ops, sdk, fake):
    session = ops.session()
    with ops.frame(session, goal="Done already", budget=1_000) as done:
        pass
    ops.frame_push(session, goal="Still open", budget=1_000)
    gpt = wrap(sdk, ops, session, frame=done)
    with pytest.raises(FrameNotActive) as caught:
        gpt.chat.completions.create(model="gpt-fake", messages=[_user("hi")])
    with pytest.raises(FrameNotActive):
        gpt.responses.create(model="gpt-fake", input="hi")
    assert caught.value.frame_status == "completed"
    assert fake.requests == []


def test_the_pinned_frame_is_checked_and_charged_while_a_deeper_one_is_active(ops, sdk, fake):
    session = ops.session()
    with ops.frame(session, goal="Pinned", budget=10_000) as pinned:
        gpt = wrap(sdk, ops, session, frame=pinned)
        with ops.frame(session, goal="Deeper", budget=500) as deeper:
            fake.script(Reply.message("Charged to the pin", usage=CACHED))
            # more than the deeper frame has, less than the pinned one: checked on the pin
            gpt.chat.completions.create(
                model="gpt-fake", messages=[_user("hi")], max_completion_tokens=5_000
            )
            assert pinned.refresh().budget["used"] == _sum(RECORDED)
            assert deeper.refresh().budget["used"] == 0


# -- retries -------------------------------------------------------------------------------


def test_a_call_the_sdk_retried_is_recorded_once(ops, fake):
    sdk = openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=2)
    session = ops.session()
    gpt = wrap(sdk, ops, session)
    fake.script(Reply.status(500), Reply.status(429), Reply.message("Third time", usage=CACHED))
    with ops.frame(session, goal="Flaky", budget=10_000) as frame:
        gpt.chat.completions.create(model="gpt-fake", messages=[_user("hi")])
        assert frame.refresh().budget["used"] == _sum(RECORDED)
    sdk.close()
    assert len(fake.chat_requests) == 3
    assert ops.session_get(session).usage_totals == RECORDED
    assert [t["assistant_response"] for t in ops.turns(session)] == ["Third time"]


class _AnswerLosingProxy:
    """Forwards to the live server, but the answer of the first ``POST .../messages`` is
    lost: the server did the work, the connection closes before the client hears back."""

    def __init__(self, upstream):
        proxy = self
        self.appends = 0

        class Handler(BaseHTTPRequestHandler):
            # The body leaves with the headers, not 40 ms later (Nagle's delay).
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                answer = httpx.request(
                    self.command,
                    upstream + self.path,
                    content=body,
                    headers={k: v for k, v in self.headers.items() if k.lower() != "host"},
                )
                if self.command == "POST" and self.path.rstrip("/").endswith("/messages"):
                    proxy.appends += 1
                    if proxy.appends == 1:
                        self.close_connection = True  # done upstream, never answered
                        return
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_record_whose_answer_was_lost_is_sent_again_and_counted_once(agent, sdk, fake):
    proxy = _AnswerLosingProxy(agent.url)
    try:
        with Client(proxy.url, agent.key, retries=2, backoff=0.01) as ops:
            session = ops.session()
            gpt = wrap(sdk, ops, session)
            fake.script(Reply.message("Recorded once", usage=CACHED))
            with ops.frame(session, goal="Lossy network", budget=10_000) as frame:
                completion = gpt.chat.completions.create(model="gpt-fake", messages=[_user("hi")])
                assert frame.refresh().budget["used"] == _sum(RECORDED)  # charged once
            assert ops.session_get(session).usage_totals == RECORDED
            assert [t["assistant_response"] for t in ops.turns(session)] == ["Recorded once"]
    finally:
        proxy.close()
    assert proxy.appends == 2  # sent again with the same message_id
    assert Usage.objects.filter(message_id=completion.id).count() == 1
    assert Message.objects.filter(session_id=session.id).count() == 2


# -- async, pairing, pass-through, standalone ----------------------------------------------


def test_it_wraps_the_async_sdk_with_the_async_client(agent, fake):
    async def run():
        async with AsyncClient(agent.url, agent.key) as ops:
            session = await ops.session()
            sdk = openai.AsyncOpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
            gpt = wrap(sdk, ops, session)
            fake.script(
                Reply.message("Async hello", usage=CACHED),
                Reply.message("Async stream", usage=CACHED),
                Reply.message("Async response", usage=CACHED),
            )
            async with ops.frame(session, goal="Async chat", budget=10_000):
                completion = await gpt.chat.completions.create(
                    model="gpt-fake", messages=[_user("hello")]
                )
                history = [
                    _user("hello"),
                    completion.choices[0].message,
                    _user("stream it"),
                ]
                stream = await gpt.chat.completions.create(
                    model="gpt-fake", messages=history, stream=True
                )
                text = "".join([c.choices[0].delta.content or "" async for c in stream])
                events = await gpt.responses.create(
                    model="gpt-fake", input="and a response", stream=True
                )
                kinds = [e.type async for e in events]
            await sdk.close()
            totals = (await ops.session_get(session)).usage_totals
            return text, kinds, totals, await ops.turns(session)

    text, kinds, totals, turns = asyncio.run(run())
    assert text == "Async stream" and kinds[-1] == "response.completed"
    assert totals == {k: 3 * v for k, v in RECORDED.items()}
    assert [t["assistant_response"] for t in turns] == [
        "Async hello",
        "Async stream",
        "Async response",
    ]


def test_it_refuses_to_pair_a_sync_sdk_with_the_async_client(agent, sdk, fake):
    with pytest.raises(TypeError):
        wrap(sdk, AsyncClient(agent.url, agent.key), "session-id")
    async_sdk = openai.AsyncOpenAI(base_url=fake.base_url, api_key="test")
    with Client(agent.url, agent.key) as ops, pytest.raises(TypeError):
        wrap(async_sdk, ops, "session-id")


def test_everything_else_is_the_sdk_s_own(ops, sdk):
    gpt = wrap(sdk, ops, ops.session())
    assert gpt.models is sdk.models
    assert gpt.embeddings is sdk.embeddings
    assert gpt.chat.completions.list == sdk.chat.completions.list  # stored completions
    assert gpt.responses.retrieve == sdk.responses.retrieve


def test_the_wrapper_module_loads_without_the_openai_package():
    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {{"openai", "anthropic", "django", "contextops"}}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
sys.path.insert(0, {str(CLIENT)!r})
from contextops_client.openai import wrap, estimate_tokens
from contextops_client import _recording
print(estimate_tokens({{"messages": [{{"role": "user", "content": "hi"}}], "max_tokens": 10}}))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 10
