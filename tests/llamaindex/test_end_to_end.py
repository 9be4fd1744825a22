"""The real Monitor and OpenTelemetry SDK behind real LlamaIndex pipelines."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import groundwatch_llamaindex
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.retrievers import BaseRetriever
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

import groundwatch as gw
from groundwatch._shared import guard
from groundwatch.testing import GroundwatchTelemetry

from ._fakes import ContextAnswerLLM
from .conftest import FACTS, QUESTIONS
from .test_capture import FailingLLM, run_query


@pytest.fixture(autouse=True)
def _no_internal_errors() -> Iterator[None]:
    """Neither the integration nor the runtime may hit a bug of its own in these tests."""
    before = dict(guard.errors)
    yield
    new = {k: n - before.get(k, 0) for k, n in guard.errors.items() if n != before.get(k, 0)}
    assert not new, f"groundwatch internal errors: {new}"


@pytest.fixture
def monitor(capgw: GroundwatchTelemetry) -> Iterator[gw.Monitor]:
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0))
    groundwatch_llamaindex.instrument(monitor, route="docs-qa")
    yield monitor
    groundwatch_llamaindex.uninstrument()


def sampled_and_errors(capgw: GroundwatchTelemetry) -> tuple[float, float]:
    return (
        capgw.metric_total("groundwatch.records", groundwatch__decision="sampled"),
        capgw.metric_total("groundwatch.records", groundwatch__decision="error"),
    )


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "stream"])
async def test_evaluation_span_lands_in_the_request_trace(
    index: VectorStoreIndex,
    llm: ContextAnswerLLM,
    monitor: gw.Monitor,
    capgw: GroundwatchTelemetry,
    use_async: bool,
    streaming: bool,
) -> None:
    engine = index.as_query_engine(llm=llm, similarity_top_k=2, streaming=streaming)
    with capgw.tracer.start_as_current_span("request") as request:
        text, response = await run_query(engine, QUESTIONS["eiffel"], use_async=use_async)

    [(record, evaluation)] = capgw.results()
    assert record.question == QUESTIONS["eiffel"]
    assert record.answer == text == "The Eiffel Tower is 330 metres tall."
    assert [p.text for p in record.contexts] == [
        n.node.get_content() for n in response.source_nodes
    ]
    assert [p.id for p in record.contexts] == [n.node.node_id for n in response.source_nodes]
    assert evaluation.label == "grounded"
    assert evaluation.groundedness == 1.0

    [span] = capgw.spans()
    request_context = request.get_span_context()
    assert span.context.trace_id == request_context.trace_id
    assert span.parent is not None and span.parent.span_id == request_context.span_id
    attributes = dict(span.attributes or {})
    assert attributes["groundwatch.label"] == "grounded"
    assert attributes["groundwatch.route"] == "docs-qa"
    assert attributes["llama_index.engine"] == "RetrieverQueryEngine"
    assert sampled_and_errors(capgw) == (1, 0)


async def test_concurrent_queries_each_in_their_own_trace(
    index: VectorStoreIndex,
    llm: ContextAnswerLLM,
    monitor: gw.Monitor,
    capgw: GroundwatchTelemetry,
) -> None:
    engine = index.as_query_engine(llm=llm, similarity_top_k=1)
    keys = list(QUESTIONS) * 3  # 18 at once

    async def one(key: str) -> tuple[int, str]:
        with capgw.tracer.start_as_current_span(f"request {key}") as request:
            await asyncio.sleep(0)
            response = await engine.aquery(QUESTIONS[key])
            return request.get_span_context().span_id, str(response)

    requests = dict(await asyncio.gather(*(one(key) for key in keys)))
    results = capgw.results()
    spans = capgw.spans()
    assert len(results) == len(spans) == len(keys)
    answers_by_parent = {}
    for span in spans:
        assert span.parent is not None
        answers_by_parent[span.parent.span_id] = span
    assert set(answers_by_parent) == set(requests)
    for record, evaluation in results:
        key = record.contexts[0].metadata["topic"]
        assert record.question == QUESTIONS[key]
        assert record.answer == FACTS[key].split(". ")[0].rstrip(".") + "."
        assert evaluation.label == "grounded"


def test_chat_turns_with_the_real_monitor(
    index: VectorStoreIndex,
    llm: ContextAnswerLLM,
    monitor: gw.Monitor,
    capgw: GroundwatchTelemetry,
) -> None:
    engine = index.as_chat_engine(chat_mode="condense_plus_context", llm=llm, similarity_top_k=1)
    with capgw.tracer.start_as_current_span("turn 1"):
        engine.chat(QUESTIONS["fuji"])
    with capgw.tracer.start_as_current_span("turn 2") as second:
        streamed = "".join(engine.stream_chat(QUESTIONS["sahara"]).response_gen)
    results = capgw.results()
    assert [r.question for r, _ in results] == [QUESTIONS["fuji"], QUESTIONS["sahara"]]
    assert results[1][0].answer == streamed
    assert [e.label for _, e in results] == ["grounded", "grounded"]
    last = capgw.spans()[-1]
    assert last.parent is not None and last.parent.span_id == second.get_span_context().span_id


def test_errors_are_counted_not_scored(
    index: VectorStoreIndex, monitor: gw.Monitor, capgw: GroundwatchTelemetry
) -> None:
    engine = index.as_query_engine(llm=FailingLLM())
    with pytest.raises(TimeoutError):
        engine.query(QUESTIONS["wall"])
    assert capgw.spans() == []
    assert (
        capgw.metric_total(
            "groundwatch.records", groundwatch__decision="error", error__type="TimeoutError"
        )
        == 1
    )


def test_sampling_zero_captures_but_scores_nothing(
    index: VectorStoreIndex, llm: ContextAnswerLLM, capgw: GroundwatchTelemetry
) -> None:
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(0.0))
    groundwatch_llamaindex.instrument(monitor)
    try:
        engine = index.as_query_engine(llm=llm)
        for key in ("eiffel", "fuji", "wall"):
            engine.query(QUESTIONS[key])
        assert capgw.spans() == []
        assert capgw.metric_total("groundwatch.records", groundwatch__decision="not_sampled") == 3
    finally:
        groundwatch_llamaindex.uninstrument()


@pytest.mark.filterwarnings("ignore::DeprecationWarning:openinference")
@pytest.mark.parametrize("openinference_first", [True, False], ids=["oi-first", "gw-first"])
def test_with_openinference_the_evaluation_joins_the_request_trace(
    index: VectorStoreIndex,
    llm: ContextAnswerLLM,
    capgw: GroundwatchTelemetry,
    openinference_first: bool,
) -> None:
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0))
    instrumentor = LlamaIndexInstrumentor()
    steps: list[Any] = [
        lambda: instrumentor.instrument(tracer_provider=capgw.tracer_provider),
        lambda: groundwatch_llamaindex.instrument(monitor),
    ]
    for step in steps if openinference_first else reversed(steps):
        step()
    try:
        engine = index.as_query_engine(llm=llm, streaming=True)
        with capgw.tracer.start_as_current_span("request") as request:
            text = "".join(engine.query(QUESTIONS["everest"]).response_gen)
        [(record, evaluation)] = capgw.results()
        assert record.answer == text
        assert evaluation.label == "grounded"
        spans = capgw.spans(name=None)
        by_id = {s.context.span_id: s for s in spans}
        [evaluation_span] = [s for s in spans if s.name == "groundwatch.evaluation"]
        request_context = request.get_span_context()
        assert evaluation_span.context.trace_id == request_context.trace_id
        assert evaluation_span.parent is not None
        parent_id = evaluation_span.parent.span_id
        if openinference_first:
            # OpenInference made its query span current first; it is a child of the request.
            assert by_id[parent_id].name == "RetrieverQueryEngine.query"
            assert by_id[parent_id].parent.span_id == request_context.span_id  # type: ignore[union-attr]
        else:
            assert parent_id == request_context.span_id
        assert len([s for s in spans if s.context.trace_id == request_context.trace_id]) > 5
    finally:
        instrumentor.uninstrument()
        groundwatch_llamaindex.uninstrument()


class _UnreadableResponse:
    """A custom engine's response whose text cannot be read: ``str()`` raises."""

    def __init__(self, source_nodes: list[Any]) -> None:
        self.source_nodes = source_nodes

    def __str__(self) -> str:
        raise RuntimeError("this response has no text")


class _UnreadableEngine(CustomQueryEngine):
    retriever: BaseRetriever

    def custom_query(self, query_str: str) -> Any:
        return _UnreadableResponse(self.retriever.retrieve(query_str))


def test_a_response_whose_text_raises_ends_in_one_counted_failure(
    index: VectorStoreIndex, monitor: gw.Monitor, capgw: GroundwatchTelemetry
) -> None:
    engine = _UnreadableEngine(retriever=index.as_retriever(similarity_top_k=2))
    response = engine.query(QUESTIONS["eiffel"])
    assert isinstance(response, _UnreadableResponse)  # the application gets its response
    assert monitor.force_flush(10_000)
    # Exactly one decision for the one interaction: a failure saying why, nothing scored.
    points = capgw.metric_points("groundwatch.records")
    # The route the integration passes to record_failure is on the count.
    assert points == [
        (
            {
                "groundwatch.decision": "error",
                "error.type": "no_answer",
                "groundwatch.route": "docs-qa",
            },
            1,
        )
    ]
    assert capgw.spans() == []
