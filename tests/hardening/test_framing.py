"""Bad framing against a production gunicorn (contextops/gunicorn_conf.py): every refusal
in the API's JSON error format, and bodies sent in chunks read like any other.

Sent over raw sockets, as a client or an attacker would: a chunked JSON body (read, 201),
a chunked body over the size limit (413), a request line over 4 KB (414), headers over
gunicorn's limit (431), a Content-Length that is not a number (400). Before, the chunked
body was read as empty (422 "body: Field required"), 10 MB of chunks answered 422, and
gunicorn's refusals were HTML pages.
"""

import http.client
import json
import socket

import pytest

from tests.hardening.production import ProductionServer

pytestmark = pytest.mark.xdist_group("live")


@pytest.fixture
def server(production_web):
    return production_web


def _exchange(web: ProductionServer, raw: bytes) -> tuple[int, dict, dict]:
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as sock:
        try:
            sock.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before reading it all
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        body = answer.read()
        headers = {k.lower(): v for k, v in answer.getheaders()}
    return answer.status, headers, json.loads(body) if body else {}


def _request(web, method: str, path: str, headers: dict, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{web.port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _chunks(data: bytes, size: int = 4096) -> bytes:
    parts = [data[i : i + size] for i in range(0, len(data), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def _post_session_in_chunks(web, body: bytes, size: int) -> tuple[int, dict]:
    """``POST /api/v1/sessions`` with ``body`` sent in chunks of ``size`` bytes."""
    headers = {
        "Authorization": f"Bearer {web.keys['Acme/framer']}",
        "Content-Type": "application/json",
        "Transfer-Encoding": "chunked",
    }
    raw = _request(web, "POST", "/api/v1/sessions", headers, _chunks(body, size))
    status, _, answer = _exchange(web, raw)
    return status, answer


def test_a_chunked_json_body_is_read(server):
    status, answer = _post_session_in_chunks(
        server, json.dumps({"title": "Sent in chunks"}).encode(), 7
    )
    assert status == 201, answer
    assert answer["title"] == "Sent in chunks"


def test_a_chunked_body_over_the_limit_is_refused_with_413(server):
    body = b'{"title": "' + b"x" * (3 * 1024 * 1024) + b'"}'
    status, answer = _post_session_in_chunks(server, body, 65536)
    assert status == 413 and answer["error"] == "too_large", answer


@pytest.mark.parametrize(
    ("what", "raw", "status", "code"),
    [
        ("a path over 4 KB", ("GET", "/api/v1/sessions/" + "a" * 5000, {}), 414, "uri_too_long"),
        ("huge headers", ("GET", "/api/v1/sessions", {"X-Big": "b" * 9000}), 431, None),
        (
            "a bad Content-Length",
            ("POST", "/api/v1/sessions", {"Content-Length": "ten"}),
            400,
            None,
        ),
    ],
)
def test_requests_gunicorn_refuses_answer_in_json(server, what, raw, status, code):
    method, path, headers = raw
    answered, headers_back, body = _exchange(server, _request(server, method, path, headers))
    assert answered in ({status, 400} if code is None else {status}), (what, answered, body)
    assert headers_back["content-type"] == "application/json", what
    assert set(body) == {"error", "detail"} and body["detail"], body
    if code:
        assert body["error"] == code


def test_a_server_that_leaves_chunks_to_the_application_gets_411(api):
    """The development server does not end a chunked stream for the application: rather
    than read a body of unknown end, the API asks for a Content-Length."""
    answer = api.client.post(
        "/api/v1/sessions",
        data=b'{"title": "chunks"}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
        HTTP_TRANSFER_ENCODING="chunked",
    )
    assert answer.status_code == 411
    assert answer.json()["error"] == "length_required"
