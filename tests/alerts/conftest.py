from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import REGISTRY, CollectorRegistry

from ..extras import require_system_tool


@pytest.fixture
def otel() -> Iterator[
    tuple[LoggerProvider, InMemoryLogRecordExporter, MeterProvider, InMemoryMetricReader]
]:
    """Real SDK providers with in-memory exporters (not installed globally)."""
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield logger_provider, logs, meter_provider, reader
    logger_provider.shutdown()
    meter_provider.shutdown()


def require_tool(name: str) -> str:
    """The path of a Prometheus tool from Debian's ``prometheus`` package: skipped locally when
    missing, a failure in CI (``.ci/run`` installs the package)."""
    return require_system_tool(name, package="prometheus")


def prometheus_reader(registry: CollectorRegistry) -> PrometheusMetricReader:
    """A Prometheus reader exposing on ``registry`` (not the process-wide one).

    ``registry=`` exists from opentelemetry-exporter-prometheus 0.63b0 on; the lowest version
    groundwatch allows (0.60b0, tested by .ci/run) registers on prometheus_client's global
    registry, so its collector is moved to ours.
    """
    try:
        return PrometheusMetricReader(registry=registry)  # type: ignore[call-arg,unused-ignore]
    except TypeError:
        reader = PrometheusMetricReader()
        collector = reader._collector  # type: ignore[attr-defined,unused-ignore]
        REGISTRY.unregister(collector)
        registry.register(collector)

        # Its own shutdown only unregisters the collector from the global registry, where it no
        # longer is; putting it back there first would clash with another reader's series.
        def shutdown(*args: Any, **kwargs: Any) -> None:
            registry.unregister(collector)

        reader.shutdown = shutdown  # type: ignore[method-assign]
        return reader
