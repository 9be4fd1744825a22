"""``Monitor.feedback``: the event lands in the answer's trace, the counter carries the judge's
label beside the person's, and what the monitor never scored or has forgotten is ``unknown``.

Real SDK providers with in-memory exporters (``capgw``), the embedded local judge.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.trace import SpanContext, TraceFlags

from groundwatch import Monitor, RatioSampler
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

CONTEXT = "The Model X battery lasts 12 hours. Charging takes 90 minutes."
GOOD = "The battery lasts 12 hours."
BAD = "The warranty covers it for ten years and it ships from Berlin."


def _feedback_events(capgw: GroundwatchTelemetry) -> list[Any]:
    return [
        r
        for r in capgw.events()
        if (r.log_record.attributes or {}).get(sc.GROUNDWATCH_FEEDBACK_SOURCE) is not None
    ]


def _feedback_points(capgw: GroundwatchTelemetry) -> dict[tuple[Any, ...], float]:
    return {
        (
            attrs.get(sc.GROUNDWATCH_LABEL),
            attrs.get(sc.GROUNDWATCH_FEEDBACK_LABEL),
            attrs.get(sc.GROUNDWATCH_ROUTE),
            attrs.get(sc.ERROR_TYPE),
        ): value
        for attrs, value in capgw.metric_points(sc.METRIC_FEEDBACK)
        if value
    }


def _answer(capgw: GroundwatchTelemetry, monitor: Any, answer: str, route: str) -> SpanContext:
    """One request: the app's span, the answer recorded inside it; its span context."""
    with capgw.tracer.start_as_current_span("rag request") as span:
        monitor.record(question="Battery?", contexts=[CONTEXT], answer=answer, route=route)
        return span.get_span_context()


def test_feedback_lands_in_the_answers_trace_beside_the_judges_label(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(sampler=RatioSampler(1.0))
    bad = _answer(capgw, monitor, BAD, "faq")
    good = _answer(capgw, monitor, GOOD, "faq")
    capgw.flush()
    labels = {s.context.trace_id: s.attributes[sc.GROUNDWATCH_LABEL] for s in capgw.spans()}
    assert labels == {bad.trace_id: "hallucinated", good.trace_id: "grounded"}

    # The app has the trace id from the request: as 32 hex digits, as the int, as a context.
    monitor.feedback(label="hallucinated", trace_id=format(bad.trace_id, "032x"), score=0.0)
    monitor.feedback(label="hallucinated", trace_id=good.trace_id, comment="wrong")
    monitor.feedback(label="faithful", span_context=good)

    events = _feedback_events(capgw)
    assert len(events) == 3
    by_trace: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        record = event.log_record
        assert record.event_name == sc.EVENT_EVALUATION_RESULT
        by_trace.setdefault(record.trace_id, []).append(dict(record.attributes or {}))
        # In the answer's trace, on the answer's span (where the judge's own events point).
        assert record.span_id in (bad.span_id, good.span_id)
    first = by_trace[bad.trace_id][0]
    assert first[sc.GEN_AI_EVALUATION_NAME] == "groundedness"
    assert first[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "hallucinated"
    assert first[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.0
    assert first[sc.GEN_AI_EVALUATION_EVALUATOR_TYPE] == "human"
    assert first[sc.GROUNDWATCH_FEEDBACK_SOURCE] == "human"
    assert first[sc.GROUNDWATCH_LABEL] == "hallucinated"
    # Content capture is off: the person's words stay out.
    assert all(sc.GEN_AI_EVALUATION_EXPLANATION not in a for a in by_trace[good.trace_id])
    assert sorted(a[sc.GEN_AI_EVALUATION_SCORE_LABEL] for a in by_trace[good.trace_id]) == [
        "grounded",
        "hallucinated",
    ]

    points = _feedback_points(capgw)
    assert points == {
        ("hallucinated", "hallucinated", "faq", None): 1,
        ("grounded", "hallucinated", "faq", None): 1,
        ("grounded", "grounded", "faq", None): 1,
    }


def test_unknown_and_forgotten_traces_count_as_unknown(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(sampler=RatioSampler(1.0), feedback_memory=2, route="faq")
    first = _answer(capgw, monitor, BAD, "faq")
    capgw.flush()
    later = [_answer(capgw, monitor, GOOD, "faq") for _ in range(2)]
    capgw.flush()
    # The memory holds 2 verdicts: the first trace is forgotten; a stranger never scored.
    monitor.feedback(label="hallucinated", trace_id=first.trace_id)
    monitor.feedback(label="hallucinated", trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    monitor.feedback(label="grounded", trace_id=later[1].trace_id)
    assert _feedback_points(capgw) == {
        ("unknown", "hallucinated", "faq", None): 2,
        ("grounded", "grounded", "faq", None): 1,
    }
    stranger = [
        e
        for e in _feedback_events(capgw)
        if e.log_record.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    ]
    (event,) = stranger
    assert event.log_record.attributes[sc.GROUNDWATCH_LABEL] == "unknown"
    # Once feedback is in use, each scored route's label pairs exist at 0 (increase() sees
    # the first feedback of a pair).
    zeros = [
        attrs
        for attrs, value in capgw.metric_points(sc.METRIC_FEEDBACK)
        if value == 0 and attrs.get(sc.GROUNDWATCH_ROUTE) == "faq"
    ]
    assert {(a[sc.GROUNDWATCH_LABEL], a[sc.GROUNDWATCH_FEEDBACK_LABEL]) for a in zeros} >= {
        ("hallucinated", "grounded"),
        ("hallucinated", "hallucinated"),
    }


def test_no_feedback_no_series(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(sampler=RatioSampler(1.0))
    _answer(capgw, monitor, GOOD, "faq")
    assert capgw.metric_points(sc.METRIC_FEEDBACK) == []


def test_bad_arguments_are_counted_never_raised(
    capgw: GroundwatchTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    monitor = capgw.monitor(sampler=RatioSampler(1.0))
    caplog.set_level(logging.WARNING, logger="groundwatch")
    calls: list[dict[str, Any]] = [
        {"trace_id": 1},  # no label
        {"label": "meh", "trace_id": 1},
        {"label": "grounded"},  # no trace
        {"label": "grounded", "trace_id": "xyz"},
        {"label": "grounded", "trace_id": "0" * 32},
        {"label": "grounded", "trace_id": 1 << 128},
        {"label": "grounded", "trace_id": 1.5},
        {"label": "grounded", "trace_id": 1, "score": float("nan")},
        {"label": "grounded", "trace_id": 1, "comment": 3},
        {"label": "grounded", "span_context": "0af7651916cd43dd8448eb211c80319c"},
        {"label": "grounded", "trace_id": 1, "nonsense": True},
    ]
    for kwargs in calls:
        monitor.feedback(**kwargs)
    monitor.feedback("grounded")  # type: ignore[misc]
    assert _feedback_points(capgw) == {(None, None, None, "invalid_input"): len(calls) + 1}
    assert _feedback_events(capgw) == []
    assert "invalid input to Monitor.feedback" in caplog.text


def test_comment_with_content_capture_goes_through_redact(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(
        sampler=RatioSampler(1.0),
        capture_content=True,
        redact=lambda text: text.replace("alice@example.com", "<email>"),
    )
    ctx = _answer(capgw, monitor, BAD, "faq")
    capgw.flush()
    monitor.feedback(label="unfaithful", span_context=ctx, comment="alice@example.com says no")
    (event,) = _feedback_events(capgw)
    attrs = event.log_record.attributes
    assert attrs[sc.GEN_AI_EVALUATION_EXPLANATION] == "<email> says no"
    assert attrs[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "hallucinated"


def test_another_source_is_not_marked_human(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(sampler=RatioSampler(1.0))
    monitor.feedback(label="grounded", trace_id=7, source="support-review", name="faithfulness")
    (event,) = _feedback_events(capgw)
    attrs = event.log_record.attributes
    assert attrs[sc.GROUNDWATCH_FEEDBACK_SOURCE] == "support-review"
    assert attrs[sc.GEN_AI_EVALUATION_NAME] == "faithfulness"
    assert sc.GEN_AI_EVALUATION_EVALUATOR_TYPE not in attrs
    assert event.log_record.trace_id == 7


class _SlowExporter(LogRecordExporter):
    """A log exporter that takes its time, as a remote one over a slow network does."""

    def __init__(self) -> None:
        self.exported = 0
        self.threads: set[str] = set()

    def export(self, batch: Any) -> LogRecordExportResult:
        self.threads.add(threading.current_thread().name)
        time.sleep(0.05)
        self.exported += len(batch)
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


def test_a_slow_log_exporter_never_holds_up_the_caller(capgw: GroundwatchTelemetry) -> None:
    exporter = _SlowExporter()
    logs = LoggerProvider(shutdown_on_exit=False)
    logs.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    monitor = Monitor(
        sampler=RatioSampler(1.0),
        meter_provider=capgw.meter_provider,
        tracer_provider=capgw.tracer_provider,
        logger_provider=logs,
        executor="thread",
        shutdown_on_exit=False,
    )
    start = time.perf_counter()
    for i in range(20):
        monitor.feedback(label="hallucinated", trace_id=i + 1)
    took = time.perf_counter() - start
    # 20 exports of 50 ms each are a second; the caller's 20 calls are not.
    assert took < 0.5, took
    assert monitor.force_flush(10_000)
    assert exporter.exported == 20
    assert exporter.threads == {"groundwatch-feedback"}
    monitor.shutdown()
    logs.shutdown()


def test_shutdown_emits_what_is_queued_and_later_feedback_is_counted(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(sampler=RatioSampler(1.0))
    monitor.feedback(label="hallucinated", trace_id=5)
    assert monitor.shutdown(5_000)
    assert len(_feedback_events(capgw)) == 1
    monitor.feedback(label="hallucinated", trace_id=6)  # after shutdown: counted, not emitted
    points = _feedback_points(capgw)
    assert points[("unknown", "hallucinated", None, None)] == 1
    assert points[(None, None, None, "shutdown")] == 1
    assert len(_feedback_events(capgw)) == 1


def test_verdict_memory_is_bounded_to_ids_and_labels() -> None:
    from groundwatch.runtime.feedback import Verdict, VerdictMemory

    memory = VerdictMemory(3)
    for trace in range(1, 11):
        memory.remember(trace, Verdict("grounded", "faq", trace * 10, 1, "local", 0.25))
    assert len(memory) == 3
    assert memory.recall(1) is None
    assert memory.recall(10) == Verdict("grounded", "faq", 100, 1, "local", 0.25, False)
    # A trace scored again moves to the newest end with its newest label.
    memory.remember(8, Verdict("hallucinated", "faq", 80, 1, "local", 0.9, True))
    memory.remember(11, Verdict("grounded", "faq", 110, 1))
    assert memory.recall(8) == Verdict("hallucinated", "faq", 80, 1, "local", 0.9, True)
    assert memory.recall(9) is None
    # An audited trace's label counts once; the mark goes with the trace when it is forgotten.
    assert memory.first_label(8) and not memory.first_label(8)
    for trace in range(20, 23):
        memory.remember(trace, Verdict("grounded", "faq", 1, 1))
    assert memory.recall(8) is None and 8 not in memory._labelled
    assert TraceFlags(1).sampled
