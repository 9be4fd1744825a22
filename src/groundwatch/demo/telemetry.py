"""The demo's telemetry: in-memory exporters for the summary; OTLP and Prometheus when asked.

Trace ids come from the seed (so trace-id sampling picks the same requests run after run), and
each OTLP exporter is wrapped to count what it delivered, so the summary reports delivery, not
attempts. The OpenTelemetry SDK and the exporters are imported inside :func:`setup_telemetry`.
"""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

_OTLP_HINT = (
    "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed:\n"
    '    pip install -e ".[otlp]"   (opentelemetry-exporter-otlp-proto-http)\n'
    "Telemetry stays in this process for this run."
)
DEFAULT_PROMETHEUS_HOST = "127.0.0.1"
"""The Prometheus endpoint is unauthenticated: this machine only unless asked."""
PROMETHEUS_HINT = (
    "--prometheus-port needs the Prometheus exporter:\n"
    '    pip install -e ".[prometheus]"   (opentelemetry-exporter-prometheus)'
)


@dataclass
class DemoTelemetry:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    spans: Any
    logs: Any
    destinations: list[str]
    notes: list[str]
    otlp: Delivery | None
    scraped: threading.Event | None = None
    """Set at Prometheus's first scrape of ``/metrics`` (with ``--prometheus-port``)."""


class FirstScrape:
    """A collector on the exporter's registry that yields nothing and notes the first scrape:
    Prometheus's ``increase()`` cannot see what a counter counted before its first sample, so
    the demo starts its traffic once Prometheus has seen the counters at 0."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def describe(self) -> list[Any]:
        return []  # registering must not count as a scrape

    def collect(self) -> list[Any]:
        self.event.set()
        return []


class Delivery:
    """Counts the OTLP exports that succeeded and failed, per signal, for an honest summary."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.ok: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()

    def wrap(self, exporter: Any) -> Any:
        delivery = self

        class Counted:
            def __getattr__(self, name: str) -> Any:  # shutdown, force_flush, temporality...
                return getattr(exporter, name)

            def export(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    result = exporter.export(batch, *args, **kwargs)
                except Exception:
                    delivery.failed[type(exporter).__name__] += 1
                    raise
                ok = getattr(result, "name", "") == "SUCCESS"
                (delivery.ok if ok else delivery.failed)[type(exporter).__name__] += 1
                return result

        return Counted()

    def report(self) -> str:
        sent, failed = sum(self.ok.values()), sum(self.failed.values())
        if failed == 0 and sent:
            return f"OTLP/HTTP at {self.endpoint}: delivered ({sent} exports, none failed)"
        if failed == 0:
            return f"OTLP/HTTP at {self.endpoint}: nothing was exported"
        return (
            f"OTLP/HTTP at {self.endpoint}: DELIVERY FAILED for {failed} of {sent + failed} "
            "exports (see the exporter's warnings above); that telemetry is lost"
        )


def _unreachable(endpoint: str) -> str | None:
    """Why a TCP connection to the endpoint's host and port fails, or None when it connects."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 4318)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=2):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def setup_telemetry(
    seed: int, prometheus_port: int | None, prometheus_host: str = DEFAULT_PROMETHEUS_HOST
) -> DemoTelemetry:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        BatchLogRecordProcessor,
        InMemoryLogRecordExporter,
        SimpleLogRecordProcessor,
    )
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class SeededIds(IdGenerator):
        """Trace ids from the seed, so that trace-id sampling picks the same requests."""

        def __init__(self) -> None:
            # Separate streams: span ids are also drawn on the worker thread, in an order that
            # depends on timing; trace ids only for the requests, in request order.
            self._traces = random.Random(seed)
            self._spans = random.Random(seed + 1)

        def generate_span_id(self) -> int:
            return self._spans.getrandbits(64) or 1

        def generate_trace_id(self) -> int:
            return self._traces.getrandbits(128) or 1

    resource = Resource.create({"service.name": "groundwatch-demo"})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    tracer_provider = TracerProvider(resource=resource, id_generator=SeededIds())
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    readers: list[MetricReader] = []
    destinations = ["in-memory exporters in this process (counted above; nothing printed)"]
    notes: list[str] = []
    otlp: Delivery | None = None
    scraped: threading.Event | None = None

    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint:
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            notes.append(_OTLP_HINT)
        else:
            # Endpoint, headers and timeouts come from the standard OTEL_EXPORTER_OTLP_* variables.
            # Each exporter is wrapped so that the summary reports what was delivered, not what
            # was attempted; an endpoint that refuses connections is reported before the run
            # instead of after the exporters' retries.
            otlp = Delivery(endpoint)
            unreachable = _unreachable(endpoint)
            if unreachable:
                notes.append(f"OTLP endpoint {endpoint} is not reachable ({unreachable}).")
            tracer_provider.add_span_processor(BatchSpanProcessor(otlp.wrap(OTLPSpanExporter())))
            logger_provider.add_log_record_processor(
                BatchLogRecordProcessor(otlp.wrap(OTLPLogExporter()))
            )
            readers.append(
                PeriodicExportingMetricReader(
                    otlp.wrap(OTLPMetricExporter()), export_interval_millis=5_000
                )
            )
    if prometheus_port is not None:
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import REGISTRY, start_http_server
        except ImportError:
            notes.append(PROMETHEUS_HINT)
        else:
            first_scrape = FirstScrape()
            REGISTRY.register(first_scrape)
            scraped = first_scrape.event
            start_http_server(prometheus_port, addr=prometheus_host)
            readers.append(PrometheusMetricReader())
            destinations.append(f"Prometheus at http://{prometheus_host}:{prometheus_port}/metrics")
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return DemoTelemetry(
        tracer_provider,
        meter_provider,
        logger_provider,
        spans,
        logs,
        destinations,
        notes,
        otlp,
        scraped,
    )
