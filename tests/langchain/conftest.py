from __future__ import annotations

from collections.abc import Iterator

import groundwatch_langchain
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from .chains import RecordingMonitor


@pytest.fixture
def monitor() -> RecordingMonitor:
    return RecordingMonitor()


@pytest.fixture
def tracer() -> Tracer:
    """A real SDK tracer, not installed globally: spans it starts become the current span."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return provider.get_tracer("app")


@pytest.fixture(autouse=True)
def _strict(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Our own bugs fail our tests instead of being logged and swallowed as in production.
    monkeypatch.setenv("GROUNDWATCH_RAISE_INTERNAL_ERRORS", "1")
    yield
    groundwatch_langchain.uninstrument()
