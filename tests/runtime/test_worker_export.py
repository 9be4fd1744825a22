"""``export_from_worker``: the worker processes export the spans and events of what they score
over real OTLP/HTTP, the same data the host would have exported; the host keeps the metrics,
the accounting and the spans of the evaluations it decides itself."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from opentelemetry.trace import SpanContext, TraceFlags

from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import AsyncEchoJudge, EchoJudge, ProbabilityJudge, TriggerJudge, known_probability
from .otlp_receiver import (  # noqa: F401  (the fixtures)
    OtlpReceiver,
    otlp_grpc_receiver,
    otlp_receiver,
)

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

PASSAGES = ["The tower is 330 metres tall. It opened in 1889."]
GOOD = "The tower is 330 metres tall."
BAD = "The tower is 500 metres tall."


@pytest.fixture(autouse=True)
def _otlp_env(monkeypatch: pytest.MonkeyPatch, otlp_receiver: OtlpReceiver) -> None:  # noqa: F811
    # The worker processes inherit the environment: this is their OTLP configuration.
    for name in (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        "OTEL_TRACES_EXPORTER",
        "OTEL_LOGS_EXPORTER",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.endpoint)


def _send(capgw: GroundwatchTelemetry, monitor: Any) -> SpanContext:
    with capgw.tracer.start_as_current_span("request") as request:
        monitor.record(
            question="Height?",
            contexts=PASSAGES,
            answer=GOOD,
            route="faq",
            attributes={"tenant": "acme", "retries": 2},
        )
        monitor.record(question=None, contexts=PASSAGES, answer=BAD, always_score=True)
    return request.get_span_context()


def _without_ids(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k != sc.GROUNDWATCH_RECORD_ID}


def _key(attributes: dict[str, Any]) -> str:
    return repr(sorted(attributes.items()))


def test_the_worker_process_exports_what_the_host_would_have(
    otlp_receiver: OtlpReceiver,  # noqa: F811
    capgw: GroundwatchTelemetry,
    groundwatch_telemetry: GroundwatchTelemetry,
) -> None:
    # The same records through a host-exporting monitor (providers of their own): the reference.
    reference = groundwatch_telemetry
    _send(reference, reference.monitor(EchoJudge(), executor="process"))
    reference.flush()
    expected_spans = sorted(_key(_without_ids(dict(s.attributes or {}))) for s in reference.spans())
    expected_events = sorted(_key(dict(e.log_record.attributes or {})) for e in reference.events())
    assert len(expected_spans) == 2 and len(expected_events) == 4

    monitor = capgw.monitor(EchoJudge(), executor="process", export_from_worker=True)
    request = _send(capgw, monitor)
    # force_flush returns once the worker process's exporters have sent it all: no wait.
    assert monitor.force_flush(10_000)
    spans = [s for s in otlp_receiver.spans if s.name == sc.SPAN_EVALUATION]
    assert sorted(_key(_without_ids(s.attributes)) for s in spans) == expected_spans
    assert {(s.trace_id, s.parent_span_id) for s in spans} == {(request.trace_id, request.span_id)}
    resource = dict(capgw.tracer_provider.resource.attributes)
    assert all(s.resource == resource for s in spans)
    logs = otlp_receiver.logs
    assert sorted(_key(e.attributes) for e in logs) == expected_events
    assert {e.event_name for e in logs} == {sc.EVENT_EVALUATION_RESULT}
    assert {(e.trace_id, e.span_id) for e in logs} == {(s.trace_id, s.span_id) for s in spans}
    # Nothing of it through the host's own providers; the metric points stay there.
    assert capgw.spans() == [] and capgw.events() == []
    assert capgw.metric_total(sc.METRIC_EVALUATIONS) == 2
    assert capgw.metric_total(sc.METRIC_RECORDS, **{sc.GROUNDWATCH_DECISION: "sampled"}) == 2
    assert len(capgw.metric_points(sc.METRIC_EVALUATION_SCORE)) >= 1
    # on_result callbacks still see the whole evaluation, claims included.
    assert sorted(ev.label for ev in capgw.evaluations()) == ["grounded", "hallucinated"]
    assert all(ev.claims for ev in capgw.evaluations())


def test_an_unsampled_caller_trace_is_linked_not_parented(
    otlp_receiver: OtlpReceiver,  # noqa: F811
    capgw: GroundwatchTelemetry,
) -> None:
    caller = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(0))
    monitor = capgw.monitor(EchoJudge(), executor="process", export_from_worker=True)
    monitor.record(question="q", contexts=PASSAGES, answer=GOOD, span_context=caller)
    assert monitor.force_flush(10_000)
    (span,) = otlp_receiver.spans
    assert span.trace_id != 0xABC and span.parent_span_id == 0
    assert span.links == [(0xABC, 0xDEF)]


def test_what_the_host_decides_itself_the_host_exports(
    otlp_receiver: OtlpReceiver,  # noqa: F811
    capgw: GroundwatchTelemetry,
) -> None:
    """A record past its deadline fails on the host (its process is stopped): the host
    exports that span. The stopped process exports what it held first (SIGTERM), so the
    record it scored before the stuck one is not lost with it."""
    monitor = capgw.monitor(
        TriggerJudge(),
        executor="process",
        export_from_worker=True,
        evaluation_timeout_millis=1500,
    )
    monitor.force_flush(0)  # start the worker process outside the deadline
    for answer in (GOOD, "SLOW " + GOOD, BAD):
        monitor.record(question="q", contexts=PASSAGES, answer=answer)
    assert monitor.force_flush(20_000)
    (timed_out,) = capgw.spans()
    assert (timed_out.attributes or {})[sc.ERROR_TYPE] == "timeout"
    deadline = time.monotonic() + 10
    while len(otlp_receiver.spans) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the stopped process's export arrives on its own schedule
    labels = sorted(s.attributes[sc.GROUNDWATCH_LABEL] for s in otlp_receiver.spans)
    assert labels == ["grounded", "hallucinated"]
    assert capgw.metric_total(sc.METRIC_EVALUATIONS) == 3


def test_shutdown_exports_what_the_worker_process_holds(
    otlp_receiver: OtlpReceiver,  # noqa: F811
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(EchoJudge(), executor="process", export_from_worker=True)
    for _ in range(5):
        monitor.record(question="q", contexts=PASSAGES, answer=GOOD)
    # No force_flush: the batch processor's 5 s schedule has not come, shutdown sends it.
    assert monitor.shutdown(10_000)
    assert len(otlp_receiver.spans) == 5 and len(otlp_receiver.logs) == 10


def test_content_capture_is_redacted_in_the_worker_process(
    otlp_receiver: OtlpReceiver,  # noqa: F811
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(
        EchoJudge(),
        executor="process",
        export_from_worker=True,
        capture_content=True,
        redact=str.upper,
    )
    monitor.record(question="height?", contexts=PASSAGES, answer=GOOD)
    assert monitor.force_flush(10_000)
    (span,) = otlp_receiver.spans
    assert span.attributes[sc.GROUNDWATCH_CONTENT_QUESTION] == "HEIGHT?"
    assert span.attributes[sc.GROUNDWATCH_CONTENT_ANSWER] == GOOD.upper()


def failing_providers(resource: Any) -> Any:
    raise RuntimeError("no exporter here")


@pytest.mark.parametrize(
    ("providers", "warning"),
    [
        (failing_providers, "the worker process cannot export (RuntimeError: no exporter here)"),
        (lambda resource: None, "cannot be pickled"),
    ],
    ids=["fails-in-the-worker-process", "not-picklable"],
)
def test_a_providers_function_that_cannot_work_leaves_the_export_to_the_host(
    otlp_receiver: OtlpReceiver,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    providers: Any,
    warning: str,
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(EchoJudge(), executor="process", export_from_worker=providers)
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        for _ in range(3):
            monitor.record(question="q", contexts=PASSAGES, answer=GOOD)
        assert monitor.force_flush(10_000)
    assert len(capgw.spans()) == 3 and len(capgw.events()) == 6
    assert otlp_receiver.spans == []
    assert [r for r in caplog.records if warning in r.getMessage()]


@pytest.mark.parametrize(
    ("judge", "executor"),
    [(EchoJudge(), "thread"), (AsyncEchoJudge(), "process")],
    ids=["thread-executor", "async-judge"],
)
def test_without_a_worker_process_the_host_exports_with_a_warning(
    otlp_receiver: OtlpReceiver,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    judge: Any,
    executor: str,
    capgw: GroundwatchTelemetry,
) -> None:
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        monitor = capgw.monitor(judge, executor=executor, export_from_worker=True)
    monitor.record(question="q", contexts=PASSAGES, answer=GOOD)
    capgw.flush()
    assert len(capgw.spans()) == 1 and otlp_receiver.spans == []
    assert any("needs a sync judge in a worker process" in r.getMessage() for r in caplog.records)


def test_grpc_and_a_signal_turned_off_follow_the_standard_variables(
    monkeypatch: pytest.MonkeyPatch,
    otlp_receiver: OtlpReceiver,  # noqa: F811
    otlp_grpc_receiver: OtlpReceiver,  # noqa: F811
    capgw: GroundwatchTelemetry,
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_grpc_receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "none")
    monitor = capgw.monitor(EchoJudge(), executor="process", export_from_worker=True)
    monitor.record(question="q", contexts=PASSAGES, answer=GOOD)
    assert monitor.force_flush(10_000)
    (span,) = otlp_grpc_receiver.spans
    assert span.name == sc.SPAN_EVALUATION and span.attributes[sc.GROUNDWATCH_LABEL]
    assert otlp_grpc_receiver.logs == [] and otlp_receiver.spans == []
    assert capgw.events() == []  # turned off, not handed back to the host


def test_the_worker_process_exports_the_probability_and_the_audit_mark(
    otlp_receiver: OtlpReceiver,  # noqa: F811
    capgw: GroundwatchTelemetry,
) -> None:
    judge = ProbabilityJudge()
    monitor = capgw.monitor(judge, executor="process", export_from_worker=True, audit_rate=0.5)
    answers = [f"{GOOD} Answer {i}." for i in range(40)]
    for answer in answers:
        monitor.record(question="Height?", contexts=PASSAGES, answer=answer)
    assert monitor.force_flush(10_000)
    spans = [s for s in otlp_receiver.spans if s.name == sc.SPAN_EVALUATION]
    assert len(spans) == 40 and capgw.spans() == []
    probabilities = {known_probability(a) for a in answers}
    audited = {}
    for span in spans:
        assert span.attributes[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] in probabilities
        # No trace here: the worker process keys the audit by the record id, as the host does.
        audited[span.span_id] = span.attributes.get(sc.GROUNDWATCH_AUDIT, False)
    assert 5 < sum(audited.values()) < 35
    host = monitor._telemetry
    for record, evaluation in capgw.results():
        # The host's own decision (its verdict memory, DatasetSink) matches the mark exported.
        span = next(s for s in spans if s.attributes[sc.GROUNDWATCH_RECORD_ID] == record.record_id)
        assert host.audited(record, evaluation) == audited[span.span_id]
        assert span.attributes[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] == (
            evaluation.hallucination_probability
        )
    for event in otlp_receiver.logs:
        span_audited = audited[event.span_id]
        assert event.attributes.get(sc.GROUNDWATCH_AUDIT, False) == span_audited
        assert sc.GROUNDWATCH_HALLUCINATION_PROBABILITY in event.attributes
