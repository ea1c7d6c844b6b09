"""The Anthropic wrapper: the real SDK against tests/fakes/anthropic_server.py, the real
contextops server behind the live server fixture."""

import asyncio
import threading

import anthropic
import pytest
from anthropic.lib.streaming import MessageStream, MessageStreamManager
from anthropic.types import Message
from contextops_client import AsyncClient, Client, FrameNotActive, InsufficientTokens, NotFound
from contextops_client.anthropic import SUMMARY_PREFIX, estimate_tokens, wrap

from tests.fakes.anthropic_server import AnthropicFakeServer, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

FOUR = {
    "input_tokens": 12,
    "output_tokens": 3,
    "cache_creation_input_tokens": 5,
    "cache_read_input_tokens": 7,
}


@pytest.fixture
def fake():
    with AnthropicFakeServer() as server:
        yield server


@pytest.fixture
def sdk(fake):
    client = anthropic.Anthropic(base_url=fake.base_url, api_key="test", max_retries=0)
    yield client
    client.close()


def _user(text):
    return {"role": "user", "content": text}


def test_it_returns_the_sdk_message_and_records_the_call_with_all_four_usage_fields(ops, sdk, fake):
    session = ops.session(model="claude-fake")
    claude = wrap(sdk, ops, session)
    fake.script(Reply.message("Hello there", usage=FOUR))
    history = [_user("Hi")]
    with ops.frame(session, goal="Chat", budget=10_000) as frame:
        reply = claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
        assert isinstance(reply, Message)
        assert reply.content[0].text == "Hello there"
        assert frame.refresh().budget["used"] == 12 + 3 + 5 + 7
        history += [{"role": "assistant", "content": reply.content}, _user("And then?")]
        fake.script(Reply.message("Then this."))
        claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
    totals = ops.session_get(session).usage_totals
    assert totals["cache_creation_input_tokens"] == 5
    assert totals["cache_read_input_tokens"] == 7
    assert totals["input_tokens"] == 12 + 10
    turns = ops.turns(session)
    assert [(t["user_message"], t["assistant_response"]) for t in turns] == [
        ("Hi", "Hello there"),
        ("And then?", "Then this."),
    ]
    assert fake.message_requests[1].body["messages"][1]["content"][0]["text"] == "Hello there"
    assert claude.models is sdk.models  # everything else is the SDK's own


def test_it_records_a_streamed_call(ops, sdk, fake):
    session = ops.session()
    claude = wrap(sdk, ops, session)
    fake.script(Reply.message("Streamed words arrive one by one", usage=FOUR))
    with ops.frame(session, goal="Stream", budget=10_000) as frame:
        manager = claude.messages.stream(
            model="claude-fake", max_tokens=200, messages=[_user("Stream please")]
        )
        assert isinstance(manager, MessageStreamManager)
        with manager as stream:
            assert isinstance(stream, MessageStream)
            text = "".join(stream.text_stream)
        assert text == "Streamed words arrive one by one"
        assert frame.refresh().budget["used"] == 12 + 3 + 5 + 7
    assert fake.message_requests[0].body["stream"] is True
    totals = ops.session_get(session).usage_totals
    assert (totals["cache_creation_input_tokens"], totals["cache_read_input_tokens"]) == (5, 7)
    assert ops.turns(session)[0]["assistant_response"] == text


def test_it_records_create_with_stream_true_once_the_events_are_read(ops, sdk, fake):
    session = ops.session()
    claude = wrap(sdk, ops, session)
    fake.script(Reply.message("Raw events", usage=FOUR))
    with ops.frame(session, goal="Raw stream", budget=10_000):
        events = claude.messages.create(
            model="claude-fake", max_tokens=50, messages=[_user("go")], stream=True
        )
        assert isinstance(events, anthropic.Stream)
        assert ops.session_get(session).usage_totals["input_tokens"] == 0  # not read yet
        kinds = [event.type for event in events]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    totals = ops.session_get(session).usage_totals
    assert totals == FOUR
    assert ops.turns(session)[0]["assistant_response"] == "Raw events"


def test_it_refuses_a_call_the_frame_cannot_pay_before_sending_it(ops, sdk, fake):
    session = ops.session()
    claude = wrap(sdk, ops, session)
    messages = [_user("Write a long essay about TLS.")]
    with ops.frame(session, goal="Tiny", budget=50):
        with pytest.raises(InsufficientTokens) as caught:
            claude.messages.create(model="claude-fake", max_tokens=1000, messages=messages)
        with pytest.raises(InsufficientTokens):
            claude.messages.stream(model="claude-fake", max_tokens=1000, messages=messages)
    assert caught.value.requested == estimate_tokens({"max_tokens": 1000, "messages": messages})
    assert caught.value.available == 50
    assert fake.requests == []
    assert ops.turns(session) == []


def test_it_checks_the_session_top_frame_outside_a_block(ops, sdk, fake):
    session = ops.session()
    ops.frame_push(session, goal="Pushed without a block", budget=20)
    claude = wrap(sdk, ops, session)
    with pytest.raises(InsufficientTokens) as caught:
        claude.messages.create(model="claude-fake", max_tokens=100, messages=[_user("hi")])
    assert caught.value.available == 20
    assert fake.requests == []


def test_it_sends_the_compacted_history_after_the_threshold_compaction(
    ops, sdk, fake, celery_worker
):
    session = ops.session(context_window_tokens=1000, compaction_threshold=0.5)
    claude = wrap(sdk, ops, session)
    history = []
    with ops.frame(session, goal="Long chat", budget=100_000):
        for i in range(5):
            history.append(_user(f"Question {i} about cipher suites"))
            big = {"input_tokens": 700} if i == 4 else {"input_tokens": 10}
            fake.script(Reply.message(f"Answer {i}.", usage=big))
            reply = claude.messages.create(model="claude-fake", max_tokens=50, messages=history)
            history.append({"role": "assistant", "content": reply.content})
        pending = claude.contextops.history.pending_compactions
        assert len(pending) == 1
        run = ops.compaction_wait(pending[0], timeout=30)
        assert run["status"] == "completed", run
        assert run["trigger"] == "threshold"  # queued by the server, not by the wrapper
        assert run["items_summarized"] == 2
        history.append(_user("Question 5: and now?"))
        fake.script(Reply.message("Answer 5."))
        claude.messages.create(model="claude-fake", max_tokens=50, messages=history)
    sent = fake.message_requests[-1].body["messages"]
    first = sent[0]["content"][0]["text"]
    assert first.startswith(SUMMARY_PREFIX) and run["summary"] in first
    texts = [
        block["text"]
        for m in sent
        for block in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}])
    ][1:]  # after the summary, which may well quote the summarized questions
    assert not any("Question 0" in t or "Question 1" in t for t in texts)
    assert texts[0] == "Question 2 about cipher suites"
    assert texts[-1] == "Question 5: and now?"
    assert len(sent) == 1 + 3 * 2  # summary merged into turn 2's question; turns 2-4; the new one
    turns = ops.turns(session)
    assert len(turns) == 6  # the new question recorded once, nothing replayed
    assert [t["summarized"] for t in turns] == [True, True, False, False, False, False]


def test_it_wraps_the_async_sdk_with_the_async_client(agent, fake):
    async def run():
        async with AsyncClient(agent.url, agent.key) as ops:
            session = await ops.session()
            sdk = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test", max_retries=0)
            claude = wrap(sdk, ops, session)
            fake.script(Reply.message("Async hello", usage=FOUR), Reply.message("Async stream"))
            async with ops.frame(session, goal="Async chat", budget=10_000):
                reply = await claude.messages.create(
                    model="claude-fake", max_tokens=20, messages=[_user("hello")]
                )
                history = [
                    _user("hello"),
                    {"role": "assistant", "content": reply.content},
                    _user("stream it"),
                ]
                async with claude.messages.stream(
                    model="claude-fake", max_tokens=20, messages=history
                ) as stream:
                    text = "".join([t async for t in stream.text_stream])
            assert text == "Async stream"
            await sdk.close()
            return (await ops.session_get(session)).usage_totals, await ops.turns(session)

    totals, turns = asyncio.run(run())
    assert totals["cache_read_input_tokens"] == 7 and totals["input_tokens"] == 22
    assert [t["assistant_response"] for t in turns] == ["Async hello", "Async stream"]


def test_it_refuses_to_pair_a_sync_sdk_with_the_async_client(agent, sdk):
    with pytest.raises(TypeError):
        wrap(sdk, AsyncClient(agent.url, agent.key), "session-id")


class _ProxyWithoutMessages:
    """Forwards to the live server, except ``POST /sessions/{id}/messages``: a server from
    before the conversation endpoints (404 ``not_found``, as for any unknown API path)."""

    def __init__(self, upstream):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import httpx

        proxy = self
        self.refused = 0

        class Handler(BaseHTTPRequestHandler):
            # The body leaves with the headers, not 40 ms later (Nagle's delay).
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.path.rstrip("/").endswith("/messages"):
                    proxy.refused += 1
                    status, payload = 404, b'{"error": "not_found", "detail": "No such API path."}'
                else:
                    answer = httpx.request(
                        self.command,
                        upstream + self.path,
                        content=body,
                        headers={k: v for k, v in self.headers.items() if k.lower() != "host"},
                    )
                    status, payload = answer.status_code, answer.content
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_it_falls_back_to_frame_usage_without_the_messages_endpoint(agent, sdk, fake):
    proxy = _ProxyWithoutMessages(agent.url)
    try:
        with Client(proxy.url, agent.key, retries=0) as ops:
            session = ops.session()
            claude = wrap(sdk, ops, session)
            fake.script(Reply.message("Recorded anyway", usage=FOUR))
            with ops.frame(session, goal="Old server", budget=1_000) as frame:
                claude.messages.create(model="claude-fake", max_tokens=10, messages=[_user("hi")])
                assert frame.refresh().budget["used"] == sum(FOUR.values())
            assert ops.session_get(session).usage_totals == FOUR
    finally:
        proxy.close()
    assert proxy.refused == 1


def test_it_checks_and_charges_the_pinned_frame_while_a_deeper_frame_is_active(ops, sdk, fake):
    session = ops.session()
    with ops.frame(session, goal="Pinned", budget=10_000) as pinned:
        claude = wrap(sdk, ops, session, frame=pinned)
        with ops.frame(session, goal="Deeper", budget=2_000) as deeper:
            assert ops.session_get(session).top_frame_id == deeper.id
            fake.script(Reply.message("Charged to the pinned frame", usage=FOUR))
            # more than the deeper frame has, less than the pinned one: checked on the pin
            claude.messages.create(model="claude-fake", max_tokens=5_000, messages=[_user("hi")])
            assert pinned.refresh().budget["used"] == sum(FOUR.values())
            assert deeper.refresh().budget["used"] == 0
            with pytest.raises(InsufficientTokens) as caught:
                claude.messages.create(
                    model="claude-fake", max_tokens=pinned.available + 1, messages=[_user("more")]
                )
            assert caught.value.available == pinned.available
            assert len(fake.message_requests) == 1
    assert ops.session_get(session).usage_totals == FOUR
    turns = ops.turns(session)
    assert [t["assistant_response"] for t in turns] == ["Charged to the pinned frame"]
    assert turns[0]["occupancy_tokens"] == sum(FOUR.values())  # usage sent with the messages


def test_it_refuses_a_call_on_a_closed_pinned_frame_before_sending_it(ops, sdk, fake):
    session = ops.session()
    with ops.frame(session, goal="Done already", budget=1_000) as done:
        pass
    ops.frame_push(session, goal="Still open", budget=1_000)
    claude = wrap(sdk, ops, session, frame=done)
    with pytest.raises(FrameNotActive) as caught:
        claude.messages.create(model="claude-fake", max_tokens=10, messages=[_user("hi")])
    assert caught.value.frame_status == "completed"
    assert fake.requests == []


def test_it_refuses_a_call_on_a_pinned_frame_of_another_session_before_sending_it(ops, sdk, fake):
    session, other = ops.session(), ops.session()
    with ops.frame(other, goal="Elsewhere", budget=1_000) as elsewhere:
        claude = wrap(sdk, ops, session, frame=elsewhere)
        with pytest.raises(NotFound):
            claude.messages.create(model="claude-fake", max_tokens=10, messages=[_user("hi")])
        assert elsewhere.refresh().budget["used"] == 0
    assert fake.requests == []
    assert ops.turns(session) == []


def test_it_charges_each_of_two_concurrent_sibling_frames_for_its_own_call(agent, fake):
    def charged_models(events):
        items = events["items"] if isinstance(events, dict) else events
        return {
            (e["frame_id"], e["payload"]["model"]) for e in items if e["type"] == "usage.recorded"
        }

    async def run():
        async with AsyncClient(agent.url, agent.key) as ops:
            session = await ops.session()
            sdk = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test", max_retries=0)
            claude = wrap(sdk, ops, session)
            # the calls overlap: the fake answers neither until both are in flight, both
            # frames open (should one never come, the barrier breaks after 30 s: both fail)
            both_sent = threading.Barrier(2, timeout=30)
            fake.script(
                *[Reply.held(both_sent.wait, Reply.message("Sibling reply", usage=FOUR))] * 2
            )
            both_open = asyncio.Barrier(2)
            frames = {}

            async def sibling(name, budget, stream):
                async with ops.frame(session, goal=f"Sibling {name}", budget=budget) as frame:
                    frames[name] = frame
                    await both_open.wait()
                    kwargs = dict(
                        model=f"claude-fake-{name}", max_tokens=100, messages=[_user(name)]
                    )
                    if stream:
                        async with claude.messages.stream(**kwargs) as events:
                            await events.get_final_message()
                    else:
                        await claude.messages.create(**kwargs)
                    return (await frame.refresh()).budget["used"]

            async with ops.frame(session, goal="Fan out", budget=10_000):
                used = await asyncio.gather(
                    sibling("a", 3_000, stream=False), sibling("b", 4_000, stream=True)
                )
            events = await ops.events(session)
            await sdk.close()
            return frames, used, events

    frames, used, events = asyncio.run(run())
    assert used == [sum(FOUR.values())] * 2
    assert charged_models(events) == {
        (frames["a"].id, "claude-fake-a"),
        (frames["b"].id, "claude-fake-b"),
    }
