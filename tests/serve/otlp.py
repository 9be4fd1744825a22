"""Building OTLP requests from real SDK spans, and posting them with the standard library."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class Reply:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def _parse(self, message: Any) -> Any:
        if self.headers.get("Content-Type", "").startswith(JSON):
            json_format.Parse(self.body, message)
        else:
            message.ParseFromString(self.body)
        return message

    def rpc_status(self) -> Status:
        """The ``google.rpc.Status`` of an error answer, in the answer's encoding."""
        return self._parse(Status())  # type: ignore[no-any-return]

    def response(self) -> ExportTraceServiceResponse:
        return self._parse(ExportTraceServiceResponse())  # type: ignore[no-any-return]


def post(
    url: str,
    body: bytes,
    content_type: str = PROTOBUF,
    *,
    encoding: str | None = None,
    path: str = "/v1/traces",
) -> Reply:
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    request = urllib.request.Request(f"{url}{path}", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return Reply(r.status, dict(r.headers), r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, dict(e.headers), e.read())


def get(url: str, path: str) -> Reply:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=10) as r:
            return Reply(r.status, dict(r.headers), r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, dict(e.headers), e.read())


def protobuf(spans: Sequence[ReadableSpan]) -> bytes:
    return bytes(encode_spans(spans).SerializeToString())


def otlp_json(spans: Sequence[ReadableSpan]) -> bytes:
    """OTLP/JSON as the specification has it: ids in hex, not protobuf's base64."""
    document = json_format.MessageToDict(encode_spans(spans))

    def hexify(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("traceId", "spanId", "parentSpanId"):
                if isinstance(node.get(key), str) and node[key]:
                    node[key] = base64.b64decode(node[key]).hex()
            for child in node.values():
                hexify(child)
        elif isinstance(node, list):
            for child in node:
                hexify(child)

    hexify(document)
    return json.dumps(document).encode()


@contextmanager
def recorded(service: str = "rag-app") -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


DOCS = [
    "The museum opens at 9am and closes at 6pm.",
    "Tickets cost 12 euros for adults.",
]
QUESTION = "When does the museum open?"
ANSWER = "The museum opens at 9am."


def openinference_trace(
    provider: TracerProvider,
    *,
    documents: Sequence[str] = DOCS,
    answer: str = ANSWER,
    extra_retriever: Mapping[str, Any] | None = None,
) -> None:
    """A trace shaped as OpenInference instrumentors emit it (chain > retriever, LLM), for
    the tests that need odd attributes no instrumentor would write."""
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span(
        "chain", attributes={"openinference.span.kind": "CHAIN", "input.value": QUESTION}
    ):
        attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": QUESTION}
        for i, text in enumerate(documents):
            attrs[f"retrieval.documents.{i}.document.content"] = text
            attrs[f"retrieval.documents.{i}.document.id"] = f"d{i}"
        attrs.update(extra_retriever or {})
        with tracer.start_as_current_span("retrieve", attributes=attrs):
            pass
        with tracer.start_as_current_span(
            "llm",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": answer,
            },
        ):
            pass
