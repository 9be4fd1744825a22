"""Fixtures for the LlamaIndex integration: real llama-index-core pipelines, fake models."""

from __future__ import annotations

from collections.abc import Iterator

import groundwatch_llamaindex
import pytest
from llama_index.core import Document, VectorStoreIndex
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from groundwatch.testing import (
    RecordingMonitor,
    capgw,  # noqa: F401  (the runtime's in-memory telemetry fixture)
)

from ._fakes import BagOfWordsEmbedding, ContextAnswerLLM

FACTS = {
    "eiffel": "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair.",
    "fuji": "Mount Fuji is 3776 metres high. Its last eruption was in 1707.",
    "wall": "The Great Wall of China is over 21000 kilometres long.",
    "amazon": "The Amazon river carries more water than any other river on Earth.",
    "everest": "Mount Everest is 8849 metres high. Tenzing Norgay and Edmund Hillary climbed it.",
    "sahara": "The Sahara desert covers about nine million square kilometres of Africa.",
}
QUESTIONS = {
    "eiffel": "How tall is the Eiffel Tower?",
    "fuji": "How high is Mount Fuji?",
    "wall": "How long is the Great Wall of China?",
    "amazon": "Which river carries the most water on Earth?",
    "everest": "Who climbed Mount Everest?",
    "sahara": "How much of Africa does the Sahara desert cover?",
}


@pytest.fixture(scope="session")
def documents() -> list[Document]:
    return [Document(text=text, id_=key, metadata={"topic": key}) for key, text in FACTS.items()]


@pytest.fixture(scope="session")
def index(documents: list[Document]) -> VectorStoreIndex:
    return VectorStoreIndex.from_documents(documents, embed_model=BagOfWordsEmbedding())


@pytest.fixture
def llm() -> ContextAnswerLLM:
    return ContextAnswerLLM()


@pytest.fixture
def monitor() -> Iterator[RecordingMonitor]:
    """A recording monitor bound to every engine; handlers removed afterwards."""
    monitor = RecordingMonitor()
    groundwatch_llamaindex.instrument(monitor)
    capture = groundwatch_llamaindex._attach._capture
    assert capture is not None
    yield monitor
    # Our own bugs are swallowed by the guards in production; here they fail the test.
    assert capture.errors == 0, "a handler raised (see the logged warning)"
    groundwatch_llamaindex.uninstrument()


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    yield provider
    provider.shutdown()
