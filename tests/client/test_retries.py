"""Retries against real sockets: a closed port, and a tiny server that answers as scripted."""

import asyncio
import json
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from contextops_client import (
    AsyncClient,
    Client,
    ConnectionFailed,
    NotFound,
    RateLimited,
    ServerError,
    Unavailable,
)


class ScriptedServer:
    """Answers each request with the next ``(status, body, headers)`` of the script, then 200."""

    def __init__(self, *script):
        self.script = deque(script)
        self.requests: list[tuple[str, str]] = []
        self.idempotency_keys: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            # The body leaves with the headers, not 40 ms later (Nagle's delay).
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                server.requests.append((self.command, self.path))
                server.idempotency_keys.append(self.headers.get("Idempotency-Key"))
                status, body, headers = (
                    server.script.popleft() if server.script else (200, {"status": "ok"}, {})
                )
                if status == "hang":
                    time.sleep(body)
                    status, body, headers = 200, {"status": "late"}, {}
                payload = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            do_GET = do_POST = do_PUT = do_DELETE = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    servers = []

    def make(*script):
        server = ScriptedServer(*script)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


UNAVAILABLE = (503, {"error": "unavailable", "detail": "Redis is down."}, {})


def test_it_retries_a_503_with_backoff_and_then_succeeds(scripted):
    server = scripted(UNAVAILABLE, UNAVAILABLE)
    ops = Client(server.url, "key", retries=3, backoff=0.05)
    started = time.monotonic()
    assert ops.health() == {"status": "ok"}
    assert len(server.requests) == 3
    assert time.monotonic() - started >= 0.05 * 0.9 + 0.1 * 0.9  # waited 0.05 then 0.1


def test_it_retries_a_post_answered_503(scripted):
    server = scripted(UNAVAILABLE)
    ops = Client(server.url, "key", retries=2, backoff=0.01)
    assert ops.request("POST", "/sessions", json={}) == {"status": "ok"}
    assert server.requests == [("POST", "/api/v1/sessions")] * 2


GATEWAY_TIMEOUT = (504, {"error": "error", "detail": "upstream timed out"}, {})
BAD_GATEWAY = (502, {"error": "error", "detail": "upstream closed"}, {})


def test_a_proxys_502_or_504_is_retried_only_for_requests_the_server_applies_once(scripted):
    server = scripted(GATEWAY_TIMEOUT, BAD_GATEWAY, GATEWAY_TIMEOUT)
    # Without Idempotency-Keys, a POST is applied once only when it says so (message_id).
    ops = Client(server.url, "key", retries=3, backoff=0.01, idempotency_keys=False)
    with pytest.raises(ServerError) as caught:  # the server may have done it
        ops.request("POST", "/sessions", json={})
    assert caught.value.status == 504 and len(server.requests) == 1
    assert ops.health() == {"status": "ok"}  # a GET: 502 then 504, then the answer
    assert len(server.requests) == 4
    server.script.extend([BAD_GATEWAY])
    ops.usage_record("f-1", input_tokens=1, output_tokens=1, message_id="msg_1")
    assert server.requests[-2:] == [("POST", "/api/v1/frames/f-1/usage")] * 2


def test_it_raises_unavailable_when_the_retries_run_out(scripted):
    server = scripted(UNAVAILABLE, UNAVAILABLE, UNAVAILABLE)
    ops = Client(server.url, "key", retries=2, backoff=0.01)
    with pytest.raises(Unavailable) as caught:
        ops.health()
    assert caught.value.status == 503 and caught.value.detail == "Redis is down."
    assert len(server.requests) == 3


def test_it_does_not_retry_other_errors(scripted):
    server = scripted(
        (500, {"error": "internal_error", "detail": "boom"}, {}),
        (404, {"error": "not_found", "detail": "Not found."}, {}),
    )
    ops = Client(server.url, "key", retries=3, backoff=0.01)
    with pytest.raises(ServerError):
        ops.health()
    with pytest.raises(NotFound):
        ops.health()
    assert len(server.requests) == 2


def test_it_honours_retry_after_on_429_unless_told_not_to(scripted):
    limited = (429, {"error": "rate_limited", "detail": "slow down"}, {"Retry-After": "0.2"})
    server = scripted(limited)
    ops = Client(server.url, "key", retries=2, backoff=0.01)
    started = time.monotonic()
    assert ops.health() == {"status": "ok"}
    assert time.monotonic() - started >= 0.2
    server = scripted(limited)
    strict = Client(server.url, "key", retries=2, backoff=0.01, retry_on_rate_limit=False)
    with pytest.raises(RateLimited):
        strict.health()
    assert len(server.requests) == 1


def test_it_raises_connection_failed_on_a_closed_port_after_its_retries():
    ops = Client(f"http://127.0.0.1:{_closed_port()}", "key", retries=2, backoff=0.05)
    started = time.monotonic()
    with pytest.raises(ConnectionFailed) as caught:
        ops.health()
    assert time.monotonic() - started >= (0.05 + 0.1) * 0.9  # two waits: it did retry
    assert caught.value.status is None and caught.value.code == "connection_error"


def test_it_does_not_repeat_a_post_whose_answer_timed_out(scripted):
    server = scripted(("hang", 1.0, {}))
    ops = Client(server.url, "key", retries=3, backoff=0.01, timeout=0.3, idempotency_keys=False)
    with pytest.raises(ConnectionFailed):
        ops.request("POST", "/sessions", json={})
    assert len(server.requests) == 1


def test_every_write_carries_one_idempotency_key_and_is_retried_with_it(scripted):
    server = scripted(GATEWAY_TIMEOUT, BAD_GATEWAY, ("hang", 1.0, {}))
    ops = Client(server.url, "key", retries=3, backoff=0.01, timeout=0.3)
    assert ops.request("POST", "/sessions", json={}) == {"status": "ok"}
    assert server.requests == [("POST", "/api/v1/sessions")] * 4  # 504, 502, a lost answer
    first = server.idempotency_keys[0]
    assert first and server.idempotency_keys == [first] * 4  # one key for the one write
    ops.working_set_put("s-1", "plan", "draft")
    ops.working_set_delete("s-1", "plan")
    ops.health()
    keys = server.idempotency_keys[4:]
    assert keys[0] and keys[1] and len({first, keys[0], keys[1]}) == 3 and keys[2] is None


def test_a_write_still_running_under_its_key_is_asked_again(scripted):
    in_use = (409, {"error": "idempotency_key_in_use", "detail": "running"}, {"Retry-After": "0"})
    server = scripted(in_use, in_use)
    ops = Client(server.url, "key", retries=3, backoff=0.01)
    assert ops.request("POST", "/facts", json={"key": "a"}) == {"status": "ok"}
    assert len(server.requests) == 3 and len(set(server.idempotency_keys)) == 1


def test_it_retries_in_the_async_client_too(scripted):
    server = scripted(UNAVAILABLE)

    async def run():
        async with AsyncClient(server.url, "key", retries=2, backoff=0.01) as ops:
            return await ops.health()

    assert asyncio.run(run()) == {"status": "ok"}
    assert len(server.requests) == 2
