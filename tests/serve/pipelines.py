"""Real instrumented pipelines exporting OTLP (HTTP or gRPC): OpenInference's LangChain and
LlamaIndex instrumentors on a real LCEL chain and a real query engine (fake models, real
retrievers), with no groundwatch callback attached. Each run's spans also land in an in-memory
exporter, so a test knows the root span the evaluation must hang under."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry
from testkit.chains import ANSWER, build


@dataclass
class App:
    """The application side: its tracer provider and what it exported."""

    provider: TracerProvider
    exported: InMemorySpanExporter

    def root(self) -> ReadableSpan:
        roots = [s for s in self.exported.get_finished_spans() if s.parent is None]
        assert len(roots) == 1, [s.name for s in roots]
        return roots[0]


def app_provider(
    endpoint: str, *, service: str = "rag-app", gzip: bool = False, grpc: bool = False
) -> App:
    """An app's tracer provider exporting to ``endpoint``: the SDK's OTLP/HTTP exporter, or
    with ``grpc`` its OTLP/gRPC exporter (``endpoint`` is then ``host:port``)."""
    exported = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exported))
    exporter: SpanExporter
    if grpc:
        from grpc import Compression as GrpcCompression
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        exporter = GrpcSpanExporter(
            endpoint=endpoint,
            insecure=True,
            compression=GrpcCompression.Gzip if gzip else GrpcCompression.NoCompression,
        )
    else:
        exporter = OTLPSpanExporter(
            endpoint=f"{endpoint}/v1/traces",
            compression=Compression.Gzip if gzip else Compression.NoCompression,
        )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return App(provider, exported)


@contextmanager
def pristine_callback_manager() -> Iterator[None]:
    """Put LangChain's ``BaseCallbackManager.__init__`` back afterwards: an instrumentor's
    uninstrument cannot remove a wrapper that another one stacked above it, and a leftover
    would send the next test's spans to this test's (stopped) receiver."""
    from langchain_core.callbacks import BaseCallbackManager

    original = BaseCallbackManager.__init__
    try:
        yield
    finally:
        BaseCallbackManager.__init__ = original  # type: ignore[method-assign]


@contextmanager
def langchain_instrumented(
    provider: TracerProvider, *, openllmetry: bool = False
) -> Iterator[None]:
    """OpenInference's LangChain instrumentor (OpenLLMetry's with ``openllmetry``)."""
    if openllmetry:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor as Instrumentor
    else:
        from openinference.instrumentation.langchain import LangChainInstrumentor as Instrumentor

    with pristine_callback_manager():
        Instrumentor().instrument(tracer_provider=provider)
        try:
            yield
        finally:
            Instrumentor().uninstrument()


def llamaindex_engine() -> Any:
    """A real LlamaIndex query engine: vector index, bag-of-words embedding, extractive LLM."""
    from llama_index.core import Document, VectorStoreIndex

    from ..llamaindex._fakes import BagOfWordsEmbedding, ContextAnswerLLM
    from ..llamaindex.conftest import FACTS

    index = VectorStoreIndex.from_documents(
        [Document(text=t, id_=k) for k, t in FACTS.items()], embed_model=BagOfWordsEmbedding()
    )
    return index.as_query_engine(llm=ContextAnswerLLM(), similarity_top_k=2)


@contextmanager
def llamaindex_instrumented(provider: TracerProvider) -> Iterator[None]:
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    try:
        yield
    finally:
        LlamaIndexInstrumentor().uninstrument()


def assert_evaluation_of(
    span: Any, app: App, question: str, passages: list[str], answer: str
) -> None:
    """``span`` is the evaluation of this run: under its root span, scored as ``gw.evaluate``
    scores the same inputs, read from OpenInference spans of the ``rag-app`` service."""
    root = app.root()
    # Same trace, child of the pipeline's root span.
    assert span.context.trace_id == root.context.trace_id
    assert span.parent is not None and span.parent.span_id == root.context.span_id
    expected = gw.evaluate(answer, passages, question=question)
    attrs = dict(span.attributes)
    assert attrs.pop(sc.GROUNDWATCH_LABEL) == expected.label
    assert attrs.pop(sc.GROUNDWATCH_FAITHFULNESS) == pytest.approx(expected.faithfulness)
    assert attrs.pop(sc.GROUNDWATCH_GROUNDEDNESS) == pytest.approx(expected.groundedness)
    assert attrs.pop(sc.GROUNDWATCH_SERVE_SOURCE) == "openinference"
    assert attrs.pop(sc.GROUNDWATCH_ROUTE) == "rag-app"  # the service name


LCEL_QUESTION = "What is the refund policy?"


def lcel_scored_through(capgw: GroundwatchTelemetry, app: App) -> Any:
    """Run the LCEL chain (question :data:`LCEL_QUESTION`) under OpenInference's instrumentor
    exporting through ``app``, wait for serve's evaluation and check it with
    :func:`assert_evaluation_of`. Returns the chain's case (its ``expected_docs``)."""
    from .conftest import wait_for_evaluations

    case = build("lcel")
    with langchain_instrumented(app.provider):
        assert case.chain.invoke(LCEL_QUESTION) == ANSWER
    (span,) = wait_for_evaluations(capgw, 1)
    passages = [text for _, text in case.expected_docs(LCEL_QUESTION)]
    assert_evaluation_of(span, app, LCEL_QUESTION, passages, ANSWER)
    return case
