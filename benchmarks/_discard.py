"""The OpenTelemetry SDK set up as in production, with nothing leaving the process: batch
processors for spans and log records in front of exporters that drop what they get. Shared by
the benchmarks, so each measures the SDK's real per-record work and nothing of an exporter's.
Also a judge that does nothing, for what the runtime costs without any judging (importable by
name, so a worker process can unpickle it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class InstantJudge:
    """Answers at once with no claims: what the worker costs the host without any judging."""

    name = "instant"

    def judge(self, answer: str, contexts: Any, question: str | None = None) -> Any:
        from groundwatch import Judgement, Usage

        return Judgement(claims=[], model=None, usage=Usage())


class BusyJudge(InstantJudge):
    """Takes ``ms`` of CPU per answer (a loop on the clock) and finds no claims: a judge's CPU
    use without its allocations. ``sleep=True``: the same time asleep, using no CPU."""

    name = "busy"

    def __init__(self, ms: float, sleep: bool = False) -> None:
        self.ms, self.sleep = ms, sleep

    def judge(self, answer: str, contexts: Any, question: str | None = None) -> Any:
        import time

        if self.sleep:
            time.sleep(self.ms / 1000)
        else:
            start = time.perf_counter()
            while time.perf_counter() - start < self.ms / 1000:
                pass
        return super().judge(answer, contexts, question)


class DiscardSpans(SpanExporter):
    """Drops every span (and counts them)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


class DiscardLogs(LogRecordExporter):
    """Drops every log record."""

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def discarding_providers(**kwargs: Any) -> dict[str, Any]:
    """``tracer_provider`` and ``logger_provider`` for ``gw.Monitor(**...)``: the SDK's, each
    with a batch processor and a discarding exporter (``kwargs`` go to both providers)."""
    tracer_provider = TracerProvider(**kwargs)
    tracer_provider.add_span_processor(BatchSpanProcessor(DiscardSpans()))
    logger_provider = LoggerProvider(**kwargs)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(DiscardLogs()))
    return {"tracer_provider": tracer_provider, "logger_provider": logger_provider}


def discarding_worker_providers(resource_attributes: Mapping[str, Any]) -> tuple[Any, Any]:
    """``Monitor(export_from_worker=...)``'s providers function: the same SDK set-up as
    :func:`discarding_providers`, built in each worker process (module-level, so it pickles)."""
    from opentelemetry.sdk.resources import Resource

    providers = discarding_providers(resource=Resource(dict(resource_attributes)))
    return providers["tracer_provider"], providers["logger_provider"]


def without_pacing(monitor: Any) -> None:
    """The monitor's worker never rests between slices of its work (``runner.Pacer``): for
    comparing pacing on and off in one run, not a setting users need."""
    from groundwatch.runtime.runners.contract import always_hurry

    monitor._worker.pacer.hurry = always_hurry


def capture_only(monitor: Any) -> None:
    """The monitor's worker never sees a sampled record: ``record()`` captures and samples it,
    and the hand-off to the queue throws it away uncounted. A control for the benchmarks (what
    sampling 1 costs the request thread with no background work at all), never a setting."""
    monitor._worker.submit = lambda record: True
