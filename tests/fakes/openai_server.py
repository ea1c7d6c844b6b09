"""A local HTTP server that speaks enough of the OpenAI API for the real SDK.

Point the official client at it (``openai.OpenAI(base_url=server.base_url, api_key="test")``;
``base_url`` ends in ``/v1``). It answers ``POST /v1/chat/completions`` (JSON, or
server-sent chunks ending in ``data: [DONE]`` when the request says ``"stream": true``,
with a final usage-only chunk when ``stream_options.include_usage`` is true) and
``POST /v1/responses`` (JSON, or the Responses event stream ending in
``response.completed``). What each call gets is scripted, in order; when the script runs
out the ``default`` reply is used::

    with OpenAIFakeServer() as server:
        server.script(Reply.status(500), Reply.message("Hello", usage={...}))
        ...
        server.requests  # every request: method, path, headers, parsed JSON body

Replies: ``Reply.message(text, tool_calls=[{"id", "name", "arguments"}], usage=...,
reasoning=...)``, where ``usage`` takes ``prompt_tokens``, ``completion_tokens`` and
``cached_tokens`` (for Responses they become ``input_tokens``, ``output_tokens`` and
``input_tokens_details.cached_tokens``); ``Reply.status(code, error_type=...)`` (an
OpenAI-shaped error body, ``retry-after-ms: 1`` so the SDK's retries are quick);
``Reply.raw(status, body, content_type)`` and ``Reply.held(gate, reply)``
(sent once ``gate()`` returns: ``threading.Barrier(2).wait`` holds two calls until both
are in flight).
"""

import itertools
import json
import threading
import time
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
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}
CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"


@dataclass
class Reply:
    kind: str
    http_status: int = 200
    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    reasoning: str = ""
    finish_reason: str = ""
    body: bytes = b""
    content_type: str = "application/json"
    gate: Callable[[], object] | None = None
    inner: "Reply | None" = None

    @classmethod
    def message(
        cls,
        text: str = "OK",
        *,
        tool_calls: list[dict] | None = None,
        usage: dict[str, int] | None = None,
        reasoning: str = "",
        finish_reason: str = "",
    ) -> "Reply":
        return cls(
            "message",
            text=text,
            tool_calls=list(tool_calls or []),
            usage=usage or {},
            reasoning=reasoning,
            finish_reason=finish_reason or ("tool_calls" if tool_calls else "stop"),
        )

    @classmethod
    def status(cls, code: int, error_type: str = "", message: str = "") -> "Reply":
        kind = error_type or ERROR_TYPES.get(code, "server_error")
        body = json.dumps(
            {
                "error": {
                    "message": message or f"fake {kind}",
                    "type": kind,
                    "param": None,
                    "code": kind,
                }
            }
        ).encode()
        return cls("raw", http_status=code, body=body)

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

    def figures(self) -> tuple[int, int, int]:
        """(prompt tokens, cached among them, completion tokens)."""
        prompt = int(self.usage.get("prompt_tokens", 20))
        cached = int(self.usage.get("cached_tokens", 0))
        completion = int(self.usage.get("completion_tokens", max(1, len(self.text.split()))))
        return prompt, cached, completion


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class OpenAIFakeServer:
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
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> "OpenAIFakeServer":
        with self._lock:
            self._script.extend(replies)
        return self

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.split("?")[0] == CHAT_PATH]

    @property
    def responses_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.split("?")[0] == RESPONSES_PATH]

    def start(self) -> "OpenAIFakeServer":
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-fake",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> "OpenAIFakeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------------

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._script.popleft() if self._script else self.default

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):04d}"

    def _completion(self, reply: Reply, request: dict) -> dict:
        prompt, cached, completion = reply.figures()
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text or None,
            "refusal": None,
            "annotations": [],
        }
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for call in reply.tool_calls
            ]
        return {
            "id": self._next_id("chatcmpl-fake"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "gpt-fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
            },
            "system_fingerprint": "fp_fake",
        }

    def _response(self, reply: Reply, request: dict) -> dict:
        prompt, cached, completion = reply.figures()
        output: list[dict] = []
        if reply.reasoning:
            output.append(
                {
                    "id": self._next_id("rs_fake"),
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": reply.reasoning}],
                }
            )
        if reply.text:
            output.append(
                {
                    "id": self._next_id("msg_fake"),
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            )
        for call in reply.tool_calls:
            output.append(
                {
                    "id": self._next_id("fc_fake"),
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["name"],
                    "arguments": call["arguments"],
                    "status": "completed",
                }
            )
        return {
            "id": self._next_id("resp_fake"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": request.get("model", "gpt-fake"),
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": request.get("tools", []),
            "previous_response_id": request.get("previous_response_id"),
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            },
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
                if path not in (CHAT_PATH, RESPONSES_PATH):
                    return self._send(404, Reply.status(404).body)
                request = body if isinstance(body, dict) else {}
                reply = server._next_reply()
                while reply.kind == "held" and reply.gate is not None:
                    reply.gate()
                    reply = reply.inner or server.default
                if reply.kind == "raw":
                    return self._send(reply.http_status, reply.body, reply.content_type)
                if path == CHAT_PATH:
                    completion = server._completion(reply, request)
                    if request.get("stream"):
                        include = bool((request.get("stream_options") or {}).get("include_usage"))
                        return self._stream(_chat_chunks(completion, include), named=False)
                    return self._send(200, json.dumps(completion).encode())
                response = server._response(reply, request)
                if request.get("stream"):
                    return self._stream(_response_events(response), named=True)
                return self._send(200, json.dumps(response).encode())

            def _send(self, status: int, payload: bytes, content_type: str = "application/json"):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("x-request-id", server._next_id("req_fake"))
                if status >= 400:
                    self.send_header("retry-after-ms", "1")
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, events, *, named: bool):
                parts = []
                for event in events:
                    if event == "[DONE]":
                        parts.append(b"data: [DONE]\n\n")
                    elif named:
                        parts.append(
                            f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
                        )
                    else:
                        parts.append(f"data: {json.dumps(event)}\n\n".encode())
                self._send(200, b"".join(parts), "text/event-stream")

        return Handler


def _chat_chunks(completion: dict, include_usage: bool):
    """Chat Completions streaming: role, content word by word, tool calls (name, then the
    arguments in pieces), the finish reason, the usage-only chunk when asked, ``[DONE]``."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
        "system_fingerprint": completion["system_fingerprint"],
    }
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict, finish_reason=None) -> dict:
        return {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
            **extra,
        }

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    words = (message["content"] or "").split(" ") if message["content"] else []
    for i, word in enumerate(words):
        yield chunk({"content": word if i == 0 else " " + word})
    for index, call in enumerate(message.get("tool_calls") or []):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, finish_reason=choice["finish_reason"])
    if include_usage:
        yield {**base, "choices": [], "usage": completion["usage"]}
    yield "[DONE]"


def _response_events(response: dict):
    """The Responses event stream: created, in_progress, each output item added, its
    deltas and done, then completed with the whole response."""
    seq = itertools.count(0)
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "sequence_number": next(seq), "response": pending}
    yield {"type": "response.in_progress", "sequence_number": next(seq), "response": pending}
    for index, item in enumerate(response["output"]):
        common = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            yield {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": index,
                "item": {**item, "status": "in_progress", "content": []},
            }
            part = {"type": "output_text", "text": "", "annotations": []}
            yield {
                "type": "response.content_part.added",
                "sequence_number": next(seq),
                "content_index": 0,
                "part": part,
                **common,
            }
            text = item["content"][0]["text"]
            for i, word in enumerate(text.split(" ")):
                yield {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "content_index": 0,
                    "delta": word if i == 0 else " " + word,
                    "logprobs": [],
                    **common,
                }
            yield {
                "type": "response.output_text.done",
                "sequence_number": next(seq),
                "content_index": 0,
                "text": text,
                "logprobs": [],
                **common,
            }
            yield {
                "type": "response.content_part.done",
                "sequence_number": next(seq),
                "content_index": 0,
                "part": item["content"][0],
                **common,
            }
        elif item["type"] == "function_call":
            yield {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": index,
                "item": {**item, "status": "in_progress", "arguments": ""},
            }
            yield {
                "type": "response.function_call_arguments.delta",
                "sequence_number": next(seq),
                "delta": item["arguments"],
                **common,
            }
            yield {
                "type": "response.function_call_arguments.done",
                "sequence_number": next(seq),
                "arguments": item["arguments"],
                "name": item["name"],
                **common,
            }
        else:
            yield {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": index,
                "item": item,
            }
        yield {
            "type": "response.output_item.done",
            "sequence_number": next(seq),
            "output_index": index,
            "item": item,
        }
    yield {"type": "response.completed", "sequence_number": next(seq), "response": response}
