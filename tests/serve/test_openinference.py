"""OpenInference-instrumented pipelines exporting OTLP/HTTP straight to serve: the evaluation
span lands in the pipeline's trace, under its root span, with the scores the in-app path
gives for the same inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import groundwatch as gw
from groundwatch.testing import GroundwatchTelemetry
from testkit.chains import ANSWER

from .conftest import RunningReceiver, wait_for_evaluations
from .pipelines import (
    LCEL_QUESTION,
    app_provider,
    assert_evaluation_of,
    langchain_instrumented,
    lcel_scored_through,
    llamaindex_engine,
    llamaindex_instrumented,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize("gzip", [False, True])
def test_langchain_lcel_chain_scored_in_its_trace(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver], gzip: bool
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0), capture_content=True)
    app = app_provider(receiver.url, gzip=gzip)
    case = lcel_scored_through(capgw, app)
    question = LCEL_QUESTION
    passages = [text for _, text in case.expected_docs(question)]
    ((record, _evaluation),) = capgw.results()
    assert record.question == question
    assert sorted(p.text for p in record.contexts) == sorted(passages)
    assert record.answer == ANSWER
    # The retriever's ids and scores made it through OTLP too.
    ids = sorted(i for i, _ in case.expected_docs(question))
    assert sorted(str(p.id) for p in record.contexts) == ids


def test_llamaindex_query_engine_scored_in_its_trace(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    app = app_provider(receiver.url)
    engine = llamaindex_engine()
    question = "How tall is the Eiffel Tower?"
    with llamaindex_instrumented(app.provider):
        response = engine.query(question)
    answer = str(response)
    (span,) = wait_for_evaluations(capgw, 1)
    passages = [n.node.get_content() for n in response.source_nodes]
    assert_evaluation_of(span, app, question, passages, answer)
    ((record, evaluation),) = capgw.results()
    assert record.question == question
    assert [p.text for p in record.contexts] == passages
    scores = [n.score for n in response.source_nodes]
    assert [p.score for p in record.contexts] == pytest.approx(scores)
    assert evaluation.label == "grounded"


def test_pair_mode_parents_each_step_to_its_own_chain_span(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    """A two-step LCEL pipeline (retrieve-then-generate twice, each step a named sequence):
    each evaluation span hangs under its step's CHAIN span, the nearest common ancestor of the
    step's retriever and LLM spans."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from testkit.chains import PROMPT, TopicRetriever, documents, format_docs

    answers = {
        "refund": "Refunds are accepted within 30 days of purchase with a receipt.",
        "shipping": "Standard shipping takes 3 to 5 business days within the country.",
    }

    def step(topic: str) -> Any:
        return (
            {
                "context": TopicRetriever(docs=documents()) | format_docs,
                "question": RunnablePassthrough(),
            }
            | PROMPT
            | FakeListChatModel(responses=[answers[topic]])
            | StrOutputParser()
        ).with_config(run_name=f"{topic}_step")

    pipeline = (
        step("refund")
        | RunnableLambda(lambda _: "And how long does shipping take?")
        | step("shipping")
    )
    receiver = make_receiver(sampler=gw.RatioSampler(1.0), per_pair=True)
    app = app_provider(receiver.url)
    with langchain_instrumented(app.provider):
        assert pipeline.invoke("What is the refund policy?") == answers["shipping"]
    spans = wait_for_evaluations(capgw, 2)
    by_name = {s.name: s for s in app.exported.get_finished_spans()}
    steps = {topic: by_name[f"{topic}_step"].context.span_id for topic in answers}
    root = app.root()
    assert all(s.context.trace_id == root.context.trace_id for s in spans)
    assert sorted(s.parent.span_id for s in spans) == sorted(steps.values())
    # Each step's own answer and passages, under its own step.
    under = {r.answer: (r.span_id, [p.text for p in r.contexts]) for r, _ in capgw.results()}
    assert under == {
        answers[topic]: (steps[topic], [answers[topic]]) for topic in ("refund", "shipping")
    }
