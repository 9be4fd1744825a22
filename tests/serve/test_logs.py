"""GenAI content sent as OTLP log records (``POST /v1/logs``): the ``gen_ai.user.message`` and
``gen_ai.choice`` events an instrumentation emits in its LLM span's context (the OpenTelemetry
contrib GenAI instrumentations' event mode: no content on the span) are joined to that span by
trace and span id, through the SDK's real OTLP/HTTP log and span exporters."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .conftest import RunningReceiver, wait_for_evaluations
from .otlp import ANSWER, DOCS, QUESTION, get


@contextmanager
def app(endpoint: str) -> Iterator[tuple[TracerProvider, LoggerProvider, InMemorySpanExporter]]:
    resource = Resource.create({"service.name": "rag-app"})
    exported = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exported))
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs"))
    )
    yield tracer_provider, logger_provider, exported
    tracer_provider.shutdown()
    logger_provider.shutdown()


def rag_with_content_in_events(
    tracer_provider: TracerProvider, logger_provider: LoggerProvider, answer: str = ANSWER
) -> None:
    """A retriever span (OpenInference) and a chat span shaped as the contrib OpenAI
    instrumentation writes it in event mode: operation and model on the span, the user message
    and the choice as log events in the span's context (so the logs leave first)."""
    tracer = tracer_provider.get_tracer("app")
    logger = logger_provider.get_logger("opentelemetry.instrumentation.openai_v2")
    with tracer.start_as_current_span("rag"):
        attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": QUESTION}
        for i, text in enumerate(DOCS):
            attrs[f"retrieval.documents.{i}.document.content"] = text
        with tracer.start_as_current_span("retrieve", attributes=attrs):
            pass
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
        }
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes=chat):
            logger.emit(
                event_name="gen_ai.system.message",
                body={"content": "Answer from the context:\n" + "\n".join(DOCS)},
                attributes={"gen_ai.system": "openai"},
            )
            logger.emit(
                event_name="gen_ai.user.message",
                body={"content": QUESTION},
                attributes={"gen_ai.system": "openai"},
            )
            logger.emit(
                event_name="gen_ai.choice",
                body={
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": answer},
                },
                attributes={"gen_ai.system": "openai"},
            )


def test_answer_and_question_from_genai_log_events_are_scored_in_the_trace(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    with app(receiver.url) as (tracer_provider, logger_provider, exported):
        rag_with_content_in_events(tracer_provider, logger_provider)
        root = next(s for s in exported.get_finished_spans() if s.parent is None)
    (span,) = wait_for_evaluations(capgw, 1)
    assert span.context.trace_id == root.context.trace_id
    assert span.parent.span_id == root.context.span_id
    ((record, evaluation),) = capgw.results()
    assert (record.question, record.answer) == (QUESTION, ANSWER)
    assert [p.text for p in record.contexts] == DOCS
    expected = gw.evaluate(ANSWER, DOCS, question=QUESTION)
    assert (evaluation.label, evaluation.groundedness) == (expected.label, expected.groundedness)
    assert span.attributes[sc.GROUNDWATCH_SERVE_SOURCE] == "openinference"
    health = json.loads(get(receiver.url, "/health").body)
    # The system message (the prompt with the documents again) is not kept.
    assert health["log_records"] == {"accepted": 2, "ignored": 1}


def test_log_events_of_unsampled_late_and_unknown_traces_are_counted(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(0.0))
    with app(receiver.url) as (tracer_provider, logger_provider, _):
        rag_with_content_in_events(tracer_provider, logger_provider)
        # A GenAI event outside any span: no trace to join.
        logger_provider.get_logger("x").emit(
            event_name="gen_ai.choice", body={"message": {"content": "orphan"}}
        )
    health = json.loads(get(receiver.url, "/health").body)
    assert health["log_records"] == {"not_sampled": 2, "ignored": 1, "rejected": 1}
    assert health["traces"] == {"not_sampled": 1}
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="not_sampled") == 1


@pytest.mark.parametrize("path", ["/v1/metrics"])
def test_metrics_are_refused_with_a_clear_otlp_status(
    make_receiver: Callable[..., RunningReceiver], path: str
) -> None:
    from .otlp import PROTOBUF, post

    receiver = make_receiver()
    reply = post(receiver.url, b"", PROTOBUF, path=path)
    assert reply.status == 404
    assert reply.rpc_status().code == 12  # UNIMPLEMENTED
    assert "receives traces and logs only" in reply.rpc_status().message


def test_otlp_json_logs_with_gzip_and_partial_success(
    make_receiver: Callable[..., RunningReceiver],
) -> None:
    import gzip

    from .otlp import JSON, post

    receiver = make_receiver()
    record = {
        "eventName": "gen_ai.choice",
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "body": {"kvlistValue": {"values": [{"key": "index", "value": {"intValue": "0"}}]}},
    }
    broken = {"eventName": "gen_ai.user.message", "traceId": "", "spanId": ""}
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": [record, broken]}]}]}
    reply = post(
        receiver.url, gzip.compress(json.dumps(document).encode()), JSON, encoding="gzip",
        path="/v1/logs",
    )  # fmt: skip
    assert reply.status == 200
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    response = reply._parse(ExportLogsServiceResponse())
    assert response.partial_success.rejected_log_records == 1
    assert "trace_id" in response.partial_success.error_message
    assert post(receiver.url, b"\xff" * 10, path="/v1/logs").status == 400
    health = json.loads(get(receiver.url, "/health").body)
    assert health["log_records"] == {"accepted": 1, "rejected": 1}
    assert health["pending_traces"] == 1


def test_the_same_events_recorded_on_the_span_are_read(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    with app(receiver.url) as (tracer_provider, _, _):
        tracer = tracer_provider.get_tracer("app")
        with tracer.start_as_current_span("rag"):
            attrs = {"openinference.span.kind": "RETRIEVER"}
            attrs.update(
                {f"retrieval.documents.{i}.document.content": t for i, t in enumerate(DOCS)}
            )
            with tracer.start_as_current_span("retrieve", attributes=attrs):
                pass
            with tracer.start_as_current_span(
                "chat", attributes={"gen_ai.operation.name": "chat"}
            ) as chat:
                chat.add_event("gen_ai.user.message", {"content": QUESTION})
                chat.add_event(
                    "gen_ai.choice", {"index": 0, "message": json.dumps({"content": ANSWER})}
                )
    wait_for_evaluations(capgw, 1)
    ((record, _),) = capgw.results()
    assert (record.question, record.answer) == (QUESTION, ANSWER)
