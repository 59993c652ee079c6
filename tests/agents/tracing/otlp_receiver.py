"""A real OTLP/HTTP receiver on 127.0.0.1 that decodes the protobuf the OTLP tracers post.

The `receiver` fixture is in conftest.py; tests import the types from here.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


@dataclass
class ReceivedSpan:
    """One span as it arrived: ids in hex, attributes decoded to Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status_code: int
    status_message: str
    attributes: dict[str, object]
    resource: dict[str, object]


@dataclass
class Export:
    """One POST: its path, its headers (lower-cased names) and the spans it carried."""

    path: str
    headers: dict[str, str]
    spans: list[ReceivedSpan]


@dataclass
class OTLPReceiver:
    """Collects every export posted to `url`."""

    url: str = ""
    exports: list[Export] = field(default_factory=list)

    def spans(self) -> list[ReceivedSpan]:
        return [span for export in self.exports for span in export.spans]

    def named(self, name: str) -> list[ReceivedSpan]:
        return [span for span in self.spans() if span.name == name]

    def one(self, name: str) -> ReceivedSpan:
        (span,) = self.named(name)
        return span


def decode(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [decode(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def attributes(pairs: Iterable[KeyValue]) -> dict[str, object]:
    return {pair.key: decode(pair.value) for pair in pairs}


def parse(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        status_code=span.status.code,
                        status_message=span.status.message,
                        attributes=attributes(span.attributes),
                        resource=resource,
                    )
                )
    return spans


@contextmanager
def serve() -> Iterator[OTLPReceiver]:
    """Run a receiver on a free port of 127.0.0.1 until the block ends."""
    collected = OTLPReceiver()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            export = Export(
                path=self.path,
                headers={name.lower(): value for name, value in self.headers.items()},
                spans=parse(body),
            )
            with lock:
                collected.exports.append(export)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep test output quiet

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    collected.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield collected
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
