"""A local HTTP server that speaks enough of the Anthropic Messages API for the real SDK.

Point the official client at it (``anthropic.Anthropic(base_url=server.base_url,
api_key="test")``). It answers ``POST /v1/messages`` (JSON, or server-sent events when
the request says ``"stream": true``) and ``POST /v1/messages/count_tokens``. What each
call gets is scripted, in order; when the script runs out the ``default`` reply is used::

    with AnthropicFakeServer() as server:
        server.script(Reply.status(529), Reply.message("Summary."))
        ...
        server.requests  # every request: path, headers, parsed JSON body

Replies: ``Reply.message(text, usage=..., stop_reason=...)`` (also with
``content=[blocks]`` for tool_use / thinking blocks), ``Reply.status(code, error_type=...)``
(an Anthropic-shaped error body), ``Reply.malformed()`` (200, a JSON content type, a body
that is not JSON), ``Reply.raw(status, body, content_type)`` and ``Reply.held(gate, reply)``
(sent once ``gate()`` returns: ``threading.Barrier(2).wait`` holds two calls until both
are in flight).
"""

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Reply:
    kind: str
    http_status: int = 200
    text: str = ""
    content: list[dict] | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = "end_turn"
    body: bytes = b""
    content_type: str = "application/json"
    error_type: str = ""
    gate: Callable[[], object] | None = None
    inner: "Reply | None" = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def message(
        cls,
        text: str = "OK",
        *,
        content: list[dict] | None = None,
        usage: dict | None = None,
        stop_reason: str = "end_turn",
    ) -> "Reply":
        return cls(
            "message", text=text, content=content, usage=usage or {}, stop_reason=stop_reason
        )

    @classmethod
    def status(
        cls, code: int, error_type: str = "", message: str = "", headers: dict | None = None
    ) -> "Reply":
        kind = error_type or ERROR_TYPES.get(code, "api_error")
        body = json.dumps(
            {"type": "error", "error": {"type": kind, "message": message or f"fake {kind}"}}
        ).encode()
        return cls("raw", http_status=code, body=body, error_type=kind, headers=headers or {})

    @classmethod
    def malformed(cls) -> "Reply":
        return cls(
            "raw", http_status=200, body=b'{"id": "msg_broken", "content": [ this is not json'
        )

    @classmethod
    def raw(cls, status: int, body: bytes | str, content_type: str = "application/json") -> "Reply":
        return cls(
            "raw",
            http_status=status,
            body=body.encode() if isinstance(body, str) else body,
            content_type=content_type,
        )

    @classmethod
    def held(cls, gate: Callable[[], object], reply: "Reply") -> "Reply":
        """``reply``, once ``gate()`` has returned (an event's or a barrier's ``wait``)."""
        return cls("held", gate=gate, inner=reply)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class AnthropicFakeServer:
    """Start with ``start()`` (or as a context manager); ``base_url`` is where it listens."""

    def __init__(self, default: Reply | None = None, host: str = "127.0.0.1") -> None:
        self.default = default or Reply.message("OK")
        self.requests: list[RecordedRequest] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, *replies: Reply) -> "AnthropicFakeServer":
        with self._lock:
            self._script.extend(replies)
        return self

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()

    @property
    def message_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.split("?")[0] == "/v1/messages"]

    def start(self) -> "AnthropicFakeServer":
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="anthropic-fake",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> "AnthropicFakeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------------

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._script.popleft() if self._script else self.default

    def _message_body(self, reply: Reply, request: dict) -> dict:
        content = (
            reply.content if reply.content is not None else [{"type": "text", "text": reply.text}]
        )
        usage = {
            "input_tokens": 10,
            "output_tokens": max(1, len(reply.text.split())),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            **reply.usage,
        }
        return {
            "id": f"msg_fake_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "claude-fake"),
            "content": content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            # The body leaves with the headers, not 40 ms later (Nagle's delay).
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with server._lock:
                    server.requests.append(
                        RecordedRequest(
                            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )
                path = self.path.split("?")[0]
                if path == "/v1/messages/count_tokens":
                    text = json.dumps(body)
                    return self._send(
                        200, json.dumps({"input_tokens": max(1, len(text) // 4)}).encode()
                    )
                if path != "/v1/messages":
                    return self._send(404, Reply.status(404).body)
                reply = server._next_reply()
                while reply.kind == "held" and reply.gate is not None:
                    reply.gate()
                    reply = reply.inner or server.default
                if reply.kind == "raw":
                    return self._send(
                        reply.http_status, reply.body, reply.content_type, reply.headers
                    )
                message = server._message_body(reply, body if isinstance(body, dict) else {})
                if isinstance(body, dict) and body.get("stream"):
                    return self._stream(message)
                return self._send(200, json.dumps(message).encode())

            def _send(
                self,
                status: int,
                payload: bytes,
                content_type: str = "application/json",
                headers: dict | None = None,
            ):
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("request-id", f"req_fake_{next(server._ids):04d}")
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, message: dict):
                events = list(_sse_events(message))
                payload = b"".join(
                    f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
                )
                self._send(200, payload, "text/event-stream")

        return Handler


def _sse_events(message: dict):
    """The Messages streaming protocol: message_start, block start/deltas/stop, message_delta, message_stop."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        kind = block.get("type")
        if kind == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            words = block["text"].split(" ")
            for i, word in enumerate(words):
                chunk = word if i == 0 else " " + word
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": chunk},
                    },
                )
        elif kind == "thinking":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": block.get("thinking", "")},
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {
                        "type": "signature_delta",
                        "signature": block.get("signature", "sig"),
                    },
                },
            )
        elif kind == "tool_use":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": json.dumps(block.get("input", {})),
                    },
                },
            )
        else:
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}
