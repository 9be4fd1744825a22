"""Watch a LlamaIndex query engine and chat engine with groundwatch (no API key, no network).

    pip install -e ".[sdk]" -e integrations/llamaindex    # from a clone of the repository
    python examples/llamaindex_rag.py

A real ``VectorStoreIndex`` over a few documents, with a tiny deterministic embedding and a toy
LLM that answers from the retrieved context, except that it embellishes one answer with a claim
the documents do not make. ``groundwatch_llamaindex.instrument(monitor)`` is the only line the
application needs; every answer is scored on groundwatch's background worker and the result is
printed by an ``on_result`` callback. The evaluation spans join each request's trace (printed at
the end); in production, point the tracer provider at your OTLP collector instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import groundwatch_llamaindex
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import groundwatch as gw

DOCUMENTS = [
    "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair.",
    "Mount Fuji is 3776 metres high. Its last eruption was in 1707.",
    "The Golden Gate Bridge is 2737 metres long. It opened in 1937.",
    "Lake Baikal is 1642 metres deep. It holds about a fifth of the world's fresh surface water.",
]

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - {"the", "is", "it", "of", "how", "what", "was"}


class WordHashEmbedding(BaseEmbedding):
    """A toy embedding: hashed bag of words (so retrieval follows the question's words)."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 256
        for word in words(text):
            vector[int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % 256] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


class ToyLLM(CustomLLM):
    """Answers with the context sentence closest to the question; embellishes bridge answers."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="toy")

    def _answer(self, prompt: str) -> str:
        lines = [line.strip() for line in prompt.splitlines() if line.strip()]
        question = next(
            (
                line.split(":", 1)[1]
                for line in reversed(lines)
                if line.startswith(("Query:", "user:"))
            ),
            "",
        )
        context = prompt.replace(question, " ")
        sentences = re.findall(r"[A-Z][^.\n]*\.", context)
        best = max(sentences, key=lambda s: len(words(question) & words(s)), default="")
        if "bridge" in question.lower():
            best += " It is painted bright blue and was designed by Gustave Eiffel."
        return best

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._answer(prompt))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = ""
        for token in re.findall(r"\S+\s*", self._answer(prompt)):
            text += token
            yield CompletionResponse(text=text, delta=token)


RESULTS: list[tuple[gw.RagRecord, gw.Evaluation]] = []


def collect(record: gw.RagRecord, evaluation: gw.Evaluation) -> None:
    """``on_result`` runs on groundwatch's worker thread: keep it quick (here, a list append)."""
    RESULTS.append((record, evaluation))


def report(monitor: gw.Monitor) -> None:
    monitor.force_flush()

    def fmt(score: float | None) -> str:
        return "  - " if score is None else f"{score:.2f}"

    for record, evaluation in RESULTS:
        print(
            f"  [{evaluation.label:>12}] faithfulness {fmt(evaluation.faithfulness)}"
            f"  groundedness {fmt(evaluation.groundedness)}  <- {record.question}"
        )
        for claim in evaluation.claims:
            if claim.verdict not in ("supported", "inferred"):
                print(f"                 {claim.verdict}: {claim.text}")
    RESULTS.clear()


async def main() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = tracer_provider.get_tracer("example-app")

    monitor = gw.Monitor(
        judge=gw.LocalJudge(),
        sampler=gw.RatioSampler(1.0),  # score everything here; 0.05 is a typical production rate
        tracer_provider=tracer_provider,
        on_result=collect,
        route="docs-qa",
    )
    groundwatch_llamaindex.instrument(monitor)  # the one line an application adds

    index = VectorStoreIndex.from_documents(
        [Document(text=text) for text in DOCUMENTS], embed_model=WordHashEmbedding()
    )
    llm = ToyLLM()
    query_engine = index.as_query_engine(llm=llm, similarity_top_k=2)
    streaming_engine = index.as_query_engine(llm=llm, similarity_top_k=2, streaming=True)
    chat_engine = index.as_chat_engine(
        chat_mode="condense_plus_context", llm=llm, similarity_top_k=1
    )

    print("query engine:")
    with tracer.start_as_current_span("GET /ask"):
        print("  answer:", query_engine.query("How tall is the Eiffel Tower?"))
    with tracer.start_as_current_span("GET /ask"):
        print("  answer:", query_engine.query("How long is the Golden Gate Bridge?"))
    report(monitor)

    print("streaming, async, concurrent:")

    async def ask(question: str) -> str:
        with tracer.start_as_current_span("GET /ask/stream"):
            response = await streaming_engine.aquery(question)
            return "".join([token async for token in response.async_response_gen()])

    for answer in await asyncio.gather(
        ask("How deep is Lake Baikal?"), ask("When was the last eruption?")
    ):
        print("  answer:", answer)
    report(monitor)

    print("chat engine:")
    with tracer.start_as_current_span("POST /chat"):
        print("  answer:", chat_engine.chat("When was it completed?"))
    report(monitor)

    monitor.shutdown()
    groundwatch_llamaindex.uninstrument()

    finished = spans.get_finished_spans()
    requests = {s.context.trace_id: s.name for s in finished if s.parent is None}
    print("evaluation spans, each in its request's trace:")
    for span in finished:
        if span.name == "groundwatch.evaluation":
            attributes = span.attributes or {}
            print(
                f"  trace {span.context.trace_id:032x} ({requests.get(span.context.trace_id)}):"
                f" groundwatch.label={attributes.get('groundwatch.label')}"
            )


if __name__ == "__main__":
    asyncio.run(main())
