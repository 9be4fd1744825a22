"""A local OTLP/HTTP endpoint that decodes what it receives (the official protobuf messages),
for telemetry that leaves another process: ``export_from_worker``'s worker processes."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
logs_service = pytest.importorskip("opentelemetry.proto.collector.logs.v1.logs_service_pb2")
metrics_service = pytest.importorskip(
    "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2"
)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


@dataclass
class ReceivedSpan:
    name: str
    trace_id: int
    span_id: int
    parent_span_id: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    links: list[tuple[int, int]]


@dataclass
class ReceivedLog:
    event_name: str
    trace_id: int
    span_id: int
    attributes: dict[str, Any]
    resource: dict[str, Any]


@dataclass
class ReceivedPoint:
    """One data point of a sum (a counter's value as exported)."""

    name: str
    attributes: dict[str, Any]
    value: float


@dataclass
class OtlpReceiver:
    """What arrived, decoded; ``endpoint`` is the base URL for ``OTEL_EXPORTER_OTLP_ENDPOINT``.
    A path in ``refuse`` (``/v1/logs``) is answered 400 and nothing of it is kept."""

    endpoint: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    logs: list[ReceivedLog] = field(default_factory=list)
    metric_exports: list[list[ReceivedPoint]] = field(default_factory=list)
    """The sums' points of each metrics export, in arrival order."""
    refuse: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, body: bytes, path: str) -> None:
        if path == "/v1/metrics":
            metrics_request = metrics_service.ExportMetricsServiceRequest.FromString(body)
            points = [
                ReceivedPoint(
                    m.name,
                    _attributes(p.attributes),
                    p.as_double if p.WhichOneof("value") == "as_double" else p.as_int,
                )
                for rm in metrics_request.resource_metrics
                for sm in rm.scope_metrics
                for m in sm.metrics
                if m.WhichOneof("data") == "sum"
                for p in m.sum.data_points
            ]
            with self.lock:
                self.metric_exports.append(points)
        elif path == "/v1/traces":
            request = trace_service.ExportTraceServiceRequest.FromString(body)
            with self.lock:
                for rs in request.resource_spans:
                    resource = _attributes(rs.resource.attributes)
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            self.spans.append(
                                ReceivedSpan(
                                    s.name,
                                    int.from_bytes(s.trace_id, "big"),
                                    int.from_bytes(s.span_id, "big"),
                                    int.from_bytes(s.parent_span_id, "big"),
                                    _attributes(s.attributes),
                                    resource,
                                    s.status.code,
                                    [
                                        (
                                            int.from_bytes(link.trace_id, "big"),
                                            int.from_bytes(link.span_id, "big"),
                                        )
                                        for link in s.links
                                    ],
                                )
                            )
        elif path == "/v1/logs":
            request = logs_service.ExportLogsServiceRequest.FromString(body)
            with self.lock:
                for rl in request.resource_logs:
                    resource = _attributes(rl.resource.attributes)
                    for sl in rl.scope_logs:
                        for r in sl.log_records:
                            self.logs.append(
                                ReceivedLog(
                                    r.event_name,
                                    int.from_bytes(r.trace_id, "big"),
                                    int.from_bytes(r.span_id, "big"),
                                    _attributes(r.attributes),
                                    resource,
                                )
                            )


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path in receiver.refuse:
                self.send_response(400)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            receiver.take(body, self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    receiver.endpoint = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield receiver
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def otlp_grpc_receiver() -> Iterator[OtlpReceiver]:
    """The same over OTLP/gRPC: ``TraceService/Export`` and ``LogsService/Export`` taken as raw
    protobuf bytes (the same messages as the HTTP bodies)."""
    grpc = pytest.importorskip("grpc")
    receiver = OtlpReceiver()

    def handler(path: str) -> Any:
        def export(body: bytes, context: Any) -> bytes:
            receiver.take(body, path)
            return b""  # an empty Export*ServiceResponse

        return grpc.unary_unary_rpc_method_handler(export)

    services = [
        grpc.method_handlers_generic_handler(
            f"opentelemetry.proto.collector.{signal}.v1.{service}", {"Export": handler(path)}
        )
        for signal, service, path in (
            ("trace", "TraceService", "/v1/traces"),
            ("logs", "LogsService", "/v1/logs"),
        )
    ]
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(max_workers=2), handlers=services)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.endpoint = f"http://127.0.0.1:{port}"
    yield receiver
    server.stop(grace=None)
