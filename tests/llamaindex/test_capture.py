"""One record per top-level query or chat turn, from real llama-index-core pipelines."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import groundwatch_llamaindex
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine, SubQuestionQueryEngine
from llama_index.core.question_gen import LLMQuestionGenerator
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import QueryEngineTool, ToolMetadata
from opentelemetry import context as otel_context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.sdk.trace import TracerProvider

from groundwatch import Decision, Passage
from groundwatch.testing import RecordingMonitor

from ._fakes import ContextAnswerLLM
from .conftest import FACTS, QUESTIONS


def passages(nodes: list[NodeWithScore]) -> list[Passage]:
    return [
        Passage(text=n.node.get_content(), id=n.node.node_id, score=n.score, metadata=n.metadata)
        for n in nodes
    ]


def assert_clean() -> None:
    capture = groundwatch_llamaindex._attach._capture
    assert capture is not None
    assert capture.open_roots == 0
    assert capture.tracked_spans == 0


async def run_query(engine: Any, question: str, *, use_async: bool) -> tuple[str, Any]:
    """Runs one query the way an application would, consuming a stream to its end."""
    if use_async:
        response = await engine.aquery(question)
        if hasattr(response, "async_response_gen"):
            text = "".join([t async for t in response.async_response_gen()])
            return text, response
    else:
        response = engine.query(question)
        if hasattr(response, "response_gen"):
            return "".join(response.response_gen), response
    return str(response), response


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "stream"])
async def test_query_engine_records_question_nodes_and_answer(
    index: VectorStoreIndex,
    llm: ContextAnswerLLM,
    monitor: RecordingMonitor,
    tracer_provider: TracerProvider,
    use_async: bool,
    streaming: bool,
) -> None:
    engine = index.as_query_engine(llm=llm, similarity_top_k=2, streaming=streaming)
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("request") as request_span:
        text, response = await run_query(engine, QUESTIONS["eiffel"], use_async=use_async)

    assert text == "The Eiffel Tower is 330 metres tall."
    assert monitor.failures == []
    [record] = monitor.records
    assert record["question"] == QUESTIONS["eiffel"]
    assert record["answer"] == text
    assert record["passages"] == passages(response.source_nodes)
    assert record["passages"][0].metadata == {"topic": "eiffel"}
    assert isinstance(record["passages"][0].score, float)
    assert record["span_context"] == request_span.get_span_context()
    expected = {"llama_index.engine": "RetrieverQueryEngine"}
    if streaming:
        expected["llama_index.stream"] = "complete"
    assert record["attributes"] == expected
    assert_clean()


def test_nodes_past_the_cap_are_dropped_and_the_cut_is_marked(
    index: VectorStoreIndex,
    llm: ContextAnswerLLM,
    monitor: RecordingMonitor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As in the LangChain integration: passages past the cap are counted in
    ``groundwatch.contexts.dropped`` and ``documents_dropped``, not left out silently."""
    from groundwatch_llamaindex import _capture, _tools

    for reader in (_capture, _tools):  # the modules that read the cap
        monkeypatch.setattr(reader, "MAX_NODES_PER_ROOT", 2)
    engine = index.as_query_engine(llm=llm, similarity_top_k=5)
    response = engine.query(QUESTIONS["eiffel"])
    assert len(response.source_nodes) == 5
    [record] = monitor.records
    assert record["passages"] == passages(response.source_nodes[:2])
    assert record["attributes"]["groundwatch.contexts.dropped"] == 3
    capture = groundwatch_llamaindex._attach._capture
    assert capture is not None and capture.counts["documents_dropped"] == 3
    assert capture.counts["records"] == 1


async def test_stream_is_recorded_only_once_consumed(
    index: VectorStoreIndex, llm: ContextAnswerLLM, monitor: RecordingMonitor
) -> None:
    engine = index.as_query_engine(llm=llm, similarity_top_k=2, streaming=True)
    response = engine.query(QUESTIONS["fuji"])
    first = next(response.response_gen)
    assert monitor.records == []  # the answer is not known yet
    rest = "".join(response.response_gen)
    [record] = monitor.records
    assert record["answer"] == first + rest == "Mount Fuji is 3776 metres high."

    aresponse = await engine.aquery(QUESTIONS["wall"])
    assert len(monitor.records) == 1
    full = await aresponse.get_response()
    assert monitor.records[1]["answer"] == full.response
    assert full.response == "The Great Wall of China is over 21000 kilometres long."
    assert_clean()


def test_stream_closed_early_records_what_was_shown(
    index: VectorStoreIndex, llm: ContextAnswerLLM, monitor: RecordingMonitor
) -> None:
    engine = index.as_query_engine(llm=llm, streaming=True)
    response = engine.query(QUESTIONS["everest"])
    tokens = [next(response.response_gen), next(response.response_gen)]
    response.response_gen.close()
    [record] = monitor.records
    assert record["answer"] == "".join(tokens) == "Mount Everest "
    assert record["attributes"]["llama_index.stream"] == "closed"

    # A stream nobody reads: no record, nothing kept for it, and counted as cancelled (as the
    # LangChain integration counts a run abandoned mid-stream), not left without a decision.
    unread = engine.query(QUESTIONS["fuji"])
    assert monitor.failures == []  # still readable
    del unread
    gc.collect()
    assert len(monitor.records) == 1
    assert monitor.failures == [("cancelled", None)]
    assert_clean()


@pytest.mark.parametrize("method", ["chat", "achat", "stream_chat", "astream_chat"])
async def test_condense_plus_context_chat_records_each_turn(
    index: VectorStoreIndex,
    llm: ContextAnswerLLM,
    monitor: RecordingMonitor,
    tracer_provider: TracerProvider,
    method: str,
) -> None:
    engine = index.as_chat_engine(chat_mode="condense_plus_context", llm=llm, similarity_top_k=1)
    tracer = tracer_provider.get_tracer("app")
    turns = []
    for key in ("wall", "everest"):
        with tracer.start_as_current_span(f"turn {key}") as span:
            call = getattr(engine, method)(QUESTIONS[key])
            response = await call if method.startswith("a") else call
            if method == "stream_chat":
                text = "".join(response.response_gen)
            elif method == "astream_chat":
                text = "".join([t async for t in response.async_response_gen()])
            else:
                text = response.response
        turns.append((key, text, response, span.get_span_context()))

    assert monitor.failures == []
    assert len(monitor.records) == 2
    for record, (key, text, response, span_context) in zip(monitor.records, turns, strict=True):
        assert text == FACTS[key].split(". ")[0].rstrip(".") + "."
        assert record["question"] == QUESTIONS[key]
        assert record["answer"] == text
        assert record["passages"] == passages(response.source_nodes)
        assert [c.id for c in record["passages"]] == [response.source_nodes[0].node.node_id]
        assert record["passages"][0].metadata == {"topic": key}
        assert record["span_context"] == span_context
        assert record["attributes"]["llama_index.engine"] == "CondensePlusContextChatEngine"
    assert_clean()


def test_chat_engine_over_a_query_engine_makes_one_record(
    index: VectorStoreIndex, llm: ContextAnswerLLM, monitor: RecordingMonitor
) -> None:
    engine = index.as_chat_engine(chat_mode="condense_question", llm=llm)
    response = engine.chat(QUESTIONS["amazon"])
    [record] = monitor.records  # not a second one for the inner query engine
    assert record["question"] == QUESTIONS["amazon"]
    assert record["answer"] == response.response
    assert record["attributes"]["llama_index.engine"] == "CondenseQuestionChatEngine"
    assert record["passages"] == passages(response.source_nodes)
    assert record["passages"]
    assert_clean()


class DropAllButFirst(BaseNodePostprocessor):
    """A re-ranker stand-in: keeps the last retrieved node only, and rescores it."""

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return [NodeWithScore(node=nodes[-1].node, score=0.99)]


def test_records_the_nodes_after_postprocessing(
    index: VectorStoreIndex, llm: ContextAnswerLLM, monitor: RecordingMonitor
) -> None:
    engine = index.as_query_engine(
        llm=llm, similarity_top_k=3, node_postprocessors=[DropAllButFirst()]
    )
    retrieved = engine.retrieve(QueryBundle(QUESTIONS["eiffel"]))  # also: no record for this
    assert len(retrieved) == 1
    response = engine.query(QUESTIONS["eiffel"])
    [record] = monitor.records
    assert len(response.source_nodes) == 1
    assert record["passages"] == passages(response.source_nodes)
    assert record["passages"][0].score == 0.99


class PlannerLLM(ContextAnswerLLM):
    """Plans two sub-questions (fixed JSON) and answers everything else from context."""

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if "sub_question" in prompt:
            return CompletionResponse(
                text='```json\n[{"sub_question": "How tall is the Eiffel Tower?", '
                '"tool_name": "towers"}, {"sub_question": "How high is Mount Fuji?", '
                '"tool_name": "mountains"}]\n```'
            )
        return CompletionResponse(text=self._answer(prompt))


@pytest.mark.parametrize("use_async", [False, True], ids=["sequential", "async-subqueries"])
def test_sub_question_engine_records_every_retrieved_node(
    llm: ContextAnswerLLM, monitor: RecordingMonitor, use_async: bool
) -> None:
    from ._fakes import BagOfWordsEmbedding

    planner = PlannerLLM()
    embed = BagOfWordsEmbedding()
    towers = VectorStoreIndex.from_documents(
        [Document(text=FACTS["eiffel"], id_="eiffel")], embed_model=embed
    )
    mountains = VectorStoreIndex.from_documents(
        [Document(text=FACTS[k], id_=k) for k in ("fuji", "everest")], embed_model=embed
    )
    tools = [
        QueryEngineTool(
            query_engine=towers.as_query_engine(llm=planner, similarity_top_k=1),
            metadata=ToolMetadata(name="towers", description="Facts about towers"),
        ),
        QueryEngineTool(
            query_engine=mountains.as_query_engine(llm=planner, similarity_top_k=1),
            metadata=ToolMetadata(name="mountains", description="Facts about mountains"),
        ),
    ]
    engine = SubQuestionQueryEngine.from_defaults(
        query_engine_tools=tools,
        llm=planner,
        question_gen=LLMQuestionGenerator.from_defaults(llm=planner),
        use_async=use_async,
        verbose=False,
    )
    question = "How tall is the Eiffel Tower and how high is Mount Fuji?"
    response = engine.query(question)

    [record] = monitor.records
    assert record["question"] == question
    assert record["answer"] == response.response
    # The documents retrieved by both sub-queries, not the synthesised "Sub question:" nodes.
    texts = [c.text for c in record["passages"]]
    assert len(texts) == 2
    assert any("Eiffel" in t for t in texts) and any("Fuji" in t for t in texts)
    assert not any(t.startswith("Sub question") for t in texts)
    assert record["attributes"]["llama_index.engine"] == "SubQuestionQueryEngine"
    assert_clean()


async def test_concurrent_async_queries_do_not_mix(
    index: VectorStoreIndex,
    llm: ContextAnswerLLM,
    monitor: RecordingMonitor,
    tracer_provider: TracerProvider,
) -> None:
    plain = index.as_query_engine(llm=llm, similarity_top_k=1)
    streaming = index.as_query_engine(llm=llm, similarity_top_k=1, streaming=True)
    tracer = tracer_provider.get_tracer("app")
    keys = list(QUESTIONS) * 4  # 24 queries at once

    async def one(i: int, key: str) -> tuple[str, str, Any]:
        with tracer.start_as_current_span(f"request {i}") as span:
            await asyncio.sleep(0)
            text, _ = await run_query(streaming if i % 2 else plain, QUESTIONS[key], use_async=True)
            return key, text, span.get_span_context()

    results = await asyncio.gather(*(one(i, key) for i, key in enumerate(keys)))

    assert monitor.failures == []
    assert len(monitor.records) == len(keys)
    by_span = {r["span_context"].span_id: r for r in monitor.records}
    assert len(by_span) == len(keys)
    for key, text, span_context in results:
        record = by_span[span_context.span_id]
        assert record["span_context"] == span_context
        assert record["question"] == QUESTIONS[key]
        assert record["answer"] == text == FACTS[key].split(". ")[0].rstrip(".") + "."
        [context] = record["passages"]  # similarity_top_k=1: its own document, no other's
        assert context.metadata == {"topic": key}
        assert context.text == FACTS[key]
    assert_clean()


def test_concurrent_threads_do_not_mix(
    index: VectorStoreIndex, llm: ContextAnswerLLM, monitor: RecordingMonitor
) -> None:
    engine = index.as_query_engine(llm=llm, similarity_top_k=1)
    keys = list(QUESTIONS) * 3
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda k: str(engine.query(QUESTIONS[k])), keys))
    assert len(monitor.records) == len(keys)
    for record in monitor.records:
        [context] = record["passages"]
        key = context.metadata["topic"]
        assert record["question"] == QUESTIONS[key]
        assert record["answer"] == FACTS[key].split(". ")[0].rstrip(".") + "."
    assert sorted(r["answer"] for r in monitor.records) == sorted(answers)
    assert_clean()


class FailingLLM(ContextAnswerLLM):
    fail_after_tokens: int | None = None

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise TimeoutError("model timed out")

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        def gen() -> Iterator[CompletionResponse]:
            yield CompletionResponse(text="Partial", delta="Partial")
            raise ConnectionResetError("stream cut")

        return gen()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "stream"])
async def test_errors_make_no_record_and_are_counted(
    index: VectorStoreIndex, monitor: RecordingMonitor, use_async: bool, streaming: bool
) -> None:
    engine = index.as_query_engine(llm=FailingLLM(), streaming=streaming)
    expected = ConnectionResetError if streaming else TimeoutError
    with pytest.raises(expected):
        await run_query(engine, QUESTIONS["sahara"], use_async=use_async)
    assert monitor.records == []
    assert monitor.failures == [(expected.__name__, None)]
    assert_clean()


def test_retriever_alone_makes_no_record(
    index: VectorStoreIndex, monitor: RecordingMonitor
) -> None:
    nodes = index.as_retriever(similarity_top_k=2).retrieve(QUESTIONS["eiffel"])
    assert len(nodes) == 2
    assert monitor.records == [] and monitor.failures == []
    assert_clean()


def test_mock_llm_and_mock_embedding_pipeline(monitor: RecordingMonitor) -> None:
    """The plain LlamaIndex fakes: MockEmbedding retrieval, MockLLM's fixed-length answer."""
    docs = [Document(text=FACTS[k], id_=k) for k in ("eiffel", "fuji")]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(llm=MockLLM(max_tokens=5), similarity_top_k=2)
    response = engine.query("Anything?")
    [record] = monitor.records
    assert record["answer"] == response.response == "text text text text text"
    assert sorted(c.id for c in record["passages"]) == sorted(
        n.node.node_id for n in response.source_nodes
    )
    assert len(record["passages"]) == 2


def test_suppressed_instrumentation_makes_no_record(
    index: VectorStoreIndex, llm: ContextAnswerLLM, monitor: RecordingMonitor
) -> None:
    """As on groundwatch's worker while a judge runs: a judge built on LlamaIndex is not watched."""
    engine = index.as_query_engine(llm=llm)
    token = otel_context.attach(otel_context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        engine.query(QUESTIONS["fuji"])
    finally:
        otel_context.detach(token)
    assert monitor.records == [] and monitor.failures == []
    engine.query(QUESTIONS["fuji"])
    assert len(monitor.records) == 1
    assert_clean()


async def test_async_stream_closed_early_records_what_was_shown(
    index: VectorStoreIndex, llm: ContextAnswerLLM, monitor: RecordingMonitor
) -> None:
    engine = index.as_query_engine(llm=llm, streaming=True)
    response = await engine.aquery(QUESTIONS["everest"])
    stream = response.response_gen
    first = await stream.__anext__()
    await stream.aclose()
    [record] = monitor.records
    assert record["answer"] == first == "Mount "
    assert record["attributes"]["llama_index.stream"] == "closed"

    # Closed before it was ever read: nothing was shown, nothing is recorded or kept, and the
    # query is counted cancelled once the stream is gone.
    unread = await engine.aquery(QUESTIONS["fuji"])
    await unread.response_gen.aclose()
    del unread
    gc.collect()
    assert len(monitor.records) == 1 and monitor.failures == [("cancelled", None)]
    assert_clean()


class FailingRetriever(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise LookupError("index offline")


def test_turn_without_retrieval_makes_no_record(
    llm: ContextAnswerLLM, monitor: RecordingMonitor
) -> None:
    """A plain chat turn has no context to be grounded in: not recorded, not a failure."""
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=3))
    assert str(engine.chat(QUESTIONS["eiffel"])) == "text text text"
    capture = groundwatch_llamaindex._attach._capture
    assert capture is not None
    assert monitor.records == [] and monitor.failures == []
    assert capture.no_retrieval == 1
    assert_clean()
    # A retriever that fails has still started retrieving: that query is a counted failure.
    failing = RetrieverQueryEngine.from_args(FailingRetriever(), llm=llm)
    with pytest.raises(LookupError):
        failing.query(QUESTIONS["fuji"])
    assert monitor.records == [] and monitor.failures == [("LookupError", None)]
    assert capture.no_retrieval == 1
    assert_clean()


def test_evaluate_takes_nodes_with_their_ids_and_scores() -> None:
    import groundwatch as gw
    from groundwatch._shared.inputs import to_passage

    node = TextNode(text="The Eiffel Tower is 330 metres tall.", id_="eiffel-1", metadata={"a": 1})
    assert to_passage(node, 0).id == "eiffel-1"
    scored = to_passage(NodeWithScore(node=node, score=0.5), 0)
    assert (scored.id, scored.score, scored.metadata) == ("eiffel-1", 0.5, {"a": 1})
    ev = gw.evaluate("The Eiffel Tower is 330 metres tall.", [NodeWithScore(node=node, score=0.5)])
    assert ev.label == "grounded"


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "stream"])
async def test_a_query_the_sampler_declines_keeps_no_nodes_and_is_counted_once(
    index: VectorStoreIndex, llm: ContextAnswerLLM, use_async: bool, streaming: bool
) -> None:
    monitor = RecordingMonitor(decision=Decision.NOT_SAMPLED)
    groundwatch_llamaindex.instrument(monitor, route="docs")
    capture = groundwatch_llamaindex._attach._capture
    assert capture is not None
    kept: list[int] = []
    real = capture.retrieval

    def spy(event: Any, end: bool = True) -> None:
        real(event, end)
        kept.extend(len(root.retrieved) for root in capture._tracker.runs())

    capture.retrieval = spy  # type: ignore[method-assign]
    try:
        engine = index.as_query_engine(llm=llm, streaming=streaming)
        for question in (QUESTIONS["eiffel"], QUESTIONS["amazon"]):
            text, _ = await run_query(engine, question, use_async=use_async)
            assert text  # the application gets its answer
    finally:
        groundwatch_llamaindex.uninstrument()
    assert len(monitor.decided) == 2 and {route for _, route in monitor.decided} == {"docs"}
    assert monitor.records == [] and monitor.failures == []
    assert monitor.decisions == [(Decision.NOT_SAMPLED, "docs")] * 2
    assert kept and set(kept) == {0}, "nodes kept for a query that will not be scored"
    assert capture.not_sampled == 2 and capture.errors == 0
