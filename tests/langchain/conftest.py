from __future__ import annotations

from collections.abc import Iterator

import groundwatch_langchain
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from groundwatch._shared import guard
from groundwatch.testing import (
    RecordingMonitor,
    capgw,  # noqa: F401
)


@pytest.fixture
def monitor() -> RecordingMonitor:
    return RecordingMonitor()


@pytest.fixture
def pristine_callback_manager() -> Iterator[None]:
    """Put LangChain's BaseCallbackManager.__init__ back as it was after the test.

    Instrumentations stack wrappers on the same method, and none of them can remove a wrapper
    that sits below someone else's: a test that stacks several leaves them behind.
    """
    from groundwatch_langchain import _attach
    from langchain_core.callbacks import BaseCallbackManager

    original = BaseCallbackManager.__init__
    yield
    groundwatch_langchain.uninstrument()
    BaseCallbackManager.__init__ = original  # type: ignore[method-assign]
    _attach._wrapper = _attach._original_init = None


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
    before = dict(guard.errors)
    yield
    groundwatch_langchain.uninstrument()
    # The worker cannot raise to anybody: check it logged no bug of ours either. (Errors in
    # the handler itself fail the test directly in strict mode; one test provokes them.)
    ours = {
        key: n - before.get(key, 0)
        for key, n in guard.errors.items()
        if n != before.get(key, 0) and not key[0].startswith("langchain")
    }
    assert not ours, f"groundwatch internal errors: {ours}"
