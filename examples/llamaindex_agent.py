"""Watch a LlamaIndex agent with groundwatch: its answers checked against its tools' outputs.

    pip install -e ".[sdk]" -e integrations/llamaindex    # from a clone of the repository
    python examples/llamaindex_agent.py

No API key, no network: a real ``FunctionAgent`` runs its real steps and calls real tools, and
only the model is scripted (LlamaIndex's ``MockFunctionCallingLLM``) to ask for tools, then
answer. One answer changes the number the order tool returned. The agent's three turns share a
``Memory`` whose ``session_id`` becomes each record's ``gen_ai.conversation.id``.
``groundwatch_llamaindex.instrument(monitor)`` is the only line the application adds: every
``agent.run`` is one record whose passages are what the tools returned (a retriever tool's
documents, a function's text; structured output as JSON with sorted keys), scored on
groundwatch's worker; the evidence names the tool ("contradicted by tool get_order").
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from typing import Any

import groundwatch_llamaindex
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import MessageRole, ToolCallBlock
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.core.tools import FunctionTool, RetrieverTool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import groundwatch as gw
from groundwatch.types import passage_names

HANDBOOK = [
    "Refunds are accepted within 30 days of purchase with the receipt.",
    "Standard delivery takes 3 to 5 working days within the country.",
    "Gift cards are valid for 24 months and cannot be exchanged for cash.",
]


def lookup_policy(topic: str) -> str:
    """The store's policy on a topic."""
    return "Items bought on sale can be returned within 14 days for store credit only."


def get_order(order_id: str) -> str:
    """An order's status and total from the order database."""
    return f"Order {order_id} was shipped on 3 March. Its total was 42.50 EUR."


# The model's script: for each question, the tool calls it makes, then its answer.
SCRIPT: dict[str, tuple[list[tuple[str, dict[str, Any]]], str]] = {
    "How long do I have to return something?": (
        [("search_handbook", {"input": "refunds accepted within days of purchase"})],
        "Refunds are accepted within 30 days of purchase, with the receipt.",
    ),
    "And for things I bought on sale?": (
        [("lookup_policy", {"topic": "sale items"})],
        "Items bought on sale can be returned within 14 days, for store credit only.",
    ),
    "What did order A-17 cost?": (
        [("get_order", {"order_id": "A-17"})],
        "Order A-17 was shipped on 3 March. Its total was 45.50 EUR.",  # the tool said 42.50
    ),
}


def scripted_model(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Asks for the script's tools after the user's message; answers after the tools'."""
    question = next(m.content for m in reversed(messages) if m.role == MessageRole.USER)
    calls, answer = SCRIPT[question or ""]
    if messages[-1].role == MessageRole.TOOL:
        return ChatMessage(role="assistant", content=answer)
    blocks = [
        ToolCallBlock(tool_call_id=f"call-{i}", tool_name=name, tool_kwargs=args)
        for i, (name, args) in enumerate(calls)
    ]
    return ChatMessage(role="assistant", blocks=blocks)


class WordHashEmbedding(BaseEmbedding):
    """A toy embedding: hashed bag of words (so retrieval follows the query's words)."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 256
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % 256] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


async def main() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    results: list[tuple[gw.RagRecord, gw.Evaluation]] = []
    monitor = gw.Monitor(
        judge=gw.LocalJudge(),
        sampler=gw.RatioSampler(1.0),  # score everything here; 0.05 is a typical production rate
        tracer_provider=tracer_provider,
        on_result=lambda record, evaluation: results.append((record, evaluation)),
        route="support-agent",
    )
    groundwatch_llamaindex.instrument(monitor)  # the one line an application adds

    index = VectorStoreIndex.from_documents(
        [Document(text=text) for text in HANDBOOK], embed_model=WordHashEmbedding()
    )
    search_handbook = RetrieverTool.from_defaults(
        index.as_retriever(similarity_top_k=1),
        name="search_handbook",
        description="Searches the customer handbook.",
    )
    agent = FunctionAgent(
        tools=[
            search_handbook,
            FunctionTool.from_defaults(lookup_policy),
            FunctionTool.from_defaults(get_order),
        ],
        llm=MockFunctionCallingLLM(response_generator=scripted_model),
        system_prompt="You answer customers' questions from the tools' results only.",
    )
    memory = Memory.from_defaults(session_id="customer-1042", token_limit=4000)

    for question in SCRIPT:
        answer = await agent.run(user_msg=question, memory=memory)
        print(f"user:  {question}\nagent: {answer}")
    monitor.force_flush()

    print("\ngroundwatch:")
    for record, evaluation in results:
        print(f"  [{evaluation.label:>12}] {record.question}")
        print(f"                 context: {', '.join(passage_names(record.contexts))}")
        print(f"                 {evaluation.explanation}")
        for claim in evaluation.claims:
            if claim.verdict == "contradicted":
                print(f"                 contradicted: {claim.text!r} ({claim.reason})")
    monitor.shutdown()
    groundwatch_llamaindex.uninstrument()

    conversations = {
        (span.attributes or {}).get("gen_ai.conversation.id")
        for span in spans.get_finished_spans()
        if span.name == "groundwatch.evaluation"
    }
    print(f"evaluation spans' gen_ai.conversation.id: {', '.join(map(str, conversations))}")


if __name__ == "__main__":
    asyncio.run(main())
