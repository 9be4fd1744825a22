"""OTLP/HTTP trace requests in, light span records out.

Bodies are decoded with the official ``opentelemetry-proto`` messages (protobuf's upb runtime
parses them in C). Only what assembly and extraction read is copied out of each span: ids,
name, times, the attributes whose keys the extractors know (:data:`KEPT_PREFIXES`) and the
events they read; the rest of the message is dropped with the request, so a pending span costs
a few hundred bytes, not the whole request's arena.

The OTLP specification (https://opentelemetry.io/docs/specs/otlp/#otlphttp) fixes the details
followed here: protobuf or JSON bodies, optional gzip, ids hex-encoded in JSON (not base64 as
protobuf's JSON mapping would have them), ``partial_success`` for rejected spans.
"""

from __future__ import annotations

import base64
import json
import sys
import zlib
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ..telemetry import semconv as sc

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CONTENT_TYPES = {PROTOBUF: PROTOBUF, "application/protobuf": PROTOBUF, JSON: JSON}

KEPT_PREFIXES: tuple[str, ...] = (
    "openinference.span.kind",
    "input.",
    "output.",
    "retrieval.documents.",
    "llm.output_messages.",
    "llm.input_messages.",
    "gen_ai.",
    "traceloop.",
    "llm.request.type",
    "tool.name",
    "session.id",
    "error.type",
    sc.GROUNDWATCH_ROUTE,
)
"""Attribute keys the extractors read (OpenInference, OpenLLMetry, GenAI conventions)."""
STATUS_ERROR = "otel.status_code"
"""Set to ``ERROR`` among a kept span's attributes when its status is an error (the name
OpenTelemetry gives the status where it is written as an attribute): a failed tool call's span
is not context."""
KEPT_EVENT_PREFIXES: tuple[str, ...] = ("gen_ai.", "db.query.result")
"""Span events the extractors read: GenAI content events and OpenLLMetry's vector-store
results (``db.query.result`` with ``db.query.result.document``)."""

SERVICE_NAME = "service.name"
EVENT_NAME = "event.name"
"""Where log records name their event when the ``event_name`` field is unset (older SDKs)."""
GENAI_LOG_EVENTS = frozenset({"gen_ai.user.message", "gen_ai.choice"})
"""The GenAI content events read from log records: the question and the answer. The others
(``gen_ai.system.message``: the prompt, documents included; tool and assistant messages) are
counted ``ignored`` and not kept."""


class BodyError(ValueError):
    """A request body that cannot be read; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class SpanData:
    """What serve keeps of one received span."""

    __slots__ = (
        "attributes",
        "end_ns",
        "events",
        "flags",
        "name",
        "parent_id",
        "route",
        "service",
        "span_id",
        "start_ns",
        "trace_id",
    )

    def __init__(
        self,
        trace_id: bytes,
        span_id: bytes,
        parent_id: bytes,
        name: str,
        start_ns: int,
        end_ns: int,
        attributes: dict[str, Any],
        events: list[tuple[str, dict[str, Any]]],
        service: str | None,
        flags: int = 0,
        route: str | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.attributes = attributes
        self.events = events
        self.service = service
        self.flags = flags
        self.route = route

    def __repr__(self) -> str:
        return f"SpanData({self.name!r}, span_id={self.span_id.hex()})"


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` decoded from its ``Content-Encoding``, never more than ``limit`` bytes."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise BodyError(415, f"unsupported Content-Encoding {encoding!r} (gzip is supported)")
    # wbits 47 reads gzip and zlib headers alike; max_length stops a gzip bomb at the cap.
    inflater = zlib.decompressobj(47)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BodyError(400, f"body is not valid {encoding}: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise BodyError(413, f"decompressed body exceeds {limit} bytes")
    if not inflater.eof:
        raise BodyError(400, f"truncated {encoding} body")
    return out


def _hex_ids_to_base64(node: Any) -> None:
    """OTLP/JSON carries ids as hex; protobuf's JSON mapping expects base64 for bytes."""
    if isinstance(node, dict):
        for key in ("traceId", "spanId", "parentSpanId"):
            value = node.get(key)
            if isinstance(value, str) and value:
                try:
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    raise BodyError(400, f"{key} {value!r} is not hex") from None
        for child in node.values():
            if isinstance(child, (dict, list)):
                _hex_ids_to_base64(child)
    elif isinstance(node, list):
        for child in node:
            _hex_ids_to_base64(child)


def parse_request(
    body: bytes, content_type: str, request: Message | None = None
) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest`` (or the empty ``request`` given, filled) from a
    decompressed body, or :class:`BodyError` (400)."""
    if request is None:
        request = ExportTraceServiceRequest()
    kind = type(request).__name__
    if content_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise BodyError(400, f"undecodable protobuf {kind}: {exc}") from None
        return request
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyError(400, f"undecodable JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BodyError(400, f"JSON body must be an {kind} object")
    _hex_ids_to_base64(document)
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise BodyError(400, f"JSON is not an {kind}: {exc}") from None
    return request


def response_body(content_type: str, rejected: int, message: str, *, logs: bool = False) -> bytes:
    """The ``ExportTraceServiceResponse`` (``ExportLogsServiceResponse`` with ``logs``),
    ``partial_success`` set when spans (log records) were rejected."""
    response: Any = ExportLogsServiceResponse() if logs else ExportTraceServiceResponse()
    if rejected or message:
        if logs:
            response.partial_success.rejected_log_records = rejected
        else:
            response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    if content_type == JSON:
        return str(json_format.MessageToJson(response, indent=None)).encode()
    return bytes(response.SerializeToString())


# The gRPC code a Status carries for each HTTP error serve answers with.
_GRPC_CODES = {400: 3, 401: 16, 404: 12, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}


def status_body(content_type: str, http_status: int, message: str) -> bytes:
    """The body of an error answer: a ``google.rpc.Status`` in the request's encoding (OTLP:
    "the response body for all HTTP 4xx and HTTP 5xx responses MUST be a ... Status message"),
    protobuf when the request's encoding is unknown."""
    status = Status(code=_GRPC_CODES.get(http_status, 2), message=message)
    if content_type == JSON:
        return str(json_format.MessageToJson(status, indent=None)).encode()
    return bytes(status.SerializeToString())


def any_value(value: AnyValue) -> Any:
    """A Python value of an OTLP ``AnyValue`` (lists and maps converted recursively)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value
    return None


def _kept(attributes: Iterable[Any], extra: str | None) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for kv in attributes:
        key = kv.key
        if key.startswith(KEPT_PREFIXES) or key == extra:
            # Interned: every span repeats the same few keys; pending traces share one copy.
            kept[sys.intern(key)] = any_value(kv.value)
    return kept


def is_own_scope(scope_name: str) -> bool:
    """Spans of groundwatch's own tracer: our evaluation spans, sent back by a Collector."""
    return scope_name == sc.INSTRUMENTATION_NAME


class Decoded:
    """The spans of one request, sorted into what assembly takes and what it does not."""

    __slots__ = ("own", "rejected", "rejected_reason", "spans")

    def __init__(self) -> None:
        self.spans: list[SpanData] = []
        self.own = 0
        self.rejected = 0
        self.rejected_reason = ""


def spans_of(request: ExportTraceServiceRequest, route_attribute: str | None = None) -> Decoded:
    """Copy out what serve needs of every span in ``request``.

    A span with an invalid trace or span id is rejected (counted, reported in the response);
    our own evaluation spans are counted and left out (loop protection: a Collector that sends
    its traces to serve and to a backend sends ours back to us too).
    """
    out = Decoded()
    for resource_spans in request.resource_spans:
        service = None
        resource_route = None
        for kv in resource_spans.resource.attributes:
            if kv.key == SERVICE_NAME:
                service = kv.value.string_value or None
            elif route_attribute is not None and kv.key == route_attribute:
                resource_route = any_value(kv.value)
        for scope_spans in resource_spans.scope_spans:
            if is_own_scope(scope_spans.scope.name):
                out.own += len(scope_spans.spans)
                continue
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id, span.span_id
                if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id):
                    out.rejected += 1
                    out.rejected_reason = "span with an invalid trace_id or span_id"
                    continue
                if span.name == sc.SPAN_EVALUATION:
                    out.own += 1
                    continue
                attributes = _kept(span.attributes, route_attribute)
                events = [
                    (
                        event.name,
                        # The content events carry it under plain keys (content, message).
                        {kv.key: any_value(kv.value) for kv in event.attributes}
                        if event.name in GENAI_LOG_EVENTS
                        else _kept(event.attributes, None),
                    )
                    for event in span.events
                    if event.name.startswith(KEPT_EVENT_PREFIXES)
                ]
                if span.status.code == span.status.STATUS_CODE_ERROR:
                    attributes[STATUS_ERROR] = "ERROR"
                route = attributes.pop(route_attribute, None) if route_attribute else None
                if route is None:
                    route = resource_route
                out.spans.append(
                    SpanData(
                        trace_id,
                        span_id,
                        span.parent_span_id,
                        span.name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        attributes,
                        events,
                        service,
                        span.flags,
                        None if route is None else str(route),
                    )
                )
    return out


class LogEvent:
    """A GenAI content event received as a log record, held for the span it belongs to."""

    __slots__ = ("attributes", "name", "route", "service", "span_id", "trace_id")

    parent_id = b"log"
    """Never a trace's root: the intake decides on it as on a child span."""

    def __init__(
        self,
        trace_id: bytes,
        span_id: bytes,
        name: str,
        attributes: dict[str, Any],
        service: str | None,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.name = name
        self.attributes = attributes
        self.service = service
        self.route: str | None = None


class DecodedLogs:
    """The log records of one request: the GenAI events kept, and counts of the others."""

    __slots__ = ("events", "ignored", "own", "rejected", "rejected_reason")

    def __init__(self) -> None:
        self.events: list[LogEvent] = []
        self.ignored = 0
        self.own = 0
        self.rejected = 0
        self.rejected_reason = ""


def log_events_of(request: ExportLogsServiceRequest) -> DecodedLogs:
    """The GenAI content events (:data:`GENAI_LOG_EVENTS`) of ``request``, each with its body
    (a map, as the GenAI conventions have it) merged over its attributes, so the extractors
    read it as they read the same event recorded on the span.

    Our own evaluation events are counted ``own`` and left out (loop protection), a GenAI event
    with no valid trace and span id is rejected (reported in the partial success), any other
    record is ``ignored``.
    """
    out = DecodedLogs()
    for resource_logs in request.resource_logs:
        service = None
        for kv in resource_logs.resource.attributes:
            if kv.key == SERVICE_NAME:
                service = kv.value.string_value or None
        for scope_logs in resource_logs.scope_logs:
            if is_own_scope(scope_logs.scope.name):
                out.own += len(scope_logs.log_records)
                continue
            for record in scope_logs.log_records:
                name = record.event_name
                if not name:
                    name = next(
                        (kv.value.string_value for kv in record.attributes if kv.key == EVENT_NAME),
                        "",
                    )
                if name not in GENAI_LOG_EVENTS:
                    out.ignored += 1
                    continue
                trace_id, span_id = record.trace_id, record.span_id
                if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id):
                    out.rejected += 1
                    out.rejected_reason = "GenAI event without a valid trace_id and span_id"
                    continue
                attributes = {kv.key: any_value(kv.value) for kv in record.attributes}
                body = any_value(record.body) if record.HasField("body") else None
                if isinstance(body, dict):
                    attributes.update(body)
                elif body is not None:
                    attributes["content"] = body
                out.events.append(
                    LogEvent(trace_id, span_id, sys.intern(name), attributes, service)
                )
    return out
