"""gunicorn's threaded worker, answering its own refusals in the API's JSON error format.

gunicorn refuses some requests before the application sees them: a request line over
its limit (414), headers over theirs (431), a Content-Length that is not a number, a
malformed chunk or header (400). It answered those with an HTML page; an agent reading
``{"error": ..., "detail": ...}`` from every other answer got markup. The request could
not be read, so its path is unknown: every such refusal answers JSON.
"""

import json
import socket

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

CODES = {
    400: "bad_request",
    403: "permission_denied",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "headers_too_large",
    500: "internal_error",
    501: "not_implemented",
}
DETAILS = {
    414: "The request line is too long (paths and query strings up to about 4 KB).",
    431: "The request's headers are too large.",
    500: "The server failed to answer; nothing was changed.",
}


def write_json_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    detail = DETAILS.get(status_int) or f"The request could not be read: {mesg or reason}."
    body = json.dumps({"error": CODES.get(status_int, "bad_request"), "detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


class JsonErrorThreadWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn ships no types
    def init_process(self) -> None:
        util.write_error = write_json_error  # what gunicorn's handle_error writes with
        super().init_process()
