"""A LangChain RAG chain watched by groundwatch (no network, no API key).

An in-memory vector store, a prompt, a chat model and an output parser, the usual LCEL shape.
The chat model is LangChain's fake one, scripted to answer once faithfully and once with a
made-up figure, so both outcomes show. One callback handler captures each run's question,
retrieved documents and final answer; the monitor scores them in the background and prints each
evaluation as it lands.

Run (from the repository root):

    pip install -e ".[demo]" -e integrations/langchain   # numpy: the vector store's search
    python examples/langchain_rag.py

With ``--redis URL`` the monitor sends the runs to a Redis stream instead of scoring them, for
a ``groundwatch worker`` to score (docs/distributed.md "Try it on one machine").
"""

from __future__ import annotations

import argparse
from typing import Any

from groundwatch_langchain import GroundwatchCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

import groundwatch as gw

POLICIES = [
    "Refunds are accepted within 30 days of purchase. A receipt is required for every refund.",
    "Standard shipping takes 3 to 5 business days. Express shipping arrives the next day.",
    "Every appliance carries a two-year warranty against manufacturing defects.",
]

QUESTIONS_AND_ANSWERS = [
    (
        "How long do I have to ask for a refund?",
        "Refunds are accepted within 30 days of purchase. A receipt is required for every refund.",
    ),
    (
        "How long does standard shipping take?",
        "Standard shipping takes 10 to 12 business days. Shipping is free on every order.",
    ),
]


def show(record: gw.RagRecord, evaluation: gw.Evaluation) -> None:
    """``on_result`` callback: runs on the monitor's worker thread for each scored run."""
    f = "-" if evaluation.faithfulness is None else f"{evaluation.faithfulness:.2f}"
    g = "-" if evaluation.groundedness is None else f"{evaluation.groundedness:.2f}"
    print(f"\nQ: {record.question}\nA: {record.answer}")
    print(f"   {len(record.contexts)} passages retrieved")
    print(f"   -> {evaluation.label}  faithfulness={f}  groundedness={g}")
    for claim in evaluation.claims:
        quote = claim.evidence[0].quote if claim.evidence else ""
        print(f"      {claim.verdict:13} {claim.text!r}" + (f"  <- {quote!r}" if quote else ""))


def build_chain() -> Any:
    """The RAG chain: retriever, prompt, the scripted chat model, output parser."""
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(
        [Document(page_content=text, id=f"policy-{i}") for i, text in enumerate(POLICIES)]
    )
    # The fake embedding is random, so let the retriever return every policy: the point here is
    # the capture and the scoring, not the ranking.
    retriever = store.as_retriever(search_kwargs={"k": len(POLICIES)})
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from this context only:\n{context}"), ("human", "{question}")]
    )
    llm = FakeListChatModel(responses=[answer for _, answer in QUESTIONS_AND_ANSWERS])
    return (
        {
            "context": retriever | (lambda docs: "\n\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | llm
        | StrOutputParser()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", metavar="URL", help="send the runs to groundwatch worker")
    args = parser.parse_args()
    chain = build_chain()

    # Score every run (production setups sample a share, e.g. gw.RatioSampler(0.05)).
    if args.redis:
        queue = gw.RedisQueue(args.redis)
        monitor = gw.Monitor(sampler=gw.RatioSampler(1.0), queue=queue)
    else:
        monitor = gw.Monitor(sampler=gw.RatioSampler(1.0), on_result=show)
    handler = GroundwatchCallbackHandler(monitor, route="support-faq")
    for question, _ in QUESTIONS_AND_ANSWERS:
        chain.invoke(question, config={"callbacks": [handler]})
    # The chain returned at once; scoring (or sending) ran in the background. Wait for it.
    monitor.shutdown(timeout_millis=30_000)
    if args.redis:
        print(
            f"sent {len(QUESTIONS_AND_ANSWERS)} runs to the Redis stream {queue.stream!r} at "
            f"{args.redis}: groundwatch worker scores them"
        )


if __name__ == "__main__":
    main()
