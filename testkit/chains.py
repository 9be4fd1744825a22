"""Real LangChain pipelines for the tests: in-memory vector store, fake chat models, LCEL.

Everything here is langchain-core's own machinery (and langchain-classic for the classic retrieval
chain); only the models are fakes, because nothing here may call a network.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableLambda,
    RunnableParallel,
    RunnablePassthrough,
)
from langchain_core.vectorstores import InMemoryVectorStore

ANSWER = "Refunds are accepted within 30 days of purchase with a receipt."

FACTS = [
    ("refund", "Refunds are accepted within 30 days of purchase with a receipt."),
    ("shipping", "Standard shipping takes 3 to 5 business days within the country."),
    ("warranty", "Every appliance carries a two-year warranty against manufacturing defects."),
    ("returns", "Opened software cannot be returned unless it is defective."),
    ("support", "Phone support is open from 8am to 8pm on weekdays."),
    ("stores", "There are 14 stores, the largest one in the city centre."),
]

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from the context only.\n\nContext:\n{context}"),
        ("human", "Question: {question}"),
    ]
)


def documents() -> list[Document]:
    return [
        Document(page_content=text, id=f"doc-{topic}", metadata={"topic": topic})
        for topic, text in FACTS
    ]


def vector_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(documents())
    return store


def format_docs(docs: Sequence[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def chat_model(kind: str = "list", answer: str = ANSWER) -> Any:
    """A fake chat model that answers ``answer`` and streams it in several chunks."""
    if kind == "list":
        return FakeListChatModel(responses=[answer])
    if kind == "generic":
        return GenericFakeChatModel(messages=itertools.cycle([AIMessage(content=answer)]))
    raise ValueError(kind)


class ScoredRetriever(BaseRetriever):
    """A retriever that keeps the vector store's similarity score in each document's metadata,
    the usual way to pass scores through LangChain (its own VectorStoreRetriever drops them)."""

    store: InMemoryVectorStore
    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        found = self.store.similarity_search_with_score(query, k=self.k)
        return [
            Document(page_content=d.page_content, id=d.id, metadata={**d.metadata, "score": s})
            for d, s in found
        ]


class TopicRetriever(BaseRetriever):
    """Returns the documents whose topic word appears in the query; the async path yields to
    the loop a few times so that concurrent runs interleave their callbacks."""

    docs: list[Document]
    pause: float = 0.0

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [d for d in self.docs if d.metadata["topic"] in query]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        await asyncio.sleep(self.pause)
        return self._get_relevant_documents(query, run_manager=run_manager.get_sync())


class FailingRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise ConnectionError("vector store unreachable")


def _fail_llm(_: Any) -> Any:
    raise RuntimeError("model overloaded")


@dataclass
class Case:
    """One chain and how to read it: inputs for a question, the expected answer and docs."""

    name: str
    chain: Runnable[Any, Any]
    make_input: Callable[[str], Any]
    answer: str
    retrievers: list[Runnable[Any, list[Document]]] = field(default_factory=list)

    def expected_docs(self, question: str) -> list[tuple[str | None, str]]:
        docs = [d for r in self.retrievers for d in r.invoke(question)]
        return sorted((d.id, d.page_content) for d in docs)


def build(name: str) -> Case:
    """The chains every execution mode is tested against."""
    store = vector_store()
    retriever = store.as_retriever(search_kwargs={"k": 2})
    if name == "lcel":  # str in, str out: the LangChain RAG tutorial's shape
        chain = (
            {"context": retriever | format_docs, "question": RunnablePassthrough()}
            | PROMPT
            | chat_model("list")
            | StrOutputParser()
        )
        return Case(name, chain, lambda q: q, ANSWER, [retriever])
    if name == "dict":  # {"question"} in, {"question", "docs", "answer": AIMessage} out
        chain = RunnablePassthrough.assign(
            docs=itemgetter("question") | retriever
        ) | RunnablePassthrough.assign(
            answer=(lambda x: {"context": format_docs(x["docs"]), "question": x["question"]})
            | PROMPT
            | chat_model("generic")
        )
        return Case(name, chain, lambda q: {"question": q}, ANSWER, [retriever])
    if name == "two_retrievers":  # two retrievers in parallel, one with scores
        scored = ScoredRetriever(store=store, k=1)
        chain = (
            RunnableParallel(a=retriever, b=scored, question=RunnablePassthrough())
            | (lambda x: {"context": format_docs(x["a"] + x["b"]), "question": x["question"]})
            | PROMPT
            | chat_model("list")
            | StrOutputParser()
        )
        return Case(name, chain, lambda q: q, ANSWER, [retriever, scored])
    if name == "nested":  # a RAG chain inside a bigger chain: one record, for the outer run
        inner = (
            {"context": retriever | format_docs, "question": RunnablePassthrough()}
            | PROMPT
            | chat_model("list")
            | StrOutputParser()
        ).with_config(run_name="inner_rag")
        chain = RunnableLambda(lambda q: q.strip()) | {"answer": inner} | itemgetter("answer")
        return Case(name, chain, lambda q: q, ANSWER, [retriever])
    if name == "classic":  # langchain-classic's create_retrieval_chain: {"input"} -> {"answer"}
        from langchain_classic.chains import create_retrieval_chain
        from langchain_classic.chains.combine_documents import create_stuff_documents_chain

        prompt = ChatPromptTemplate.from_messages(
            [("system", "Answer from the context only.\n\n{context}"), ("human", "{input}")]
        )
        chain = create_retrieval_chain(
            retriever, create_stuff_documents_chain(chat_model("list"), prompt)
        )
        return Case(name, chain, lambda q: {"input": q}, ANSWER, [retriever])
    raise ValueError(name)


CASES = ["lcel", "dict", "two_retrievers", "nested", "classic"]
MODES = ["invoke", "ainvoke", "batch", "abatch", "stream", "astream", "astream_events"]


def _merge(chunks: list[Any]) -> Any:
    return functools.reduce(operator.add, chunks)


def run(
    chain: Runnable[Any, Any], inputs: list[Any], mode: str, config: RunnableConfig
) -> list[Any]:
    """Run ``chain`` over ``inputs`` the way ``mode`` names; returns the outputs in order."""
    if mode == "invoke":
        return [chain.invoke(i, config) for i in inputs]
    if mode == "batch":
        return chain.batch(inputs, config)
    if mode == "stream":
        return [_merge(list(chain.stream(i, config))) for i in inputs]

    async def main() -> list[Any]:
        if mode == "ainvoke":
            return [await chain.ainvoke(i, config) for i in inputs]
        if mode == "abatch":
            return await chain.abatch(inputs, config)
        if mode == "astream":
            merged = []
            for i in inputs:
                merged.append(_merge([c async for c in chain.astream(i, config)]))
            return merged
        if mode == "astream_events":
            outputs = []
            for i in inputs:
                final = None
                async for event in chain.astream_events(i, config):
                    if event["event"] == "on_chain_end" and not event["parent_ids"]:
                        final = event["data"]["output"]
                outputs.append(final)
            return outputs
        raise ValueError(mode)

    return asyncio.run(main())
