"""A loopback OTLP/HTTP receiver of traces for the tests: it decodes each
export (protobuf, opentelemetry-proto) and keeps the spans, flattened."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers.local_server import LocalServer


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[str]
    links: list[tuple[str, str]]
    resource: dict[str, Any]
    status: int
    start_ns: int = 0
    end_ns: int = 0
    raw: bytes = field(repr=False, default=b"")


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    return getattr(v, which) if which else None


class OTLPReceiver:
    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        receiver = self
        self.spans: list[Span] = []
        self.bodies: list[bytes] = []
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with lock:
                    receiver.bodies.append(body)
                    for rs in request.resource_spans:
                        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            for s in ss.spans:
                                receiver.spans.append(
                                    Span(
                                        name=s.name,
                                        trace_id=s.trace_id.hex(),
                                        span_id=s.span_id.hex(),
                                        parent_id=s.parent_span_id.hex(),
                                        kind=s.kind,
                                        attributes={a.key: _value(a.value) for a in s.attributes},
                                        events=[e.name for e in s.events],
                                        links=[
                                            (lk.trace_id.hex(), lk.span_id.hex()) for lk in s.links
                                        ],
                                        resource=resource,
                                        status=s.status.code,
                                        start_ns=s.start_time_unix_nano,
                                        end_ns=s.end_time_unix_nano,
                                        raw=s.SerializeToString(),
                                    )
                                )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = LocalServer(Handler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def env(self) -> dict[str, str]:
        """What a process needs to export its traces here, at once."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_SERVICE_NAME": "afk-test",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }

    def named(self, prefix: str) -> list[Span]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def close(self) -> None:
        self.server.close()
