"""Helpers for users' own test suites: pytest fixtures and assertions.

Import in a ``conftest.py``::

    from groundwatch.testing import *  # noqa: F403

The runtime fixture ``capgw`` (alias ``groundwatch_telemetry``) wires fresh OpenTelemetry SDK
providers to in-memory exporters and builds monitors on them; its accessors flush every monitor
first, so a test can record and assert at once::

    def test_my_chain_is_monitored(capgw):
        monitor = capgw.monitor(judge=MyFastJudge())
        my_rag_function("What is X?", monitor=monitor)
        (record, evaluation), = capgw.results()
        assert evaluation.label == "grounded"
        assert capgw.metric_total("groundwatch.records", groundwatch__decision="sampled") == 1
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from .monitor import Monitor
from .telemetry import semconv
from .types import Evaluation, RagRecord

__all__: list[str] = ["GroundwatchTelemetry"]

try:  # the fixtures need pytest; the rest of this module does not
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

# --- in-memory telemetry fixture (runtime) -------------------------------------------------------


class GroundwatchTelemetry:
    """Fresh SDK providers with in-memory exporters, and monitors built on them.

    Attributes:
        tracer_provider, meter_provider, logger_provider: the providers (not the global ones).
        span_exporter, metric_reader, log_exporter: where the telemetry lands.
        tracer: a tracer of ``tracer_provider``, to open the spans a test's "request" runs in.
    """

    def __init__(self) -> None:
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.metric_reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(
            metric_readers=[self.metric_reader], shutdown_on_exit=False
        )
        self.log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        self.logger_provider = LoggerProvider(shutdown_on_exit=False)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))
        self.tracer: Tracer = self.tracer_provider.get_tracer("groundwatch.testing")
        self.monitors: list[Monitor] = []
        self._results: list[tuple[RagRecord, Evaluation]] = []

    def monitor(self, judge: Any = None, sampler: Any = None, **kwargs: Any) -> Monitor:
        """A :class:`Monitor` on this fixture's providers, shut down when the test ends.

        ``on_result`` callbacks given here run after the fixture's own, which collects
        :meth:`results`. Defaults differ from production in two ways: no ``atexit`` hook, and
        ``executor="thread"`` (no worker process to start per test; pass
        ``executor="process"`` to test that path).
        """
        callbacks = kwargs.pop("on_result", None)
        extra = [] if callbacks is None else [callbacks] if callable(callbacks) else callbacks
        kwargs.setdefault("shutdown_on_exit", False)
        kwargs.setdefault("executor", "thread")
        monitor = Monitor(
            judge,
            sampler,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            logger_provider=self.logger_provider,
            on_result=[self._collect, *extra],
            **kwargs,
        )
        self.monitors.append(monitor)
        return monitor

    def _collect(self, record: RagRecord, evaluation: Evaluation) -> None:
        self._results.append((record, evaluation))

    def flush(self, timeout_millis: int = 10_000) -> None:
        """Wait for every monitor's queue to be scored and emitted.

        Raises:
            AssertionError: a monitor did not finish within ``timeout_millis``.
        """
        for monitor in self.monitors:
            if not monitor.force_flush(timeout_millis):
                raise AssertionError(f"groundwatch monitor did not flush in {timeout_millis} ms")

    def results(self) -> list[tuple[RagRecord, Evaluation]]:
        """``(record, evaluation)`` of every scored record, in completion order (flushes)."""
        self.flush()
        return list(self._results)

    def evaluations(self) -> list[Evaluation]:
        return [evaluation for _, evaluation in self.results()]

    def spans(self, name: str | None = semconv.SPAN_EVALUATION) -> list[ReadableSpan]:
        """Finished spans, ``groundwatch.evaluation`` ones by default (flushes)."""
        self.flush()
        spans = self.span_exporter.get_finished_spans()
        return [s for s in spans if name is None or s.name == name]

    def events(self, name: str | None = semconv.EVENT_EVALUATION_RESULT) -> list[ReadableLogRecord]:
        """Emitted log records, ``gen_ai.evaluation.result`` events by default (flushes)."""
        self.flush()
        logs = self.log_exporter.get_finished_logs()
        return [r for r in logs if name is None or r.log_record.event_name == name]

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, value)`` of each data point of metric ``name``; a histogram's value is
        its data point (``.count``, ``.sum``, ``.bucket_counts``, ``.explicit_bounds``)."""
        self.flush()
        return [(attrs, value) for attrs, value in self._points(name)]

    def metric_total(self, name: str, **attributes: str) -> float:
        """Sum of a counter's points whose attributes include ``attributes`` (dots spelled as
        double underscores: ``groundwatch__decision="sampled"``)."""
        want = {k.replace("__", "."): v for k, v in attributes.items()}
        total = 0.0
        for attrs, value in self.metric_points(name):
            if all(attrs.get(k) == v for k, v in want.items()):
                total += value
        return total

    def _points(self, name: str) -> Iterator[tuple[dict[str, Any], Any]]:
        data = self.metric_reader.get_metrics_data()
        if data is None:
            return
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        value = getattr(point, "value", point)
                        yield dict(point.attributes or {}), value

    def close(self) -> None:
        """Shut down the monitors, then the providers."""
        for monitor in self.monitors:
            monitor.shutdown(5_000)
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
        self.logger_provider.shutdown()


def _fixture() -> Iterator[GroundwatchTelemetry]:
    telemetry = GroundwatchTelemetry()
    try:
        yield telemetry
    finally:
        telemetry.close()


if pytest is not None:
    capgw = pytest.fixture(_fixture, name="capgw")
    groundwatch_telemetry = pytest.fixture(_fixture, name="groundwatch_telemetry")
    __all__ += ["capgw", "groundwatch_telemetry"]

# --- assertions (offline gate) -------------------------------------------------------------------
