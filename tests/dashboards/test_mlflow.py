"""MLflowSink against a real MLflow server: a LangChain chain's and a LlamaIndex engine's traces
sent over OTLP (the SDK's OTLP/HTTP exporter, OpenInference's instrumentors), groundwatch's
verdicts and a person's feedback written as assessments, read back through MLflow's own REST API.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import groundwatch_langchain
import groundwatch_llamaindex
import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnablePassthrough
from openinference.instrumentation.langchain import LangChainInstrumentor
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

import groundwatch as gw
from groundwatch.dashboards.mlflow import MLflowSink
from groundwatch.testing import GroundwatchTelemetry
from groundwatch.testing import capgw as capgw_fixture  # noqa: F401 (the fixture "capgw")
from testkit.chains import PROMPT, chat_model, format_docs, vector_store

from .conftest import LostWrites
from .mlflow_server import MLflowServer, mlflow_binary

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

QUESTION = "What is the refund policy?"
HALLUCINATED = "Refunds are accepted within 90 days. Shipping is always free on weekends."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MLflowServer]:
    server = MLflowServer(mlflow_binary(), Path(tmp_path_factory.mktemp("mlflow")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def running(server: MLflowServer) -> MLflowServer:
    """The server, started again if a test before this one left it stopped."""
    if not server.up:
        server.start()
    return server


@pytest.fixture
def sink(running: MLflowServer, request: pytest.FixtureRequest) -> Iterator[MLflowSink]:
    sink = MLflowSink(running.url, experiment=f"gw-{request.node.name}"[:200])
    yield sink
    sink.shutdown(5000)


def app_tracing(sink: MLflowSink, batch: bool = False) -> TracerProvider:
    """The app's own tracing: spans to the MLflow server over OTLP/HTTP, in the sink's
    experiment."""
    exporter = OTLPSpanExporter(endpoint=sink.otlp_endpoint, headers=sink.otlp_headers())
    provider = TracerProvider(shutdown_on_exit=False)
    processor = (
        BatchSpanProcessor(exporter, schedule_delay_millis=60_000)
        if batch
        else SimpleSpanProcessor(exporter)
    )
    provider.add_span_processor(processor)
    return provider


def rag_chain(answer: str) -> Any:
    retriever = vector_store().as_retriever(search_kwargs={"k": 2})
    return (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | chat_model("list", answer)
        | StrOutputParser()
    )


def ask(provider: TracerProvider, handler: Any, answer: str) -> int:
    """One request through a real LangChain chain; its trace id."""
    with provider.get_tracer("app").start_as_current_span("request") as span:
        rag_chain(answer).invoke(QUESTION, {"callbacks": [handler]})
    return span.get_span_context().trace_id


def by_name(assessments: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each assessment by ``(name, source type)``; fails on a duplicate."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for a in assessments:
        key = (a["assessment_name"], a["source"]["source_type"])
        assert key not in found, f"duplicate assessment {key}: {assessments}"
        found[key] = a
    return found


def wait_for(predicate: Any, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    return predicate()


def test_langchain_verdicts_and_feedback_are_assessments_on_the_answers_span(
    capgw: GroundwatchTelemetry, running: MLflowServer, sink: MLflowSink, lost: LostWrites
) -> None:
    provider = app_tracing(sink)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0), on_result=sink)
    try:
        trace_id = ask(
            provider, groundwatch_langchain.GroundwatchCallbackHandler(monitor), HALLUCINATED
        )
        assert monitor.force_flush(30_000)
    finally:
        instrumentor.uninstrument()
    ((record, evaluation),) = capgw.results()
    assert evaluation.label == "hallucinated"
    assert record.trace_id == trace_id and record.span_id

    found = by_name(running.assessments(trace_id))
    assert set(found) == {
        ("groundedness", "CODE"),
        ("faithfulness", "CODE"),
        ("hallucination", "CODE"),
    }
    span_hex = f"{record.span_id:016x}"
    assert span_hex in running.span_ids(trace_id)  # a span MLflow has, from the app's OTLP
    for a in found.values():
        assert a["span_id"] == span_hex
        assert a["source"]["source_id"] == "groundwatch/local"
        metadata = a["metadata"]
        assert metadata["judge"] == "local"
        assert metadata["audit"] == "false"
        assert float(metadata["hallucination_probability"]) == pytest.approx(
            evaluation.hallucination_probability, abs=1e-6
        )
        assert "unsupported: claim" in a["rationale"] or "contradicted: claim" in a["rationale"]
        assert "90 days" not in a["rationale"]  # content only with capture on
    assert found[("groundedness", "CODE")]["feedback"]["value"] == evaluation.groundedness
    assert found[("faithfulness", "CODE")]["feedback"]["value"] == evaluation.faithfulness
    assert found[("hallucination", "CODE")]["feedback"]["value"] == "hallucinated"

    # MLflow's own search finds it by the label and by the score.
    experiment = sink.experiment_id()
    tr = f"tr-{trace_id:032x}"
    assert running.search(experiment, "feedback.hallucination = 'hallucinated'") == [tr]
    assert running.search(experiment, "feedback.groundedness < 0.5") == [tr]

    # A person's thumbs-down: a HUMAN assessment beside the judge's, on the same span.
    monitor.feedback(label="hallucinated", trace_id=trace_id, score=0.0, comment="wrong days")
    assert monitor.force_flush(30_000)
    found = by_name(running.assessments(trace_id))
    human = found[("hallucination", "HUMAN")]
    assert human["feedback"]["value"] == "hallucinated"
    assert human["span_id"] == span_hex
    assert human["source"]["source_id"] == "human"
    assert human["metadata"]["judge_label"] == "hallucinated"
    assert "rationale" not in human  # the comment is content: capture is off
    assert found[("groundedness", "HUMAN")]["feedback"]["value"] == 0.0
    assert len(found) == 5
    monitor.shutdown(10_000)
    assert lost.counts("mlflow") == {}


def test_llamaindex_engine_verdicts_with_content_capture(
    capgw: GroundwatchTelemetry, running: MLflowServer, sink: MLflowSink, lost: LostWrites
) -> None:
    from llama_index.core import Document, VectorStoreIndex

    from ..llamaindex._fakes import BagOfWordsEmbedding, ContextAnswerLLM

    provider = app_tracing(sink)
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    monitor = capgw.monitor(
        judge=gw.LocalJudge(),
        sampler=gw.RatioSampler(1.0),
        on_result=sink,
        capture_content=True,
    )
    groundwatch_llamaindex.instrument(monitor, route="docs-qa")
    try:
        docs = [
            Document(text="The Eiffel Tower is 330 metres tall. It was completed in 1889."),
            Document(text="Mount Fuji is 3776 metres high. Its last eruption was in 1707."),
        ]
        index = VectorStoreIndex.from_documents(docs, embed_model=BagOfWordsEmbedding())
        engine = index.as_query_engine(llm=ContextAnswerLLM(), similarity_top_k=1)
        with provider.get_tracer("app").start_as_current_span("request") as span:
            engine.query("How tall is the Eiffel Tower?")
        trace_id = span.get_span_context().trace_id
        assert monitor.force_flush(30_000)
        # A person disagrees with the judge.
        monitor.feedback(label="hallucinated", trace_id=trace_id, comment="1889 is wrong")
        assert monitor.force_flush(30_000)
    finally:
        groundwatch_llamaindex.uninstrument()
        instrumentor.uninstrument()
    ((record, evaluation),) = capgw.results()
    assert evaluation.label == "grounded"

    found = by_name(running.assessments(trace_id))
    assert set(found) == {
        ("groundedness", "CODE"),
        ("faithfulness", "CODE"),
        ("hallucination", "CODE"),
        ("hallucination", "HUMAN"),
    }
    span_hex = f"{record.span_id:016x}"
    assert span_hex in running.span_ids(trace_id)
    assert {a["span_id"] for a in found.values()} == {span_hex}
    assert found[("groundedness", "CODE")]["feedback"]["value"] == 1.0
    assert found[("hallucination", "CODE")]["metadata"]["route"] == "docs-qa"
    assert found[("hallucination", "HUMAN")]["rationale"] == "1889 is wrong"
    assert found[("hallucination", "HUMAN")]["feedback"]["value"] == "hallucinated"
    assert found[("hallucination", "CODE")]["feedback"]["value"] == "grounded"
    # MLflow's search matches either source's value.
    experiment = sink.experiment_id()
    tr = f"tr-{trace_id:032x}"
    assert running.search(experiment, "feedback.hallucination = 'hallucinated'") == [tr]
    assert running.search(experiment, "feedback.hallucination = 'grounded'") == [tr]
    monitor.shutdown(10_000)
    assert lost.counts("mlflow") == {}


def test_assessments_wait_for_a_trace_that_arrives_later(
    capgw: GroundwatchTelemetry,
    running: MLflowServer,
    sink: MLflowSink,
    lost: LostWrites,
    fast_backoff: None,
) -> None:
    """The app's span exporter holds the trace (a 60 s batch); the sink's writes get MLflow's
    404 for the trace and wait; once the app flushes, they land, once each."""
    provider = app_tracing(sink, batch=True)
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0), on_result=sink)
    trace_id = ask(
        provider, groundwatch_langchain.GroundwatchCallbackHandler(monitor), HALLUCINATED
    )
    assert not monitor.force_flush(2_000)  # the writes are waiting for the trace
    assert running.trace(trace_id) is None
    assert sink.delivery.pending() == 3
    provider.force_flush()
    assert monitor.force_flush(30_000)
    assert len(by_name(running.assessments(trace_id))) == 3
    assert sink.delivery.delivered == 3
    monitor.shutdown(10_000)
    provider.shutdown()
    assert lost.counts("mlflow") == {}


def test_server_stopped_mid_run_counted_not_raised_nothing_duplicated(
    capgw: GroundwatchTelemetry,
    running: MLflowServer,
    lost: LostWrites,
    fast_backoff: None,
) -> None:
    """Two sinks on one outage: one retries for its default minute and delivers every write
    once when the server is back; one with a 0.3 s retry window gives up, counted."""
    # Nothing is sent before a flush asks (a minute's schedule), so the outage comes first.
    sink = MLflowSink(running.url, experiment="gw-stopped", schedule_delay_millis=60_000)
    short = MLflowSink(running.url, retry_window_millis=300, schedule_delay_millis=60_000)
    provider = app_tracing(sink)
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0), on_result=sink)
    monitor_short = capgw.monitor(
        judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0), on_result=short
    )
    handler = groundwatch_langchain.GroundwatchCallbackHandler(monitor)
    first = ask(provider, handler, HALLUCINATED)
    assert monitor.force_flush(30_000)
    assert len(by_name(running.assessments(first))) == 3
    # Their traces reach MLflow; their verdicts wait in the sinks' queues...
    second = ask(provider, handler, HALLUCINATED)
    third = ask(
        provider, groundwatch_langchain.GroundwatchCallbackHandler(monitor_short), HALLUCINATED
    )
    running.stop()  # ...and the server goes away before they are sent.
    try:
        assert not monitor.force_flush(2_000)  # retrying: connection refused
        assert sink.delivery.pending() == 3
        monitor_short.force_flush(10_000)
        assert wait_for(lambda: short.delivery.lost == 3)
        assert lost.counts("mlflow") == {"connection": 3}
    finally:
        running.start()
    assert monitor.force_flush(60_000)
    for trace_id in (first, second):
        assert len(by_name(running.assessments(trace_id))) == 3  # by_name fails on duplicates
    assert sink.delivery.lost == 0
    assert running.assessments(third) == []
    monitor.shutdown(10_000)
    monitor_short.shutdown(10_000)


def test_a_write_sent_again_updates_instead_of_duplicating(
    running: MLflowServer, sink: MLflowSink
) -> None:
    """An accepted write whose reply was lost is sent again by the delivery: the second try
    (and a second verdict on the same answer) update the one assessment."""
    from groundwatch.types import Evaluation, RagRecord

    provider = app_tracing(sink)
    with provider.get_tracer("app").start_as_current_span("request") as span:
        pass
    context = span.get_span_context()
    record = RagRecord(answer="a", trace_id=context.trace_id, span_id=context.span_id)
    first = Evaluation(label="hallucinated", groundedness=0.25, faithfulness=1.0, judge="local")
    writes = sink.evaluation_writes(record, first)
    exporter = sink.delivery.exporter
    assert [r.outcome.value for r in exporter.export(writes, 10)] == ["done"] * 3
    assert [r.outcome.value for r in exporter.export(writes, 10)] == ["done"] * 3
    second = first.model_copy(update={"label": "grounded", "groundedness": 0.75})
    assert [
        r.outcome.value for r in exporter.export(sink.evaluation_writes(record, second), 10)
    ] == ["done"] * 3
    found = by_name(running.assessments(context.trace_id))
    assert len(found) == 3
    assert found[("groundedness", "CODE")]["feedback"]["value"] == 0.75
    assert found[("hallucination", "CODE")]["feedback"]["value"] == "grounded"


def test_mlflow_does_not_read_groundwatchs_span_or_events_as_assessments(
    running: MLflowServer, sink: MLflowSink
) -> None:
    """The evaluation span (with its attributes) and an evaluation event reach MLflow, which
    stores them as span data and makes no assessment of them: the sink is the only path (if a
    later MLflow reads them, this fails and the sink would be writing a second copy)."""
    from groundwatch.telemetry import semconv as sc

    provider = app_tracing(sink)
    monitor = gw.Monitor(  # its evaluation span goes to MLflow with the app's
        gw.LocalJudge(),
        gw.RatioSampler(1.0),
        tracer_provider=provider,
        executor="thread",
        shutdown_on_exit=False,
    )
    with provider.get_tracer("app").start_as_current_span("request") as span:
        monitor.record(question=QUESTION, contexts=["Refunds take 30 days."], answer=HALLUCINATED)
        # The log event's attributes as a span event too: MLflow has no /v1/logs to take it.
        span.add_event(
            "gen_ai.evaluation.result",
            {"gen_ai.evaluation.name": "groundedness", "gen_ai.evaluation.score.value": 0.0},
        )
    assert monitor.force_flush(30_000)
    trace_id = span.get_span_context().trace_id
    assert wait_for(lambda: len(running.span_ids(trace_id)) == 2)  # request, evaluation
    status, body = running.call(
        "GET", f"/api/3.0/mlflow/traces/batchGet?trace_ids=tr-{trace_id:032x}"
    )
    assert status == 200
    (stored,) = body["traces"]
    names = {s["name"] for s in stored["spans"]}
    assert names == {"request", sc.SPAN_EVALUATION}
    assert running.assessments(trace_id) == []
    status, _ = running.call("POST", "/v1/logs", {})
    assert status == 404  # no OTLP logs receiver
    monitor.shutdown(10_000)
