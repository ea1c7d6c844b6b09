"""A local HTTP server speaking the embeddings APIs of OpenAI and Voyage.

``POST {base_url}/embeddings`` with ``{"model", "input": [...]}`` (Voyage's also carries
``input_type``) answers ``{"data": [{"object": "embedding", "index": i, "embedding":
[...]}], "model", "usage"}``, the rows in reverse order (as the APIs allow: clients
must read ``index``). Each vector is the text's words hashed into ``dim`` buckets, so a
test can compute the expected vector itself (``expected``).

What each call gets is scripted, in order (``script(...)``), then the default answer:
``Answer.ok()``, ``Answer.status(code)``, ``Answer.raw(body)``, ``Answer.hang()`` (no
answer until the server stops: the client's timeout must end the call).
"""

import hashlib
import json
import re
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORD = re.compile(r"\w+")


def expected(text: str, dim: int) -> list[float]:
    """The vector the server answers for ``text`` (not normalized)."""
    vector = [0.0] * dim
    for word in WORD.findall(text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += 1.0 if digest[4] % 2 else -1.0
    return vector


@dataclass
class Answer:
    kind: str = "ok"
    status_code: int = 200
    body: bytes = b""

    @classmethod
    def ok(cls) -> "Answer":
        return cls()

    @classmethod
    def status(cls, code: int) -> "Answer":
        return cls("status", code, json.dumps({"error": {"message": f"status {code}"}}).encode())

    @classmethod
    def raw(cls, body: bytes, code: int = 200) -> "Answer":
        return cls("raw", code, body)

    @classmethod
    def hang(cls) -> "Answer":
        return cls("hang")


class EmbeddingsServer:
    def __init__(self, dim: int = 32) -> None:
        self.dim = dim
        self.requests: list[dict[str, Any]] = []
        self._script: deque[Answer] = deque()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            # The body leaves with the headers, not 40 ms later (Nagle's delay).
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                answer = server._script.popleft() if server._script else Answer.ok()
                if answer.kind == "hang":
                    server._stop.wait(30)
                    return
                if answer.kind in ("status", "raw"):
                    return self._send(answer.status_code, answer.body)
                if not self.path.endswith("/embeddings"):
                    return self._send(404, b'{"error": "not found"}')
                rows = [
                    {"object": "embedding", "index": i, "embedding": expected(text, server.dim)}
                    for i, text in enumerate(body["input"])
                ]
                payload = {
                    "object": "list",
                    "data": list(reversed(rows)),
                    "model": body.get("model"),
                    "usage": {"total_tokens": sum(len(t.split()) for t in body["input"])},
                }
                self._send(200, json.dumps(payload).encode())

            def _send(self, code: int, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def script(self, *answers: Answer) -> None:
        self._script.extend(answers)

    def __enter__(self) -> "EmbeddingsServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
