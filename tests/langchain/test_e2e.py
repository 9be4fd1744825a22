"""End to end: real chains, the real Monitor and LocalJudge, the real OpenTelemetry SDK."""

from __future__ import annotations

from typing import Any

import groundwatch_langchain
import pytest
from groundwatch_langchain import GroundwatchCallbackHandler
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry
from testkit.chains import ANSWER, PROMPT, FailingRetriever, build, chat_model, format_docs, run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:openinference")

QUESTION = "What is the refund policy?"


def _evaluation_span(capgw: GroundwatchTelemetry) -> ReadableSpan:
    (span,) = capgw.spans()
    return span


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "abatch", "astream", "astream_events"])
def test_evaluation_lands_in_the_request_trace(capgw: GroundwatchTelemetry, mode: str) -> None:
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0))
    handler = GroundwatchCallbackHandler(monitor, route="faq")
    case = build("lcel")
    with capgw.tracer.start_as_current_span("request") as request:
        run(case.chain, [QUESTION], mode, {"callbacks": [handler]})

    ((record, evaluation),) = capgw.results()
    assert record.question == QUESTION
    assert record.answer == ANSWER
    assert sorted((p.id, p.text) for p in record.contexts) == case.expected_docs(QUESTION)
    assert evaluation.label in ("grounded", "hallucinated", "insufficient_context")
    span = _evaluation_span(capgw)
    parent = request.get_span_context()
    assert span.parent is not None and span.parent.span_id == parent.span_id
    assert span.context.trace_id == parent.trace_id
    assert span.attributes is not None
    assert span.attributes[sc.GROUNDWATCH_ROUTE] == "faq"
    assert span.attributes[sc.GROUNDWATCH_LABEL] == evaluation.label
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="sampled") == 1


def test_grounded_answer_scores_grounded(capgw: GroundwatchTelemetry) -> None:
    """The retrieved passage states the answer word for word: the judge must find it."""
    from testkit.chains import TopicRetriever, documents

    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0))
    chain = (
        {"context": TopicRetriever(docs=documents()) | format_docs, "question": lambda q: q}
        | PROMPT
        | chat_model("list", ANSWER)
    )
    chain.invoke("refund rules?", {"callbacks": [GroundwatchCallbackHandler(monitor)]})
    ((record, evaluation),) = capgw.results()
    assert [p.metadata["topic"] for p in record.contexts] == ["refund"]
    assert evaluation.label == "grounded"
    assert evaluation.groundedness == 1.0


def test_failures_are_counted_by_the_monitor(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0))
    handler = GroundwatchCallbackHandler(monitor, route="faq")
    chain = {"context": FailingRetriever() | format_docs, "question": lambda q: q} | PROMPT
    with pytest.raises(ConnectionError):
        chain.invoke(QUESTION, {"callbacks": [handler]})
    assert capgw.results() == []
    assert (
        capgw.metric_total(
            sc.METRIC_RECORDS, groundwatch__decision="error", error__type="retriever_error"
        )
        == 1
    )


@pytest.mark.parametrize("outer_span", [False, True])
@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_evaluation_sits_in_the_openinference_trace(
    capgw: GroundwatchTelemetry, outer_span: bool, mode: str
) -> None:
    LangChainInstrumentor().instrument(tracer_provider=capgw.tracer_provider)
    try:
        monitor = capgw.monitor(sampler=gw.RatioSampler(1.0))
        groundwatch_langchain.instrument(monitor)
        case = build("lcel")
        if outer_span:
            with capgw.tracer.start_as_current_span("request") as request:
                run(case.chain, [QUESTION], mode, {})
        else:
            run(case.chain, [QUESTION], mode, {})
        evaluation_span = _evaluation_span(capgw)
    finally:
        LangChainInstrumentor().uninstrument()
        groundwatch_langchain.uninstrument()

    spans = capgw.spans(None)
    theirs = [s for s in spans if s.name != sc.SPAN_EVALUATION and s.name != "request"]
    assert theirs, "OpenInference traced nothing"
    (their_root,) = [
        s
        for s in theirs
        if s.parent is None or s.parent.span_id not in {x.context.span_id for x in theirs}
    ]
    # One trace for the request, their spans and our evaluation.
    assert {s.context.trace_id for s in spans} == {their_root.context.trace_id}
    assert evaluation_span.parent is not None
    if outer_span:
        # Parent = the span current when the run started; theirs hangs there too.
        assert evaluation_span.parent.span_id == request.get_span_context().span_id
        assert their_root.parent is not None
        assert their_root.parent.span_id == request.get_span_context().span_id
    else:
        # No span was current: the evaluation goes under their span for the same run.
        assert evaluation_span.parent.span_id == their_root.context.span_id


def test_sampling_zero_records_nothing_to_score(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(sampler=gw.RatioSampler(0.0))
    handler = GroundwatchCallbackHandler(monitor)
    chain: Any = build("dict").chain
    chain.batch([{"question": QUESTION}] * 3, {"callbacks": [handler]})
    assert capgw.results() == []
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="not_sampled") == 3


@pytest.mark.parametrize(
    "sampler", [gw.RatioSampler(0.5), gw.RateLimitSampler(3)], ids=["ratio", "rate-limit"]
)
def test_the_decision_taken_at_retrieval_is_the_only_one_and_every_run_is_counted(
    capgw: GroundwatchTelemetry, sampler: gw.Sampler
) -> None:
    monitor = capgw.monitor(sampler=sampler)
    handler = GroundwatchCallbackHandler(monitor)
    case = build("lcel")
    for _ in range(20):
        with capgw.tracer.start_as_current_span("request"):  # a new trace id per run
            run(case.chain, [QUESTION], "invoke", {"callbacks": [handler]})
    capgw.flush()
    decisions = {
        attrs[sc.GROUNDWATCH_DECISION]: value
        for attrs, value in capgw.metric_points(sc.METRIC_RECORDS)
    }
    assert sum(decisions.values()) == 20
    scored = len(capgw.results())
    assert decisions["sampled"] == scored == handler.counts["records"]
    assert sum(v for k, v in decisions.items() if k != "sampled") == handler.counts["not_sampled"]
    if isinstance(sampler, gw.RateLimitSampler):
        # One token per run: a second decision at record() would have spent two.
        assert scored == 3
    else:
        assert 0 < scored < 20
