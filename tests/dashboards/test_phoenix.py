"""PhoenixSink against a real Arize Phoenix server: a LangChain chain and a LlamaIndex query
engine traced into it over OTLP by OpenInference's instrumentors, groundwatch's verdicts written
as Phoenix's own annotations and read back through Phoenix's own API."""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import groundwatch as gw
from groundwatch.dashboards.phoenix import PhoenixSink
from groundwatch.types import Evaluation, RagRecord

from .conftest import LostWrites
from .phoenix_server import PhoenixServer, phoenix_binary

pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::groundwatch.LossWarning"
)

PROJECT = "gw-tests"
QUESTION = "What is the refund policy?"
# The first sentence is the refund document's; the second is nowhere in the store.
HALLUCINATED = (
    "Refunds are accepted within 30 days of purchase with a receipt. "
    "Refunds are paid out in gold bars at the head office in Lisbon."
)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    server = PhoenixServer(phoenix_binary(), tmp_path_factory.mktemp("phoenix"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


class App:
    """The app's tracing: OTLP/HTTP into Phoenix's project (off while ``to_phoenix`` is false,
    as when a collector holds the spans), and an in-memory copy of every span."""

    def __init__(self, phoenix: PhoenixServer, *, to_phoenix: bool = True) -> None:
        self.exported = InMemorySpanExporter()
        self.provider = TracerProvider(
            resource=Resource.create(
                {"service.name": "rag-app", "openinference.project.name": PROJECT}
            )
        )
        self.provider.add_span_processor(SimpleSpanProcessor(self.exported))
        self.otlp = OTLPSpanExporter(endpoint=f"{phoenix.url}/v1/traces")
        if to_phoenix:
            self.provider.add_span_processor(SimpleSpanProcessor(self.otlp))

    def root(self) -> ReadableSpan:
        roots = [s for s in self.exported.get_finished_spans() if s.parent is None]
        assert len(roots) == 1, [s.name for s in roots]
        return roots[0]

    def resend(self) -> None:
        """What a collector does once the server is back: send the held spans."""
        self.otlp.export(list(self.exported.get_finished_spans()))


class Results:
    """What the monitor scored (its on_result), beside the sink."""

    def __init__(self) -> None:
        self.items: list[tuple[RagRecord, Evaluation]] = []

    def __call__(self, record: RagRecord, evaluation: Evaluation) -> None:
        self.items.append((record, evaluation))


def monitor_with(sink: PhoenixSink, results: Results, app: App, **kwargs: Any) -> gw.Monitor:
    return gw.Monitor(
        judge=gw.LocalJudge(),
        sampler=gw.RatioSampler(1.0),
        on_result=[results, sink],
        tracer_provider=app.provider,
        shutdown_on_exit=False,
        **kwargs,
    )


def run_chain(monitor: gw.Monitor, app: App, answer: str = HALLUCINATED) -> None:
    from groundwatch_langchain import GroundwatchCallbackHandler
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.runnables import RunnablePassthrough

    from testkit.chains import PROMPT, chat_model, format_docs, vector_store

    from ..serve.pipelines import langchain_instrumented

    retriever = vector_store().as_retriever(search_kwargs={"k": 2})
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | chat_model("list", answer=answer)
        | StrOutputParser()
    )
    with langchain_instrumented(app.provider):
        config: Any = {"callbacks": [GroundwatchCallbackHandler(monitor)]}
        assert chain.invoke(QUESTION, config=config) == answer


def by_name(annotations: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    named: dict[str, dict[str, Any]] = {}
    for a in annotations:
        key = a["name"] if a["annotator_kind"] != "HUMAN" else f"human:{a['name']}"
        assert key not in named, f"duplicate annotation {key}: {annotations}"
        named[key] = a
    return named


def retriever_span(spans: list[dict[str, Any]]) -> dict[str, Any]:
    [found] = [s for s in spans if s["span_kind"] == "RETRIEVER"]
    return found


def test_phoenix_does_not_read_groundwatchs_span_or_events_as_annotations(
    phoenix: PhoenixServer,
) -> None:
    """Why the sink exists: the evaluation span reaches Phoenix, and no annotation comes of it
    (Phoenix takes no OTLP logs, so the gen_ai.evaluation.result events cannot either)."""
    app = App(phoenix)
    results = Results()
    sink = PhoenixSink(phoenix.url, PROJECT)
    monitor = gw.Monitor(
        judge=gw.LocalJudge(),
        sampler=gw.RatioSampler(1.0),
        on_result=results,
        tracer_provider=app.provider,
        shutdown_on_exit=False,
    )
    run_chain(monitor, app)
    assert monitor.shutdown(10_000)
    root = app.root()
    spans = phoenix.wait_for_spans(
        PROJECT, root.context.trace_id, len(app.exported.get_finished_spans())
    )
    assert "groundwatch.evaluation" in {s["name"] for s in spans}
    # No OTLP logs endpoint: the gen_ai.evaluation.result events have nowhere to land.
    with pytest.raises(urllib.error.HTTPError) as refused:
        phoenix.post_raw("v1/logs", {"resourceLogs": []})
    assert refused.value.code in (404, 405)
    time.sleep(0.5)
    for span in spans:
        assert phoenix.span_annotations(PROJECT, int(span["context"]["span_id"], 16)) == []
    sink.shutdown(1000)


def test_a_langchain_chain_gets_scores_documents_and_feedback_as_phoenix_annotations(
    phoenix: PhoenixServer, lost: LostWrites
) -> None:
    app = App(phoenix)
    results = Results()
    sink = PhoenixSink(phoenix.url, PROJECT, schedule_delay_millis=100)
    monitor = monitor_with(sink, results, app, route="refunds")
    run_chain(monitor, app)
    assert monitor.force_flush(30_000)
    [(record, evaluation)] = results.items
    root = app.root()
    # The record was made under OpenInference's span of the chain: the trace's root.
    assert record.span_id == root.context.span_id
    assert evaluation.label == "hallucinated"

    annotations = by_name(phoenix.span_annotations(PROJECT, root.context.span_id))
    assert set(annotations) == {"groundedness", "faithfulness", "hallucination"}
    for name, score in (
        ("groundedness", evaluation.groundedness),
        ("faithfulness", evaluation.faithfulness),
        ("hallucination", evaluation.hallucination_probability),
    ):
        a = annotations[name]
        assert a["span_id"] == f"{root.context.span_id:016x}"
        assert a["annotator_kind"] == "CODE"  # the local judge
        assert a["identifier"] == "groundwatch"
        assert a["result"]["label"] == "hallucinated"
        assert a["result"]["score"] == pytest.approx(score)
        # Content capture is off: the unsupported claim is named by its place, not quoted.
        explanation = a["result"]["explanation"]
        assert "unsupported: claim 2 (answer[" in explanation, explanation
        assert "gold" not in explanation
        metadata = a["metadata"]
        assert metadata["judge"] == "local"
        assert metadata["route"] == "refunds"
        assert metadata["audit"] is False
        assert metadata["hallucination_probability"] == pytest.approx(
            evaluation.hallucination_probability
        )
        assert metadata["claims"] == {
            "supported": 1,
            "inferred": 0,
            "unsupported": 1,
            "contradicted": 0,
        }
    assert evaluation.groundedness == pytest.approx(0.5)

    # Each retrieved document: whether it backed a claim, and which.
    spans = phoenix.spans(PROJECT, root.context.trace_id)
    retriever = retriever_span(spans)
    documents = sorted(
        phoenix.document_annotations(retriever["id"]), key=lambda d: d["documentPosition"]
    )
    attributes = retriever["attributes"]
    contents = [
        attributes[f"retrieval.documents.{d['documentPosition']}.document.content"]
        for d in documents
    ]
    assert len(documents) == 2
    refund = contents.index(HALLUCINATED.split(" Refunds")[0])
    assert documents[refund]["name"] == "support"
    assert documents[refund]["label"] == "supports"
    assert documents[refund]["score"] == 1.0
    assert documents[refund]["explanation"] == "backs claim 1"
    assert documents[refund]["annotatorKind"] == "CODE"
    other = documents[1 - refund]
    assert (other["label"], other["score"]) == ("unused", 0.0)

    # A person's verdict: a HUMAN annotation on the same span.
    monitor.feedback(label="grounded", trace_id=f"{root.context.trace_id:032x}", score=1.0)
    assert monitor.force_flush(30_000)
    annotations = by_name(phoenix.span_annotations(PROJECT, root.context.span_id))
    human = annotations["human:groundedness"]
    assert human["annotator_kind"] == "HUMAN"
    assert human["span_id"] == f"{root.context.span_id:016x}"
    assert human["result"]["label"] == "grounded"
    assert human["result"]["score"] == 1.0
    assert human["metadata"]["judge_label"] == "hallucinated"
    assert human["metadata"]["source"] == "human"
    assert annotations["groundedness"]["result"]["label"] == "hallucinated"  # the judge's stays

    # Phoenix's own span query (the filter docs/phoenix.md gives) finds the hallucinated answer
    # by groundwatch's annotation, and only it (the reply is an Arrow table: ids as text).
    found = phoenix.post_raw(
        "v1/spans",
        {
            "queries": [
                {"filter": {"condition": "annotations['hallucination'].label == 'hallucinated'"}}
            ],
            "project_name": PROJECT,
        },
    )
    assert f"{root.context.span_id:016x}".encode() in found
    assert retriever["context"]["span_id"].encode() not in found
    assert monitor.shutdown(10_000)
    assert lost.counts("phoenix") == {}
    assert sink.delivery.delivered == 5  # three span annotations, the documents, the feedback


def test_a_llamaindex_query_engine_gets_its_scores_on_the_query_span(
    phoenix: PhoenixServer, lost: LostWrites
) -> None:
    import groundwatch_llamaindex
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    from ..serve.pipelines import llamaindex_engine

    app = App(phoenix)
    results = Results()
    sink = PhoenixSink(phoenix.url, PROJECT, schedule_delay_millis=100)
    monitor = monitor_with(sink, results, app, capture_content=True)
    engine = llamaindex_engine()  # indexed before tracing: the trace is the query's alone
    # OpenInference first: its query span is current when groundwatch's capture starts.
    LlamaIndexInstrumentor().instrument(tracer_provider=app.provider)
    groundwatch_llamaindex.instrument(monitor)
    try:
        answer = str(engine.query("How high is Mount Fuji?"))
    finally:
        groundwatch_llamaindex.uninstrument()
        LlamaIndexInstrumentor().uninstrument()
    assert monitor.force_flush(30_000)
    [(record, evaluation)] = results.items
    assert record.answer == answer and evaluation.label == "grounded"
    root = app.root()
    assert root.name.endswith("query") and record.span_id == root.context.span_id
    annotations = by_name(phoenix.span_annotations(PROJECT, root.context.span_id))
    assert {n: (a["result"]["label"], a["annotator_kind"]) for n, a in annotations.items()} == {
        "groundedness": ("grounded", "CODE"),
        "faithfulness": ("grounded", "CODE"),
        "hallucination": ("grounded", "CODE"),
    }
    assert annotations["groundedness"]["result"]["score"] == 1.0
    spans = phoenix.spans(PROJECT, root.context.trace_id)
    # LlamaIndex traces its retrieval twice (retrieve, and _retrieve inside it): the span that
    # holds the documents gets their annotations, the other has none to annotate.
    retrievers = {
        any(k.startswith("retrieval.documents.") for k in s["attributes"]): s
        for s in spans
        if s["span_kind"] == "RETRIEVER"
    }
    documents = phoenix.document_annotations(retrievers[True]["id"])
    assert sorted((d["label"], d["explanation"]) for d in documents) == [
        ("supports", "backs claim 1"),
        ("unused", "backs no claim of the answer"),
    ]
    assert phoenix.document_annotations(retrievers[False]["id"]) == []
    assert monitor.shutdown(10_000)
    assert lost.counts("phoenix") == {}


@pytest.mark.usefixtures("fast_backoff")  # retries every few ms: the test waits on the server
def test_a_server_stopped_mid_run_is_counted_not_raised_and_nothing_is_duplicated(
    phoenix: PhoenixServer, lost: LostWrites
) -> None:
    # Before: one chain scored and delivered.
    before_app = App(phoenix)
    results = Results()
    sink = PhoenixSink(phoenix.url, PROJECT, schedule_delay_millis=50, retry_window_millis=120_000)
    # A second sink with a short retry window: the one that gives up while the server is away.
    impatient = PhoenixSink(phoenix.url, PROJECT, schedule_delay_millis=50, retry_window_millis=300)
    monitor = monitor_with(sink, results, before_app)
    run_chain(monitor, before_app)
    assert monitor.force_flush(30_000)
    first = before_app.root().context.span_id
    assert len(phoenix.span_annotations(PROJECT, first)) == 3

    phoenix.stop()
    try:
        # The app goes on: its chain runs, nothing raises into it; its spans wait in a
        # collector (here: in memory) while the server is away.
        during_app = App(phoenix, to_phoenix=False)
        monitor_during = monitor_with(sink, results, during_app)
        monitor_during.add_result_callback(impatient)
        run_chain(monitor_during, during_app)
        deadline = time.monotonic() + 20
        while impatient.delivery.lost < 4 and time.monotonic() < deadline:
            time.sleep(0.05)  # scored, sent, retried within its window, given up
        assert monitor_during.force_flush(500) is False  # the patient sink is not done
        assert lost.counts("phoenix") == {"connection": 4}  # its 3 annotations + documents
        # The first chain's writes are sent again (as a retry after a lost reply would be).
        record, evaluation = results.items[0]
        sink(record, evaluation)
    finally:
        phoenix.start()
    during_app.resend()
    assert sink.force_flush(60_000)
    second = during_app.root().context.span_id
    # Delivered once each after the server returned: no duplicates, before or after.
    for span_id in (first, second):
        annotations = by_name(phoenix.span_annotations(PROJECT, span_id))
        assert set(annotations) == {"groundedness", "faithfulness", "hallucination"}
    retriever = retriever_span(phoenix.spans(PROJECT, during_app.root().context.trace_id))
    assert len(phoenix.document_annotations(retriever["id"])) == 2
    assert lost.counts("phoenix") == {"connection": 4}  # the patient sink lost nothing
    for m in (monitor, monitor_during):
        m.shutdown(10_000)
    impatient.shutdown(1000)


def test_a_record_without_a_span_is_counted_invalid_input(
    phoenix: PhoenixServer, lost: LostWrites
) -> None:
    sink = PhoenixSink(phoenix.url, PROJECT)
    sink(RagRecord(question="q", contexts=["c"], answer="a"), gw.evaluate("a", ["c"]))
    assert lost.counts("phoenix") == {"invalid_input": 1}
    assert sink.shutdown(1000)


def test_configuration_from_phoenixs_environment_variables_and_no_key_in_the_repr(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", "http://phoenix.internal:6006/v1/traces")
    monkeypatch.setenv("PHOENIX_PROJECT_NAME", "support-bot")
    monkeypatch.setenv("PHOENIX_API_KEY", "px-secret-key")
    monkeypatch.setenv("PHOENIX_CLIENT_HEADERS", "x-tenant=acme,x-team=rag%20ops")
    sink = PhoenixSink()
    assert sink.endpoint == "http://phoenix.internal:6006"
    assert sink.project == "support-bot"
    assert sink.exporter._headers == {
        "x-tenant": "acme",
        "x-team": "rag ops",
        "authorization": "Bearer px-secret-key",
    }
    assert "px-secret-key" not in repr(sink) + repr(sink.exporter)
    monkeypatch.setenv("PHOENIX_ENDPOINT", "https://app.phoenix.arize.com/s/acme")
    assert PhoenixSink().endpoint == "https://app.phoenix.arize.com/s/acme"
    assert PhoenixSink("http://127.0.0.1:1", "p").endpoint == "http://127.0.0.1:1"


def test_serve_with_the_phoenix_sink_annotates_the_traces_it_receives(
    phoenix: PhoenixServer, lost: LostWrites
) -> None:
    """``groundwatch serve --sink phoenix``'s set-up: an app traced by OpenInference alone
    sends its spans to Phoenix and to serve; serve scores the interaction and its sink writes
    the verdict on the trace's root span in Phoenix."""
    from ..extras import require_serve_extra

    require_serve_extra()
    from groundwatch.serve import TraceAssembler, TraceService

    from ..serve.conftest import RunningReceiver

    sink = PhoenixSink(phoenix.url, PROJECT, schedule_delay_millis=50)
    results = Results()
    monitor = gw.Monitor(
        judge=gw.LocalJudge(),
        on_result=[results, sink],
        executor="thread",
        tracer_provider=TracerProvider(),  # serve's own evaluation spans: not under test here
        shutdown_on_exit=False,
    )
    service = TraceService(
        monitor,
        TraceAssembler(quiet_s=0.2, orphan_s=2.0, max_traces=100, max_spans=512),
        max_body_bytes=1 << 20,
        max_queue_size=64,
    )
    receiver = RunningReceiver(service)
    try:
        app = App(phoenix)
        app.provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces"))
        )
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.runnables import RunnablePassthrough

        from testkit.chains import PROMPT, chat_model, format_docs, vector_store

        from ..serve.pipelines import langchain_instrumented

        retriever = vector_store().as_retriever(search_kwargs={"k": 2})
        chain = (
            {"context": retriever | format_docs, "question": RunnablePassthrough()}
            | PROMPT
            | chat_model("list", answer=HALLUCINATED)
            | StrOutputParser()
        )
        with langchain_instrumented(app.provider):
            chain.invoke(QUESTION)
        deadline = time.monotonic() + 30
        while not results.items and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sink.force_flush(30_000)
        [(record, evaluation)] = results.items
        root = app.root()
        assert record.span_id == root.context.span_id
        annotations = by_name(phoenix.span_annotations(PROJECT, root.context.span_id))
        assert {n: a["result"]["label"] for n, a in annotations.items()} == {
            "groundedness": evaluation.label,
            "faithfulness": evaluation.label,
            "hallucination": evaluation.label,
        }
        assert evaluation.label == "hallucinated"
    finally:
        receiver.stop()
        monitor.shutdown(10_000)
    assert lost.counts("phoenix") == {}
