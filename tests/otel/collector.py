"""A tiny OTLP/HTTP collector for tests: takes ``POST /v1/traces`` in protobuf (gzip or
not) and keeps every span it was sent, with its attributes as plain values."""

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from frames.otel.spans import attributes_of


@dataclass
class Collected:
    name: str
    kind: int
    attributes: dict
    resource: dict
    scope: str


class Collector:
    def __init__(self) -> None:
        self.spans: list[Collected] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            # The body leaves with the headers, not 40 ms later (Nagle's delay).
            disable_nagle_algorithm = True

            def log_message(self, format, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for rs in request.resource_spans:
                    resource = attributes_of(rs.resource.attributes)
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            outer.spans.append(
                                Collected(
                                    span.name,
                                    span.kind,
                                    attributes_of(span.attributes),
                                    resource,
                                    ss.scope.name,
                                )
                            )
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def __enter__(self) -> "Collector":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def named(self, name: str) -> list[Collected]:
        return [span for span in self.spans if span.name == name]
