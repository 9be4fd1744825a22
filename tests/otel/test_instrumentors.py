"""Both integrations as OpenTelemetry instrumentors: entry points, one signature, real pipelines.

``opentelemetry-instrument`` finds instrumentors through the ``opentelemetry_instrumentor`` entry
point and calls ``instrument()`` with no arguments; code calls ``instrument(monitor=...)`` or the
module-level alias. Each path runs a real LangChain chain / LlamaIndex query engine here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import groundwatch_langchain
import groundwatch_llamaindex
import pytest
from opentelemetry.instrumentation.dependencies import get_dependency_conflicts
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from groundwatch.testing import GroundwatchTelemetry, RecordingMonitor
from testkit.chains import build

from ..llamaindex._fakes import BagOfWordsEmbedding, ContextAnswerLLM

QUESTION = "What is the refund policy?"


def _langchain_app() -> Callable[[str], object]:
    chain = build("lcel").chain
    return lambda question: chain.invoke(question)


def _llamaindex_app() -> Callable[[str], object]:
    from llama_index.core import Document, VectorStoreIndex

    index = VectorStoreIndex.from_documents(
        [Document(text="Refunds are accepted within 30 days of purchase.")],
        embed_model=BagOfWordsEmbedding(),
    )
    engine = index.as_query_engine(llm=ContextAnswerLLM())
    return lambda question: engine.query(question)


@dataclass
class Integration:
    module: ModuleType
    instrumentor: type[Any]
    entry_point: str
    app: Callable[[], Callable[[str], object]]


INTEGRATIONS = {
    "langchain": Integration(
        groundwatch_langchain,
        groundwatch_langchain.GroundwatchLangChainInstrumentor,
        "groundwatch_langchain",
        _langchain_app,
    ),
    "llamaindex": Integration(
        groundwatch_llamaindex,
        groundwatch_llamaindex.GroundwatchLlamaIndexInstrumentor,
        "groundwatch_llamaindex",
        _llamaindex_app,
    ),
}


@pytest.fixture(params=sorted(INTEGRATIONS))
def integration(request: pytest.FixtureRequest) -> Iterator[Integration]:
    chosen = INTEGRATIONS[request.param]
    yield chosen
    chosen.module.uninstrument()


def test_registered_as_an_opentelemetry_instrumentor(integration: Integration) -> None:
    (found,) = [
        ep
        for ep in entry_points(group="opentelemetry_instrumentor")
        if ep.name == integration.entry_point
    ]
    assert found.load() is integration.instrumentor
    assert issubclass(integration.instrumentor, BaseInstrumentor)
    dependencies = integration.instrumentor().instrumentation_dependencies()
    assert dependencies and get_dependency_conflicts(dependencies) is None


def test_both_integrations_take_the_same_arguments() -> None:
    def shape(fn: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
        params = inspect.signature(fn).parameters.values()
        return [(p.name, p.kind, p.default) for p in params if p.name in ("monitor", "route")]

    lc, li = groundwatch_langchain.instrument, groundwatch_llamaindex.instrument
    assert (
        shape(lc)
        == shape(li)
        == [
            ("monitor", inspect.Parameter.POSITIONAL_OR_KEYWORD, None),
            ("route", inspect.Parameter.KEYWORD_ONLY, None),
        ]
    )
    assert inspect.signature(lc).return_annotation == inspect.signature(li).return_annotation


@pytest.mark.parametrize("via", ["instrumentor", "alias"])
def test_instrument_with_a_monitor_records_with_the_route(
    integration: Integration, via: str
) -> None:
    monitor = RecordingMonitor()
    app = integration.app()
    if via == "instrumentor":
        returned = integration.instrumentor().instrument(monitor=monitor, route="faq")
    else:
        returned = integration.module.instrument(monitor, route="faq")
    assert returned is monitor
    assert integration.instrumentor().is_instrumented_by_opentelemetry
    app(QUESTION)
    (record,) = monitor.records
    assert record["question"] == QUESTION and record["route"] == "faq"

    integration.module.uninstrument()
    assert not integration.instrumentor().is_instrumented_by_opentelemetry
    app(QUESTION)
    assert len(monitor.records) == 1  # nothing recorded once uninstrumented


def test_instrument_without_a_monitor_scores_on_the_given_providers(
    integration: Integration, capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What opentelemetry-instrument does: no monitor, so one is built from GROUNDWATCH_*."""
    monkeypatch.setenv("GROUNDWATCH_EXECUTOR", "thread")
    monkeypatch.setenv("GROUNDWATCH_SAMPLE_RATE", "1")
    app = integration.app()
    monitor = integration.instrumentor().instrument(
        tracer_provider=capgw.tracer_provider,
        meter_provider=capgw.meter_provider,
        logger_provider=capgw.logger_provider,
        route="faq",
    )
    app(QUESTION)
    assert monitor.force_flush(timeout_millis=20_000)
    (span,) = capgw.span_exporter.get_finished_spans()
    assert span.name == "groundwatch.evaluation"
    assert span.attributes is not None and span.attributes["groundwatch.route"] == "faq"

    integration.instrumentor().uninstrument()  # shuts down the monitor it built
    monitor.record(question="q", contexts=["c"], answer="a")
    assert capgw.metric_total("groundwatch.records", groundwatch__decision="error") == 1
