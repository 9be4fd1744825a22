"""The LangChain RAG chain of langchain_rag.py traced by OpenInference and sent over OTLP/HTTP
to ``groundwatch serve``, with no groundwatch code in the app (docs/serve.md "Try it on one
machine").

OpenInference's instrumentor records the retriever's documents, the prompt and the answer on
the spans; serve assembles each trace, finds its RAG interaction and scores it. No network
beyond serve on this machine, no API key: the chat model is LangChain's fake one, scripted to
answer once faithfully and once with a made-up figure.

Run (from the repository root), with ``groundwatch serve --verbose`` running:

    pip install -e ".[serve,demo]" -e integrations/langchain openinference-instrumentation-langchain
    python examples/serve_openinference.py

Spans go to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://127.0.0.1:4328``, serve's port).
"""

from __future__ import annotations

import os
import sys
import urllib.request

from langchain_rag import QUESTIONS_AND_ANSWERS, build_chain
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

SERVE = "http://127.0.0.1:4328"


def main() -> None:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", SERVE).rstrip("/")
    try:
        urllib.request.urlopen(f"{endpoint}/readyz", timeout=5).close()
    except OSError as exc:
        sys.exit(f"groundwatch serve does not answer at {endpoint} ({exc}): start it first")
    provider = TracerProvider(resource=Resource.create({"service.name": "support-faq"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{endpoint}/v1/traces")))
    LangChainInstrumentor().instrument(tracer_provider=provider)

    chain = build_chain()
    for question, _ in QUESTIONS_AND_ANSWERS:
        print(f"Q: {question}\nA: {chain.invoke(question)}")
    provider.shutdown()  # sends what is batched
    print(
        f"sent {len(QUESTIONS_AND_ANSWERS)} traces to {endpoint}: groundwatch serve scores each "
        "once its quiet period has passed"
    )


if __name__ == "__main__":
    main()
