"""The application's response objects are read by groundwatch at the query's end; whatever
reading them does (a ``__str__`` or a property that raises, even a ``BaseException``), the
query ends in exactly one counted decision and nothing stays tracked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import groundwatch_llamaindex
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.retrievers import BaseRetriever

import groundwatch as gw
from groundwatch._shared import guard
from groundwatch.testing import GroundwatchTelemetry

from .conftest import FACTS, QUESTIONS


@pytest.fixture
def monitor(capgw: GroundwatchTelemetry) -> Iterator[gw.Monitor]:
    before = dict(guard.errors)
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0))
    groundwatch_llamaindex.instrument(monitor)
    capture = groundwatch_llamaindex._attach._capture
    assert capture is not None
    yield monitor
    # The application's faults are not groundwatch's: no internal error, nothing left open.
    new = {k: n - before.get(k, 0) for k, n in guard.errors.items() if n != before.get(k, 0)}
    assert not new, f"groundwatch internal errors: {new}"
    assert capture.errors == 0
    assert capture.open_roots == 0 and capture.tracked_spans == 0
    groundwatch_llamaindex.uninstrument()


_RAISES: dict[str, type[BaseException]] = {
    "RuntimeError": RuntimeError,
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": SystemExit,
}


class _UnreadableText:
    """A custom engine's response whose text cannot be read: ``str()`` raises ``raises``."""

    def __init__(self, source_nodes: list[Any], raises: str) -> None:
        self.source_nodes = source_nodes
        self.raises = raises

    def __str__(self) -> str:
        raise _RAISES[self.raises]("this response has no text")


class _UnreadableNodes(Response):
    """A response whose answer reads but whose ``source_nodes`` raise."""

    raises = "RuntimeError"

    @property  # type: ignore[override]
    def source_nodes(self) -> list[Any]:
        raise _RAISES[self.raises]("these nodes cannot be read")

    @source_nodes.setter
    def source_nodes(self, value: list[Any]) -> None:
        pass


class _Engine(CustomQueryEngine):
    retriever: BaseRetriever
    kind: str
    raises: str

    def custom_query(self, query_str: str) -> Any:
        nodes = self.retriever.retrieve(query_str)
        if self.kind == "text":
            return _UnreadableText(nodes, self.raises)
        response = _UnreadableNodes(response=FACTS["eiffel"].split(". ")[0] + ".")
        response.raises = self.raises
        return response


def _decisions(capgw: GroundwatchTelemetry) -> list[tuple[dict[str, Any], float]]:
    return capgw.metric_points("groundwatch.records")


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("raises", list(_RAISES))
def test_a_response_whose_text_raises_ends_in_one_no_answer(
    index: VectorStoreIndex,
    monitor: gw.Monitor,
    capgw: GroundwatchTelemetry,
    raises: str,
    use_async: bool,
) -> None:
    engine = _Engine(retriever=index.as_retriever(similarity_top_k=2), kind="text", raises=raises)
    for _ in range(2):
        question = QUESTIONS["eiffel"]
        response = asyncio.run(engine.aquery(question)) if use_async else engine.query(question)
        assert isinstance(response, _UnreadableText)  # the application gets its response
    assert monitor.force_flush(10_000)
    assert _decisions(capgw) == [({"groundwatch.decision": "error", "error.type": "no_answer"}, 2)]
    assert capgw.spans() == []


@pytest.mark.parametrize("raises", list(_RAISES))
def test_a_response_whose_source_nodes_raise_is_scored_on_what_was_retrieved(
    index: VectorStoreIndex, monitor: gw.Monitor, capgw: GroundwatchTelemetry, raises: str
) -> None:
    engine = _Engine(retriever=index.as_retriever(similarity_top_k=1), kind="nodes", raises=raises)
    engine.query(QUESTIONS["eiffel"])
    assert monitor.force_flush(10_000)
    assert _decisions(capgw) == [({"groundwatch.decision": "sampled"}, 1)]
    [(record, evaluation)] = capgw.results()
    assert [p.text for p in record.contexts] == [FACTS["eiffel"]]
    assert evaluation.label == "grounded"


class _OwnSearchEngine(CustomQueryEngine):
    """A custom engine that finds its passages itself (no LlamaIndex retriever runs)."""

    readable: bool

    def custom_query(self, query_str: str) -> Any:
        if self.readable:
            return "The Eiffel Tower is 330 metres tall."
        return _UnreadableText([], "RuntimeError")


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_an_unreadable_response_without_a_seen_retrieval_is_still_counted(
    monitor: gw.Monitor, capgw: GroundwatchTelemetry, use_async: bool
) -> None:
    """Issue #45 item 7: its answer was lost, and the warning says it is counted, so it is:
    one ``no_answer`` decision. A readable answer with no retrieval (a plain chat turn) stays
    ignored."""
    question = QUESTIONS["eiffel"]
    for readable in (False, True):
        engine = _OwnSearchEngine(readable=readable)
        asyncio.run(engine.aquery(question)) if use_async else engine.query(question)
    assert monitor.force_flush(10_000)
    assert _decisions(capgw) == [({"groundwatch.decision": "error", "error.type": "no_answer"}, 1)]
    assert capgw.spans() == []
