"""An answer lost on the way back: the request reached the real server and was done.

A relay between the client and the live server passes every request on, but drops the
first answer and closes the connection, as a proxy timing out or a network fault would.
Every write the client sends carries an Idempotency-Key, the same on each retry, so any
write is sent again and done once. A client made with ``idempotency_keys=False`` sends
none: a usage record or a message append carrying the model call's message id is still
sent again and done once, any other POST is not repeated, since the server may have done
it (and here did).
"""

import asyncio
import socket
import threading
from urllib.parse import urlsplit

import pytest
from contextops_client import AsyncClient, Client, ConnectionFailed

from contextops.models import IdempotencyKey
from frames.conversation.models import Turn
from frames.models import Frame, Usage
from frames.rlm.models import RlmState

pytestmark = pytest.mark.django_db(transaction=True)


def _hang_up(*sockets: socket.socket) -> None:
    # shutdown wakes a recv blocked in another thread, which close alone does not; the
    # other side may have hung up first.
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


class AnswerDroppingRelay:
    """Relays TCP to ``upstream``; on the first connection it swallows the answer."""

    def __init__(self, upstream: str):
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            drop = self.connections == 1
            threading.Thread(target=self._relay, args=(client, drop), daemon=True).start()

    def _relay(self, client: socket.socket, drop: bool):
        server = socket.create_connection(self.upstream)
        threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()
        if drop:
            server.recv(65536)  # the server answered: it has done the work
            self.dropped += 1
            _hang_up(client, server)
            return
        self._pipe(server, client)

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket):
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            _hang_up(source, target)

    def close(self):
        self.listener.close()


@pytest.fixture
def frame(agent):
    with Client(agent.url, agent.key) as direct:
        session = direct.session_create(identity={"user_name": "Ada"})
        return direct.frame_push(session, goal="Answer", budget=100_000)


@pytest.fixture
def relay(live_server):
    relay = AnswerDroppingRelay(live_server.url)
    yield relay
    relay.close()


def test_a_usage_record_whose_answer_was_lost_is_sent_again_and_charged_once(agent, frame, relay):
    with Client(relay.url, agent.key, retries=2, backoff=0.01) as ops:
        after = ops.usage_record(
            frame, input_tokens=900, output_tokens=100, message_id="msg_01LostAnswer"
        )
    assert relay.dropped == 1 and relay.connections == 2  # sent twice
    assert after.budget["used"] == 1_000  # charged once
    assert Usage.objects.filter(message_id="msg_01LostAnswer").count() == 1


def test_a_post_without_an_idempotency_mark_is_not_repeated(agent, frame, relay):
    with Client(relay.url, agent.key, retries=2, backoff=0.01, idempotency_keys=False) as ops:
        with pytest.raises(ConnectionFailed):
            ops.usage_record(frame, input_tokens=900, output_tokens=100)
    assert relay.connections == 1
    with Client(agent.url, agent.key) as direct:
        assert direct.frame_get(frame).budget["used"] == 1_000  # it was done, once


def test_messages_whose_answer_was_lost_are_sent_again_and_appended_once(agent, frame, relay):
    usage = {"input_tokens": 50, "output_tokens": 7, "message_id": "msg_01LostTurn"}
    messages = [
        {"role": "user", "content": "What changed in the release?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Two fixes."}]},
    ]
    with Client(relay.url, agent.key, retries=2, backoff=0.01) as ops:
        answer = ops.messages_append(frame.session_id, messages, usage=usage, frame=frame)
    assert relay.dropped == 1 and relay.connections == 2
    assert answer["messages"] == 2 and [t["index"] for t in answer["turns"]] == [0]
    assert Turn.objects.filter(session_id=frame.session_id).count() == 1
    assert Usage.objects.filter(message_id="msg_01LostTurn").count() == 1


def test_a_frame_push_whose_answer_was_lost_is_sent_again_and_pushed_once(agent, frame, relay):
    with Client(relay.url, agent.key, retries=2, backoff=0.01) as ops:
        child = ops.frame_push(frame.session_id, goal="Look it up", budget=2_000, parent=frame)
    assert relay.dropped == 1 and relay.connections == 2  # sent twice
    assert Frame.objects.filter(session_id=frame.session_id).count() == 2  # root and one child
    assert child.parent_frame_id == frame.id and child.budget["total"] == 2_000
    stored = IdempotencyKey.objects.filter(path=f"/api/v1/sessions/{frame.session_id}/frames")
    answered = [bytes(s.body) for s in stored if str(child.id).encode() in bytes(s.body)]
    assert len(answered) == 1  # the retry got the stored first answer


def test_a_usage_record_without_a_message_id_is_now_sent_again_and_charged_once(
    agent, frame, relay
):
    with Client(relay.url, agent.key, retries=2, backoff=0.01) as ops:
        after = ops.usage_record(frame, input_tokens=900, output_tokens=100)
    assert relay.connections == 2 and after.budget["used"] == 1_000


def test_the_async_client_retries_any_write_after_a_lost_answer(agent, frame, relay):
    async def run():
        async with AsyncClient(relay.url, agent.key, retries=2, backoff=0.01) as ops:
            return await ops.rlm_state_create("What changed?", session=frame.session_id)

    state = asyncio.run(run())
    assert relay.connections == 2
    assert RlmState.objects.filter(session_id=frame.session_id).count() == 1
    assert state["state_id"]
