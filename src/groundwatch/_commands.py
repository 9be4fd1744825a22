"""What the long-running commands (``groundwatch worker``, ``groundwatch serve``) share.

Both run one asyncio main until SIGTERM or SIGINT, send their telemetry through the global
OpenTelemetry providers, and answer a usage problem with exit code 2. Telemetry: under
``opentelemetry-instrument`` the providers it configured; otherwise, when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, OTLP exporters for traces, logs and metrics built from
the standard ``OTEL_EXPORTER_OTLP_*`` variables (OTLP/HTTP unless ``…_PROTOCOL`` says
``grpc``; ``OTEL_<SIGNAL>_EXPORTER=none`` turns one off), flushed when the command ends.
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
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from . import _config
    from .telemetry.worker_export import otlp_exporter, otlp_worker_providers

    # Spans and logs as a worker process of export_from_worker builds them (the SDK's
    # environment resource), and metrics the same way.
    tp, lp = otlp_worker_providers({})
    on = _config.otel_signal_enabled("METRICS")
    mp = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(otlp_exporter("METRICS"))] if on else []
    )
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
