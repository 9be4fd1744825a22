"""Registration on the dispatcher, engine scoping, bounds and guards."""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import groundwatch_llamaindex
import pytest
from groundwatch_llamaindex._handler import (
    Capture,
    GroundwatchEventHandler,
    GroundwatchSpanHandler,
)
from llama_index.core import VectorStoreIndex
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from groundwatch.testing import RecordingMonitor

from ._fakes import ContextAnswerLLM
from .conftest import QUESTIONS


def ours(handlers: list[Any], kind: type) -> int:
    return sum(isinstance(h, kind) for h in handlers)


@pytest.fixture
def clean() -> Iterator[None]:
    yield
    groundwatch_llamaindex.uninstrument()


@pytest.mark.usefixtures("clean")
def test_instrument_registers_once_and_uninstrument_removes() -> None:
    dispatcher = get_dispatcher()
    before = (list(dispatcher.span_handlers), list(dispatcher.event_handlers))
    monitor = RecordingMonitor()
    groundwatch_llamaindex.instrument(monitor)
    groundwatch_llamaindex.instrument(monitor)
    groundwatch_llamaindex.instrument(RecordingMonitor(), engine=object.__new__(type("E", (), {})))
    assert groundwatch_llamaindex.is_instrumented()
    assert ours(dispatcher.span_handlers, GroundwatchSpanHandler) == 1
    assert ours(dispatcher.event_handlers, GroundwatchEventHandler) == 1
    groundwatch_llamaindex.uninstrument()
    assert not groundwatch_llamaindex.is_instrumented()
    assert (dispatcher.span_handlers, dispatcher.event_handlers) == before


@pytest.mark.usefixtures("clean")
def test_engine_scoped_bindings(index: VectorStoreIndex, llm: ContextAnswerLLM) -> None:
    first = index.as_query_engine(llm=llm)
    second = index.as_query_engine(llm=llm)
    scoped = RecordingMonitor()
    groundwatch_llamaindex.instrument(scoped, engine=first, route="first")

    second.query(QUESTIONS["fuji"])
    assert scoped.records == []  # other engines are not watched
    first.query(QUESTIONS["eiffel"])
    assert [(r["question"], r["route"]) for r in scoped.records] == [(QUESTIONS["eiffel"], "first")]

    everything = RecordingMonitor()
    groundwatch_llamaindex.instrument(everything)
    first.query(QUESTIONS["wall"])
    second.query(QUESTIONS["amazon"])
    assert [r["question"] for r in scoped.records][-1] == QUESTIONS["wall"]  # scoped wins
    assert [r["question"] for r in everything.records] == [QUESTIONS["amazon"]]

    groundwatch_llamaindex.uninstrument(engine=first)
    first.query(QUESTIONS["sahara"])
    assert everything.records[-1]["question"] == QUESTIONS["sahara"]
    assert len(scoped.records) == 2


class BrokenMonitor(RecordingMonitor):
    def record(self, **kwargs: Any) -> None:
        raise RuntimeError("monitor bug")


@pytest.mark.usefixtures("clean")
def test_a_failing_monitor_never_breaks_the_query(
    index: VectorStoreIndex, llm: ContextAnswerLLM, caplog: pytest.LogCaptureFixture
) -> None:
    groundwatch_llamaindex.instrument(BrokenMonitor())
    engine = index.as_query_engine(llm=llm)
    with caplog.at_level(logging.WARNING, logger="groundwatch"):
        answers = [str(engine.query(QUESTIONS["eiffel"])) for _ in range(3)]
    assert answers == ["The Eiffel Tower is 330 metres tall."] * 3
    capture = groundwatch_llamaindex._attach._capture
    assert capture is not None and capture.errors == 3
    # Logged once, not once per query (rate limit).
    assert len([r for r in caplog.records if "llama_index" in r.getMessage()]) == 1
    assert capture.open_roots == 0 and capture.tracked_spans == 0


def test_open_queries_are_bounded_and_given_up_counted(
    index: VectorStoreIndex, llm: ContextAnswerLLM
) -> None:
    monitor = RecordingMonitor()
    capture = Capture(max_open_roots=3)
    capture.bind(monitor, "r", None)
    engine = index.as_query_engine(llm=llm)
    args = inspect.signature(lambda str_or_query_bundle: None).bind("q")
    # Five queries that start and never end (spans LlamaIndex never closes).
    for i in range(5):
        capture.enter(f"RetrieverQueryEngine.query-{i}", args, engine, None)
        capture.enter(
            f"VectorIndexRetriever.retrieve-{i}", args, object(), f"RetrieverQueryEngine.query-{i}"
        )
    assert capture.open_roots == 3
    assert capture.tracked_spans == 6
    assert monitor.failures == [("evicted", "r"), ("evicted", "r")]
    # The survivors still finish normally (this one had started retrieving).
    capture.retrieval(SimpleNamespace(span_id="VectorIndexRetriever.retrieve-4"), end=False)
    capture.drop("RetrieverQueryEngine.query-4", engine, ValueError("x"))
    assert monitor.failures[-1] == ("ValueError", "r")
    assert capture.open_roots == 2


@pytest.mark.usefixtures("clean")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:openinference")
def test_with_openinference_active_the_record_keeps_the_request_trace(
    index: VectorStoreIndex, llm: ContextAnswerLLM
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        monitor = RecordingMonitor()
        groundwatch_llamaindex.instrument(monitor)
        engine = index.as_query_engine(llm=llm, streaming=True)
        with provider.get_tracer("app").start_as_current_span("request") as request:
            text = "".join(engine.query(QUESTIONS["fuji"]).response_gen)
        [record] = monitor.records
        assert record["answer"] == text == "Mount Fuji is 3776 metres high."
        span_context = record["span_context"]
        assert span_context.trace_id == request.get_span_context().trace_id
        # OpenInference attached its query span first; the record goes under it, in the trace.
        names = {s.context.span_id: s.name for s in exporter.get_finished_spans()}
        assert names[span_context.span_id] == "RetrieverQueryEngine.query"
    finally:
        instrumentor.uninstrument()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_with_no_queries_and_a_free_lock(
    index: VectorStoreIndex, llm: ContextAnswerLLM
) -> None:
    capture = Capture()
    capture.bind(RecordingMonitor(), None, None)
    args = inspect.signature(lambda str_or_query_bundle: None).bind("q")
    engine = index.as_query_engine(llm=llm)
    capture.enter("RetrieverQueryEngine.query-1", args, engine, None)
    assert capture.open_roots == 1
    with capture._lock:  # held by this thread while forking
        pid = os.fork()
        if pid == 0:  # child: must not deadlock, must not see the parent's query
            ok = capture.open_roots == 0 and capture._lock.acquire(timeout=1)
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert capture.open_roots == 1


class _RaisingCapture(Capture):
    """A capture whose every step raises: the handlers' one guard must catch each."""

    def enter(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("enter bug")

    def exit(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("exit bug")

    def drop(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("drop bug")

    def retrieval(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("retrieval bug")

    def chat_start(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("chat bug")


def test_every_handler_entry_point_is_guarded_and_counted() -> None:
    from llama_index.core.instrumentation.events.llm import LLMChatStartEvent
    from llama_index.core.instrumentation.events.retrieval import (
        RetrievalEndEvent,
        RetrievalStartEvent,
    )

    from groundwatch._shared import guard

    capture = _RaisingCapture()
    spans, events = GroundwatchSpanHandler(capture), GroundwatchEventHandler(capture)
    args = inspect.signature(lambda str_or_query_bundle: None).bind("q")
    before = dict(guard.errors)
    assert spans.span_enter("s-1", args) is None
    assert spans.span_exit("s-1", args, result="r") is None
    assert spans.span_drop("s-1", args, err=RuntimeError("host")) is None
    assert spans.new_span("s-2", args) is None  # the base class's hooks reach the same guard
    assert events.handle(RetrievalStartEvent(str_or_query_bundle="q")) is None
    assert events.handle(RetrievalEndEvent(str_or_query_bundle="q", nodes=[])) is None
    assert (
        events.handle(LLMChatStartEvent(messages=[], additional_kwargs={}, model_dict={})) is None
    )
    assert capture.errors == 7
    new = {k: n - before.get(k, 0) for k, n in guard.errors.items() if n != before.get(k, 0)}
    assert new == {
        ("llama_index span start", "RuntimeError"): 2,
        ("llama_index span exit", "RuntimeError"): 1,
        ("llama_index span drop", "RuntimeError"): 1,
        ("llama_index event", "RuntimeError"): 3,
    }
