"""A tiny local stand-in for the Anthropic Messages API, for running the examples offline.

    with FakeModel() as model:
        claude = anthropic.Anthropic(base_url=model.base_url, api_key="fake")

It answers ``POST /v1/messages`` (JSON, or server-sent events with ``"stream": true``)
with a short, deterministic reply built from the last user message, and reports usage
the way the real API does: ``input_tokens`` about a quarter of the request's characters,
``output_tokens`` the reply's words, and the two cache fields (a cache read on every
call after the first, to show all four usage fields on the dashboard). Standard library
only.
"""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [
            b.get("text", "")
            for b in content or []
            if isinstance(b, dict) and b.get("type") == "text"
        ]
        if texts:
            return texts[-1]
    return ""


def reply_text(body: dict[str, Any]) -> str:
    """A plausible, repeatable answer: the ask's key words played back as findings."""
    ask = " ".join(_last_user_text(body).split())
    words = [w.strip(".,:;!?()\"'") for w in ask.split() if len(w) > 4][:12]
    topic = ", ".join(dict.fromkeys(w.lower() for w in words if w)) or "the question"
    return f"Noted. Key points on {topic}: the evidence is consistent, one risk needs follow-up."


class FakeModel:
    """A Messages API on ``127.0.0.1`` (a free port); ``requests`` keeps every body seen."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeModel:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def message(self, body: dict[str, Any]) -> dict[str, Any]:
        n = next(self._ids)
        text = reply_text(body)
        prompt = len(json.dumps([body.get("system", ""), body.get("messages", [])])) // 4
        cached = min(prompt // 2, 200) if n > 1 else 0
        return {
            "id": f"msg_fake_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "claude-fake",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": max(1, prompt - cached),
                "output_tokens": len(text.split()),
                "cache_creation_input_tokens": 0 if n > 1 else min(prompt, 200),
                "cache_read_input_tokens": cached,
            },
        }

    def _handler(self):
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                if path == "/v1/messages/count_tokens":
                    return self._send({"input_tokens": len(json.dumps(body)) // 4})
                if path != "/v1/messages":
                    error = {"type": "not_found_error", "message": "no such path"}
                    return self._send({"type": "error", "error": error}, status=404)
                model.requests.append(body)
                message = model.message(body)
                if body.get("stream"):
                    return self._stream(message)
                return self._send(message)

            def _send(self, data: Any, status: int = 200) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, message: dict[str, Any]) -> None:
                usage = message["usage"]
                text = message["content"][0]["text"]
                start = {
                    **message,
                    "content": [],
                    "stop_reason": None,
                    "usage": {**usage, "output_tokens": 1},
                }
                events: list[tuple[str, dict[str, Any]]] = [
                    ("message_start", {"type": "message_start", "message": start}),
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": 0,
                            "content_block": {"type": "text", "text": ""},
                        },
                    ),
                ]
                for i, word in enumerate(text.split(" ")):
                    delta = {"type": "text_delta", "text": word if i == 0 else " " + word}
                    events.append(
                        (
                            "content_block_delta",
                            {"type": "content_block_delta", "index": 0, "delta": delta},
                        )
                    )
                events += [
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": usage["output_tokens"]},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
                payload = b"".join(
                    f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
                )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


if __name__ == "__main__":
    import time

    with FakeModel(port=8099) as running:
        print(f"Fake Messages API at {running.base_url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
