"""OpenLLMetry's LangChain instrumentation (opentelemetry-instrumentation-langchain, the GenAI
conventions) exporting OTLP/HTTP to serve: its retriever task span's documents, its chat
span's output messages and its workflow's input make the interaction."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry
from testkit.chains import ANSWER, build

from .conftest import RunningReceiver, wait_for_evaluations
from .pipelines import app_provider, langchain_instrumented

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_openllmetry_lcel_chain_scored_in_its_trace(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    app = app_provider(receiver.url)
    case = build("lcel")
    question = "What is the refund policy?"
    with langchain_instrumented(app.provider, openllmetry=True):
        assert case.chain.invoke(question) == ANSWER
    (span,) = wait_for_evaluations(capgw, 1)
    root = app.root()
    assert span.context.trace_id == root.context.trace_id
    assert span.parent is not None and span.parent.span_id == root.context.span_id
    assert span.attributes[sc.GROUNDWATCH_SERVE_SOURCE] == "openllmetry"
    ((record, evaluation),) = capgw.results()
    passages = [text for _, text in case.expected_docs(question)]
    assert record.question == question
    assert sorted(p.text for p in record.contexts) == sorted(passages)
    assert record.answer == ANSWER
    expected = gw.evaluate(ANSWER, [p.text for p in record.contexts], question=question)
    assert (evaluation.label, evaluation.groundedness) == (expected.label, expected.groundedness)
    assert span.attributes[sc.GROUNDWATCH_LABEL] == expected.label
