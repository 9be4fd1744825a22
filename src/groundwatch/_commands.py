"""What the long-running commands (``groundwatch worker``, ``groundwatch serve``) share.

Both run one asyncio main until SIGTERM or SIGINT, send their telemetry through the global
OpenTelemetry providers, and answer a usage problem with exit code 2. Telemetry: under
``opentelemetry-instrument`` the providers it configured; otherwise, when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, OTLP/HTTP exporters for traces, logs and metrics built
from the standard ``OTEL_EXPORTER_OTLP_*`` variables, flushed when the command ends.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

LOG_FORMAT = "%(asctime)s %(name)s %(message)s"


def otlp_providers() -> Callable[[], None]:
    """OTLP exporters when the environment asks for them and nobody set providers; returns
    what flushes them at exit (nothing to do otherwise)."""
    from opentelemetry import trace

    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider
    ):
        return lambda: None
    from opentelemetry import _logs, metrics
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    lp = LoggerProvider()
    lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    mp = MeterProvider(metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    trace.set_tracer_provider(tp)
    _logs.set_logger_provider(lp)
    metrics.set_meter_provider(mp)

    def flush() -> None:
        tp.shutdown()
        lp.shutdown()
        mp.shutdown()

    return flush


def stop_event() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (call on the running loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def run_command(name: str, main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command's asyncio ``main`` with logging and telemetry set up; its exit code.

    Args:
        name: the command, as in its messages (``"groundwatch serve"``).
        main: builds the coroutine to run; a :class:`~groundwatch.check.cli.UsageError` it
            raises is printed and gives exit code 2.
    """
    from .check.cli import UsageError

    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    flush = otlp_providers()
    try:
        return asyncio.run(main())
    except UsageError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    finally:
        flush()
