"""Side by side with OpenInference's LangChain instrumentor: our record joins their trace."""

from __future__ import annotations

from collections.abc import Iterator

import groundwatch_langchain
import pytest
from groundwatch_langchain import GroundwatchCallbackHandler
from langchain_core.callbacks import BaseCallbackManager
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from groundwatch.testing import RecordingMonitor
from testkit.chains import build, run

# OpenInference's own use of a deprecated LangChain API, not ours.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:openinference")


@pytest.fixture
def oi() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    original = BaseCallbackManager.__init__
    LangChainInstrumentor().instrument(tracer_provider=provider)
    yield provider, exporter
    LangChainInstrumentor().uninstrument()
    groundwatch_langchain.uninstrument()
    assert BaseCallbackManager.__init__ is original


@pytest.mark.parametrize("attach", ["handler", "instrument"])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "astream"])
def test_record_parent_is_their_root_span_without_outer_span(
    attach: str, mode: str, oi: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = oi
    monitor = RecordingMonitor()
    config = {}
    if attach == "handler":
        config = {"callbacks": [GroundwatchCallbackHandler(monitor)]}
    else:
        groundwatch_langchain.instrument(monitor)
    run(build("lcel").chain, ["What is the refund policy?"], mode, config)  # type: ignore[arg-type]
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1  # OpenInference traced the run
    (record,) = monitor.records
    # No span was current when the run started: the evaluation goes under OpenInference's span
    # for the very same run, so it sits in their trace.
    assert record["span_context"] == roots[0].get_span_context()


@pytest.mark.parametrize("mode", ["invoke", "abatch", "astream_events"])
def test_record_parent_is_the_outer_span_their_trace_shares(
    mode: str, oi: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = oi
    monitor = RecordingMonitor()
    groundwatch_langchain.instrument(monitor)
    with provider.get_tracer("app").start_as_current_span("request") as request:
        run(build("dict").chain, [{"question": "What is the refund policy?"}], mode, {})
    spans = exporter.get_finished_spans()
    (record,) = monitor.records
    assert record["span_context"] == request.get_span_context()
    # Their spans are in the request's trace too, their root chain span a child of the request.
    assert {s.context.trace_id for s in spans} == {request.get_span_context().trace_id}
    chain_roots = [
        s for s in spans if s.parent and s.parent.span_id == request.get_span_context().span_id
    ]
    assert len(chain_roots) == 1


@pytest.mark.parametrize("order", ["ours_first", "theirs_first"])
def test_uninstrument_in_either_order_restores_langchain(order: str) -> None:
    original = BaseCallbackManager.__init__
    monitor = RecordingMonitor()
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if order == "ours_first":
        groundwatch_langchain.instrument(monitor)
        LangChainInstrumentor().instrument(tracer_provider=provider)
    else:
        LangChainInstrumentor().instrument(tracer_provider=provider)
        groundwatch_langchain.instrument(monitor)
    chain = build("lcel").chain
    chain.invoke("q?")
    assert len(monitor.records) == 1 and exporter.get_finished_spans()
    # Switch ours off first: theirs must keep working.
    groundwatch_langchain.uninstrument()
    exporter.clear()
    chain.invoke("q?")
    assert len(monitor.records) == 1 and exporter.get_finished_spans()
    # Ours back on, theirs off: ours must keep working.
    groundwatch_langchain.instrument(monitor)
    LangChainInstrumentor().uninstrument()
    if order == "theirs_first":
        # Ours was installed on top of theirs, and theirs restores the original blindly,
        # dropping ours: instrument() notices and puts it back.
        groundwatch_langchain.instrument(monitor)
    exporter.clear()
    chain.invoke("q?")
    assert len(monitor.records) == 2 and not exporter.get_finished_spans()
    groundwatch_langchain.uninstrument()
    chain.invoke("q?")
    assert len(monitor.records) == 2
    if order == "theirs_first":
        # Theirs restored "its" original (the plain __init__) and ours was outermost: clean.
        assert BaseCallbackManager.__init__ is original
    # Either way no handler of ours is attached any more.
    assert not any(
        isinstance(h, GroundwatchCallbackHandler) for h in BaseCallbackManager([]).handlers
    )
    BaseCallbackManager.__init__ = original  # type: ignore[method-assign]
