"""Spans and log events exported by the worker process: ``Monitor(export_from_worker=True)``.

With the process executor the judge runs in a worker process, and by default its results come
back to the host, whose tracer and logger providers turn each one into a span and two log
events. The OpenTelemetry SDK's work for that (building the span, checking every attribute,
copying the events, handing all of it to the batch processors) is about 0.1 ms per record on
the host's interpreter, holding its GIL: most of what scoring still costs the host
(docs/runtime-internals.md). With ``export_from_worker`` the worker process builds providers
of its own and exports the span and the events itself, so the host's interpreter no longer
pays for them.

What stays on the host: every metric point (a cumulative series must have one writer, and
the accounting identity of ``groundwatch.records`` and ``groundwatch.evaluations`` stays in
one process), ``on_result`` callbacks and samplers that observe scores, and the span of every
evaluation the host decides itself (a timeout, a lost worker process, an input that cannot be
sent to it, a judge that falls back to a thread).

The worker process's providers come from a :data:`WorkerProviders` function, called once in
each worker process with the host's resource attributes (so both processes' data carry the
same ``service.name``). The default, :func:`otlp_worker_providers`, exports over OTLP as the
standard ``OTEL_EXPORTER_OTLP_*`` variables say; the worker process inherits the host's
environment. A function that fails there (an exporter package missing, say) makes the worker
process answer without exporting, and the host exports as usual, with one warning.
"""

from __future__ import annotations

import importlib
import logging
import pickle
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.trace import TracerProvider

from .._fields import RecordFields
from .._shared import config
from ..types import Evaluation, Passage, RagRecord
from ._emitter import Redactor, Stats, Telemetry, collect_attributes, user_attributes

if TYPE_CHECKING:  # the SDK is an extra: imported where it is used
    from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

_logger = logging.getLogger(__name__)

WorkerProviders = Callable[[Mapping[str, Any]], tuple[TracerProvider, LoggerProvider]]
"""Builds, in a worker process, the tracer and logger providers it exports through, from the
host's resource attributes (empty when the host's tracer provider has no SDK resource). Must be
picklable by reference: a function defined at the top level of an importable module."""


def otlp_worker_providers(
    resource_attributes: Mapping[str, Any],
) -> tuple[SdkTracerProvider, SdkLoggerProvider]:
    """The SDK's providers with batch processors and OTLP exporters, configured by the standard
    variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_HEADERS``, ``…_TIMEOUT``, ``…_PROTOCOL``:
    ``http/protobuf``, the default, or ``grpc``; ``OTEL_TRACES_EXPORTER`` /
    ``OTEL_LOGS_EXPORTER`` set to ``none`` turn that signal off).

    Needs ``groundwatch[otlp]`` (``opentelemetry-exporter-otlp-proto-grpc`` for ``grpc``).
    """
    from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # The host's resource is complete already (its detectors and OTEL_RESOURCE_ATTRIBUTES
    # applied); without one, the environment's, as the host's SDK would build it.
    resource = Resource(dict(resource_attributes)) if resource_attributes else Resource.create()
    tracer_provider = SdkTracerProvider(resource=resource)
    logger_provider = SdkLoggerProvider(resource=resource)
    if config.otel_signal_enabled("TRACES"):
        tracer_provider.add_span_processor(BatchSpanProcessor(otlp_exporter("TRACES")))
    if config.otel_signal_enabled("LOGS"):
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(otlp_exporter("LOGS")))
    return tracer_provider, logger_provider


_OTLP_EXPORTERS = {
    "TRACES": ("trace_exporter", "OTLPSpanExporter"),
    "LOGS": ("_log_exporter", "OTLPLogExporter"),
    "METRICS": ("metric_exporter", "OTLPMetricExporter"),
}


def otlp_exporter(signal: str) -> Any:
    """The OTLP exporter of ``signal`` (``TRACES``, ``LOGS``, ``METRICS``) for the configured
    protocol (it reads its own endpoint, headers, timeout and compression variables)."""
    transport = "grpc" if config.otlp_protocol(signal) == "grpc" else "http"
    module, name = _OTLP_EXPORTERS[signal]
    found = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{transport}.{module}")
    return getattr(found, name)()


class WorkerExport:
    """The host's side: what a worker process needs to export evaluations as the host would.

    Args:
        providers: builds the worker process's providers (:data:`WorkerProviders`).
        telemetry: the monitor's :class:`Telemetry` (its content settings and tracer provider).
        sampling_rate: the rate to put on a record's span, read when the record is sent.
    """

    def __init__(
        self,
        providers: WorkerProviders,
        telemetry: Telemetry,
        sampling_rate: Callable[[RagRecord], float | None],
    ) -> None:
        self.providers = providers
        self.telemetry = telemetry
        self.sampling_rate = sampling_rate

    def setup(self) -> bytes | None:
        """The pickled set-up of a worker process's exporting (read at each start, so
        providers set after the monitor count); ``None``, with a warning, when it cannot be
        pickled (the host then exports)."""
        provider = self.telemetry.tracer_provider or trace.get_tracer_provider()
        resource = getattr(getattr(provider, "resource", None), "attributes", None) or {}
        telemetry = self.telemetry
        try:
            return pickle.dumps(
                (
                    self.providers,
                    dict(resource),
                    telemetry.capture_content,
                    telemetry.redact,
                    telemetry.content_max_chars,
                    telemetry.audit_rate,
                ),
                protocol=pickle.HIGHEST_PROTOCOL,
            )
        except Exception as exc:
            _logger.warning(
                "export_from_worker: the providers function or the redact hook cannot be "
                "pickled (%s: %s); this process exports the evaluations instead",
                type(exc).__name__,
                exc,
            )
            return None

    def record_fields(self, record: RagRecord, passages: Sequence[Passage]) -> RecordFields:
        """The prepared record as the worker process needs it to judge it and to build the
        span the host would (its user attributes, sampling rate and parent)."""
        attributes: dict[str, Any] = {}
        if record.attributes:  # guarded as on the host's own span: a bad one is counted
            collect_attributes(attributes, "user attributes", user_attributes(record))
        return RecordFields.of(
            record, passages, attributes=attributes, sampling_rate=self.sampling_rate(record)
        )


class ChildExport:
    """The worker process's side: its own providers, and a :class:`Telemetry` that emits the
    span and the events of each evaluation it finishes (never metric points)."""

    def __init__(self, setup: bytes) -> None:
        (providers, resource, capture_content, redact, content_max_chars, audit_rate) = (
            pickle.loads(setup)
        )
        self.redact: Redactor | None = redact
        self.tracer_provider, self.logger_provider = providers(resource)
        self.telemetry = Telemetry(
            tracer_provider=self.tracer_provider,
            meter_provider=NoOpMeterProvider(),
            logger_provider=self.logger_provider,
            capture_content=capture_content,
            redact=redact,
            content_max_chars=content_max_chars,
            stats=Stats(lambda: 0),
            audit_rate=audit_rate,  # the same traces marked as the host would mark them
        )

    def emit(
        self, fields: RecordFields, evaluation: Evaluation, start_ns: int, end_ns: int
    ) -> None:
        """Export the span and the events of one evaluation, as the host would have."""
        record = fields.to_record()
        self.telemetry.emit_span(
            record, evaluation, fields.sampling_rate, start_ns, end_ns, evaluation.verdict_counts
        )

    def flush(self, timeout_millis: int) -> bool:
        """Export what the batch processors hold now."""
        done = True
        for provider in (self.tracer_provider, self.logger_provider):
            force_flush = getattr(provider, "force_flush", None)  # the API's have none
            if force_flush is not None:
                done = bool(force_flush(timeout_millis)) and done
        return done

    def shutdown(self, timeout_millis: int) -> None:
        """Flush (within ``timeout_millis``), then stop the providers."""
        self.flush(timeout_millis)
        for provider in (self.tracer_provider, self.logger_provider):
            shutdown = getattr(provider, "shutdown", None)
            if shutdown is not None:
                shutdown()
