"""A local HTTP receiver for notifications: records every POST (headers and body) and
answers what it is scripted to (``500`` first, then ``200``, say)."""

import json
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


class Receiver:
    def __init__(self, *statuses: int) -> None:
        self.statuses = deque(statuses)
        self.received: list[Received] = []
        self.answers: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            # The body leaves with the headers, not 40 ms later (Nagle's delay).
            disable_nagle_algorithm = True

            def log_message(self, format, *args):  # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.received.append(Received(self.path, dict(self.headers.items()), body))
                status = outer.statuses.popleft() if outer.statuses else 200
                outer.answers.append(status)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> "Receiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[str]:
        """The ``event`` of each JSON body received (webhooks), in order."""
        return [r.json().get("event") for r in self.received]
