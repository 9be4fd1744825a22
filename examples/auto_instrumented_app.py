"""A LangChain RAG app with no groundwatch code: ``opentelemetry-instrument`` switches it on.

The app knows nothing of groundwatch or OpenTelemetry. ``opentelemetry-instrument`` sets up the
SDK from the ``OTEL_*`` variables and loads every registered instrumentor, groundwatch's among
them; groundwatch's monitor takes its knobs from the ``GROUNDWATCH_*`` variables.

Run (from the repository root; no network, no API key):

    pip install -e ".[demo]" -e integrations/langchain opentelemetry-distro
    OTEL_SERVICE_NAME=faq-bot OTEL_TRACES_EXPORTER=console OTEL_METRICS_EXPORTER=none \\
        OTEL_LOGS_EXPORTER=console opentelemetry-instrument python examples/auto_instrumented_app.py

The console shows a ``groundwatch.evaluation`` span per answer (the second one ``hallucinated``:
the shipping time is made up) and its ``gen_ai.evaluation.result`` log events.

Each evaluation span is a root span here, a trace of its own: nothing in this app starts a span
for the request, since OpenTelemetry has no LangChain instrumentor of its own. Install one (for
example ``pip install openinference-instrumentation-langchain``: ``opentelemetry-instrument``
loads it too) or start a span around each request in the app, and the evaluation span becomes a
child of that span, in the request's trace.
"""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

POLICIES = [
    "Refunds are accepted within 30 days of purchase. A receipt is required for every refund.",
    "Standard shipping takes 3 to 5 business days. Express shipping arrives the next day.",
]
ANSWERS = {
    "How long do I have to ask for a refund?": "Refunds are accepted within 30 days of purchase.",
    "How long does standard shipping take?": "Standard shipping takes 10 to 12 business days.",
}


def main() -> None:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents([Document(page_content=text) for text in POLICIES])
    retriever = store.as_retriever(search_kwargs={"k": len(POLICIES)})
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from this context only:\n{context}"), ("human", "{question}")]
    )
    chain = (
        {
            "context": retriever | (lambda docs: "\n\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | FakeListChatModel(responses=list(ANSWERS.values()))
        | StrOutputParser()
    )
    for question in ANSWERS:
        print(question, "->", chain.invoke(question))
    # Nothing to flush by hand: the monitor's exit hook scores what is queued before the SDK's
    # own exit hook exports it.


if __name__ == "__main__":
    main()
