"""Many runs through one handler at once: every record keeps its own question, docs and answer."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from groundwatch_langchain import GroundwatchCallbackHandler
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import Runnable, RunnablePassthrough
from opentelemetry.trace import Tracer

from groundwatch.testing import RecordingMonitor
from testkit.chains import FACTS, PROMPT, TopicRetriever, documents, format_docs

N = 24


def _chain() -> Runnable[str, str]:
    # The parrot model answers with the prompt it was given, so each answer names its own
    # question and quotes its own documents: a record mixing two runs cannot pass the checks.
    retriever = TopicRetriever(docs=documents(), pause=0.002)
    return (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | ParrotFakeChatModel()
        | StrOutputParser()
    )


def _question(i: int) -> str:
    return f"request {i:02d}: what about {FACTS[i % len(FACTS)][0]}?"


def _check(monitor: RecordingMonitor, spans: dict[str, Any]) -> None:
    assert len(monitor.records) == N
    assert monitor.failures == []
    seen = set()
    for record in monitor.records:
        question = record["question"]
        i = int(re.search(r"request (\d+)", question).group(1))  # type: ignore[union-attr]
        topic = FACTS[i % len(FACTS)][0]
        seen.add(i)
        assert record["answer"] == f"Question: {question}"
        assert [p["metadata"]["topic"] for p in record["contexts"]] == [topic]
        assert record["span_context"] == spans[question]
    assert seen == set(range(N))


@pytest.mark.parametrize("mode", ["ainvoke", "astream", "astream_events"])
def test_concurrent_async_requests(mode: str, monitor: RecordingMonitor, tracer: Tracer) -> None:
    chain = _chain()
    handler = GroundwatchCallbackHandler(monitor)
    config: Any = {"callbacks": [handler]}
    spans: dict[str, Any] = {}

    async def one(i: int) -> None:
        question = _question(i)
        # Each request has its own server span, as under an instrumented web framework.
        with tracer.start_as_current_span(f"request {i}") as span:
            spans[question] = span.get_span_context()
            if mode == "ainvoke":
                await chain.ainvoke(question, config)
            elif mode == "astream":
                async for _ in chain.astream(question, config):
                    await asyncio.sleep(0)
            else:
                async for _ in chain.astream_events(question, config):
                    pass

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(N)))

    asyncio.run(main())
    _check(monitor, spans)
    assert handler.active_runs == 0 and handler._owner == {}


def test_concurrent_threads(monitor: RecordingMonitor, tracer: Tracer) -> None:
    chain = _chain()
    handler = GroundwatchCallbackHandler(monitor)
    spans: dict[str, Any] = {}

    def one(i: int) -> None:
        question = _question(i)
        with tracer.start_as_current_span(f"request {i}") as span:
            spans[question] = span.get_span_context()
            chain.invoke(question, {"callbacks": [handler]})

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(N)))
    _check(monitor, spans)
    assert handler.active_runs == 0 and handler._owner == {}
