from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader


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
