"""Spans, log events and metrics of evaluations, on the real SDK with in-memory exporters."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags

import groundwatch as gw
from groundwatch import Judgement, Passage
from groundwatch._shared import guard
from groundwatch._shared.inputs import MAX_ANSWER_CHARS, MAX_PASSAGES
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import AsyncSuppressionProbe, EchoJudge, RaisingJudge, SuppressionProbe

PASSAGE = "The Eiffel Tower stands 330 metres tall. It was finished in 1889."
GOOD = "The Eiffel Tower stands 330 metres tall."
MIXED = "The Eiffel Tower stands 330 metres tall. It is painted gold."


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_span_attributes_are_exactly_the_documented_ones(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge(model="echo-1"), route="faq")
    with capgw.tracer.start_as_current_span("request"):
        monitor.record(question="How tall?", contexts=[PASSAGE], answer=MIXED)
    [span] = capgw.spans()
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    attrs = _attrs(span)
    assert attrs.pop(sc.GROUNDWATCH_LABEL) == "hallucinated"
    assert attrs.pop(sc.GROUNDWATCH_FAITHFULNESS) == 1.0
    assert attrs.pop(sc.GROUNDWATCH_GROUNDEDNESS) == 0.5
    assert attrs.pop(sc.GROUNDWATCH_CLAIMS_SUPPORTED) == 1
    assert attrs.pop(sc.GROUNDWATCH_CLAIMS_INFERRED) == 0
    assert attrs.pop(sc.GROUNDWATCH_CLAIMS_UNSUPPORTED) == 1
    assert attrs.pop(sc.GROUNDWATCH_CLAIMS_CONTRADICTED) == 0
    assert attrs.pop(sc.GROUNDWATCH_JUDGE) == "echo"
    assert attrs.pop(sc.GEN_AI_REQUEST_MODEL) == "echo-1"
    assert attrs.pop(sc.GROUNDWATCH_ROUTE) == "faq"
    assert attrs.pop(sc.GROUNDWATCH_SAMPLING_RATE) == 1.0
    assert len(attrs.pop(sc.GROUNDWATCH_RECORD_ID)) == 16
    assert 0.0 <= attrs.pop(sc.GROUNDWATCH_HALLUCINATION_PROBABILITY) <= 1.0
    assert attrs == {}, "no content, nothing undocumented, without capture_content"


def test_events_one_per_score_in_the_evaluation_spans_context(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(question=None, contexts=[PASSAGE], answer=MIXED)
    [span] = capgw.spans()
    events = capgw.events()
    assert [e.log_record.attributes[sc.GEN_AI_EVALUATION_NAME] for e in events] == [  # type: ignore[index]
        "faithfulness",
        "groundedness",
    ]
    for event, value in zip(events, (1.0, 0.5), strict=True):
        record = event.log_record
        assert record.event_name == "gen_ai.evaluation.result"
        assert record.trace_id == span.context.trace_id
        assert record.span_id == span.context.span_id
        attrs = dict(record.attributes or {})
        attrs.pop(sc.GEN_AI_EVALUATION_NAME)
        assert attrs.pop(sc.GEN_AI_EVALUATION_SCORE_VALUE) == value
        assert attrs.pop(sc.GEN_AI_EVALUATION_SCORE_LABEL) == "hallucinated"
        assert "1 supported" in attrs.pop(sc.GEN_AI_EVALUATION_EXPLANATION)
        assert (
            attrs.pop(sc.GROUNDWATCH_HALLUCINATION_PROBABILITY)
            == (
                span.attributes[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY]  # type: ignore[index]
            )
        )
        assert attrs == {}


def test_metrics_of_an_evaluation(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), route="faq")
    monitor.record(question="q", contexts=[PASSAGE], answer=MIXED)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    scores = capgw.metric_points(sc.METRIC_EVALUATION_SCORE)
    by_name = {attrs[sc.GEN_AI_EVALUATION_NAME]: (attrs, point) for attrs, point in scores}
    attrs, point = by_name["groundedness"]
    assert attrs == {
        sc.GEN_AI_EVALUATION_NAME: "groundedness",
        sc.GROUNDWATCH_ROUTE: "faq",
        sc.GROUNDWATCH_JUDGE: "echo",
    }
    assert tuple(point.explicit_bounds) == sc.SCORE_BUCKETS
    assert point.count == 2 and point.sum == 1.5
    assert sorted(
        (a[sc.GROUNDWATCH_LABEL], v) for a, v in capgw.metric_points(sc.METRIC_EVALUATIONS)
    ) == [("grounded", 1), ("hallucinated", 1)]
    assert sorted(
        (a[sc.GROUNDWATCH_VERDICT], a[sc.GROUNDWATCH_ROUTE], v)
        for a, v in capgw.metric_points(sc.METRIC_CLAIMS)
    ) == [("supported", "faq", 2), ("unsupported", "faq", 1)]
    [(attrs, duration)] = capgw.metric_points(sc.METRIC_JUDGE_DURATION)
    assert attrs == {sc.GROUNDWATCH_JUDGE: "echo"} and duration.count == 2
    tokens = {a[sc.GEN_AI_TOKEN_TYPE]: v for a, v in capgw.metric_points(sc.METRIC_JUDGE_TOKENS)}
    assert tokens == {"input": len(MIXED) + len(GOOD), "output": 3}
    assert capgw.metric_points(sc.METRIC_QUEUE_SIZE) == [({}, 0)]
    assert capgw.metric_points(sc.METRIC_RECORDS) == [
        ({sc.GROUNDWATCH_DECISION: "sampled", sc.GROUNDWATCH_ROUTE: "faq"}, 2)
    ]


def test_new_trace_when_there_is_no_caller_span(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [span] = capgw.spans()
    assert span.parent is None and list(span.links) == []


def test_unsampled_caller_trace_gets_a_new_trace_with_a_link(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    caller = SpanContext(0xABC, 0xDEF, is_remote=False, trace_flags=TraceFlags(0))
    with trace.use_span(NonRecordingSpan(caller)):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [span] = capgw.spans()
    assert span.parent is None
    assert span.context.trace_id != 0xABC
    [link] = span.links
    assert (link.context.trace_id, link.context.span_id) == (0xABC, 0xDEF)


def test_explicit_span_context_after_that_span_ended(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    with capgw.tracer.start_as_current_span("chain") as chain:
        pass
    monitor.record(
        question="q", contexts=[PASSAGE], answer=GOOD, span_context=chain.get_span_context()
    )
    [span] = capgw.spans()
    assert span.parent is not None and span.parent.span_id == chain.get_span_context().span_id
    assert span.context.trace_id == chain.get_span_context().trace_id


def test_parentage_across_threads_and_asyncio_tasks(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), max_queue_size=100)
    expected: dict[str, tuple[int, int]] = {}
    lock = threading.Lock()

    def one(name: str) -> None:
        with capgw.tracer.start_as_current_span(name) as span:
            with lock:
                ctx = span.get_span_context()
                expected[name] = (ctx.trace_id, ctx.span_id)
            monitor.record(question=name, contexts=[PASSAGE], answer=GOOD)

    threads = [threading.Thread(target=one, args=(f"thread-{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def task(name: str) -> None:
        with capgw.tracer.start_as_current_span(name) as span:
            ctx = span.get_span_context()
            expected[name] = (ctx.trace_id, ctx.span_id)
            await asyncio.sleep(0.001)  # interleave the tasks
            monitor.record(question=name, contexts=[PASSAGE], answer=GOOD)

    async def main() -> None:
        await asyncio.gather(*(task(f"task-{i}") for i in range(8)))

    asyncio.run(main())
    results = capgw.results()
    spans = {s.context.span_id: s for s in capgw.spans()}
    assert len(results) == 16
    by_record = {s.attributes[sc.GROUNDWATCH_RECORD_ID]: s for s in spans.values()}  # type: ignore[index]
    for record, _ in results:
        span = by_record[record.record_id]
        assert record.question is not None
        assert span.parent is not None
        assert (span.context.trace_id, span.parent.span_id) == expected[record.question]


def test_failed_evaluation_is_an_error_span_and_error_events(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=RaisingJudge())
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [(_, evaluation)] = capgw.results()
    assert evaluation.label == "error" and evaluation.error_type == "internal"
    [span] = capgw.spans()
    assert span.status.status_code is StatusCode.ERROR
    attrs = _attrs(span)
    assert attrs[sc.ERROR_TYPE] == "internal"
    assert sc.GROUNDWATCH_FAITHFULNESS not in attrs and sc.GROUNDWATCH_CLAIMS_SUPPORTED not in attrs
    for event in capgw.events():
        ev_attrs = dict(event.log_record.attributes or {})
        assert ev_attrs[sc.ERROR_TYPE] == "internal"
        assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in ev_attrs
        # The judge's message ("judge exploded") could quote content: not without capture.
        assert "exploded" not in ev_attrs[sc.GEN_AI_EVALUATION_EXPLANATION]
    assert capgw.metric_points(sc.METRIC_EVALUATIONS) == [
        ({sc.GROUNDWATCH_LABEL: "error", sc.ERROR_TYPE: "internal"}, 1)
    ]
    [(attrs, _)] = capgw.metric_points(sc.METRIC_JUDGE_DURATION)
    assert attrs == {sc.GROUNDWATCH_JUDGE: "raising", sc.ERROR_TYPE: "internal"}


def test_content_only_with_capture_after_redact_truncated(capgw: GroundwatchTelemetry) -> None:
    long_answer = GOOD + " " + "x" * 300 + "."
    monitor = capgw.monitor(
        judge=EchoJudge(),
        capture_content=True,
        redact=lambda text: text.replace("Eiffel", "[NAME]"),
        content_max_chars=120,
    )
    monitor.record(
        question="Eiffel height? my key is sk-abcdefghijklmnop", contexts=[PASSAGE], answer=GOOD
    )
    monitor.record(question=None, contexts=[PASSAGE], answer=long_answer)
    first, second = sorted(capgw.spans(), key=lambda s: s.start_time or 0)
    attrs = _attrs(first)
    question = attrs[sc.GROUNDWATCH_CONTENT_QUESTION]
    assert question == "[NAME] height? my key is [REDACTED]"
    assert attrs[sc.GROUNDWATCH_CONTENT_ANSWER] == "The [NAME] Tower stands 330 metres tall."
    claims = json.loads(attrs[sc.GROUNDWATCH_CONTENT_CLAIMS])
    assert claims == [
        {
            "text": "The [NAME] Tower stands 330 metres tall.",
            "verdict": "supported",
            "quotes": ["The [NAME] Tower stands 330 metres tall."],
            "sources": ["passage 1"],
        }
    ]
    answer = _attrs(second)[sc.GROUNDWATCH_CONTENT_ANSWER]
    assert answer.startswith("The [NAME] Tower") and answer.endswith("[truncated 222 chars]")
    assert sc.GROUNDWATCH_CONTENT_QUESTION not in _attrs(second)


def test_judge_runs_with_instrumentation_suppressed(capgw: GroundwatchTelemetry) -> None:
    sync_probe, async_probe = SuppressionProbe(), AsyncSuppressionProbe()
    for probe in (sync_probe, async_probe):
        capgw.monitor(judge=probe).record(question="q", contexts=[PASSAGE], answer=GOOD)
    capgw.flush()
    assert sync_probe.suppressed == [True] and async_probe.suppressed == [True]
    # ... and none of it leaked into the host's context.
    assert otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY) is None
    # Our own span is still emitted (the SDK tracer does not look at the key).
    assert len(capgw.spans()) == 2


def test_user_attributes_go_on_the_span(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    user = {"app.tenant": "acme", "app.tier": 2, "app.bad": object()}
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD, attributes=user)
    user["app.tenant"] = "changed after record()"
    attrs = _attrs(capgw.spans()[0])
    assert attrs["app.tenant"] == "acme" and attrs["app.tier"] == 2
    assert "app.bad" not in attrs


def test_no_claims_has_a_label_and_no_fake_numbers(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(question="q", contexts=[PASSAGE], answer="")
    [span] = capgw.spans()
    attrs = _attrs(span)
    assert attrs[sc.GROUNDWATCH_LABEL] == "no_claims"
    assert sc.GROUNDWATCH_FAITHFULNESS not in attrs and sc.GROUNDWATCH_GROUNDEDNESS not in attrs
    assert attrs[sc.GROUNDWATCH_CLAIMS_SUPPORTED] == 0
    for event in capgw.events():
        ev_attrs = dict(event.log_record.attributes or {})
        assert ev_attrs[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "no_claims"
        assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in ev_attrs and sc.ERROR_TYPE not in ev_attrs
    assert capgw.metric_points(sc.METRIC_EVALUATION_SCORE) == []
    assert capgw.metric_points(sc.METRIC_EVALUATIONS) == [({sc.GROUNDWATCH_LABEL: "no_claims"}, 1)]


def test_a_field_that_fails_costs_its_attributes_not_the_span_events_or_metrics(
    capgw: GroundwatchTelemetry,
) -> None:
    before = dict(guard.errors)

    def redact(text: str) -> str:
        raise ValueError("redaction service down")

    monitor = capgw.monitor(judge=EchoJudge(), capture_content=True, redact=redact)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    [span] = capgw.spans()
    attrs = _attrs(span)
    assert attrs[sc.GROUNDWATCH_LABEL] == "grounded"
    assert attrs[sc.GROUNDWATCH_JUDGE] == "echo"
    assert not [k for k in attrs if k.startswith("groundwatch.content.")]  # nothing unredacted
    assert len(capgw.events()) == 2
    assert capgw.metric_total(sc.METRIC_EVALUATIONS, groundwatch__label="grounded") == 1
    key = ("redact", "ValueError")
    assert guard.errors[key] - before.get(key, 0) == 1


class _Unsure(EchoJudge):
    """EchoJudge whose claims carry no confidence: the cascade escalates answers with "unsure"."""

    name = "unsure"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        result = super().judge(answer, contexts, question)
        confidence = None if "unsure" in answer else 0.99
        claims = [c.model_copy(update={"confidence": confidence}) for c in result.claims]
        return result.model_copy(update={"claims": claims})


def test_the_monitor_exports_the_cascades_escalations(capgw: GroundwatchTelemetry) -> None:
    cascade = gw.CascadeJudge(first=_Unsure(), then=EchoJudge())
    monitor = capgw.monitor(judge=cascade)
    for answer in (GOOD, GOOD, "unsure. " + GOOD):
        monitor.record(question="q", contexts=[PASSAGE], answer=answer)
    points = {}
    for attrs, value in capgw.metric_points(sc.METRIC_JUDGE_ESCALATIONS):
        escalated = attrs.pop(sc.GROUNDWATCH_ESCALATED)
        assert attrs.pop(sc.GROUNDWATCH_JUDGE) == "cascade(unsure,echo)"
        assert attrs == {}
        points[escalated] = value
    assert points == {True: 1, False: 2}
    assert (cascade.escalated, cascade.total) == (1, 3)


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_truncated_record_is_marked_on_its_span_and_counted(
    capgw: GroundwatchTelemetry, executor: str
) -> None:
    """Cut inputs stay a visible, countable fact online: ``groundwatch.truncated=true`` on the
    span and on the ``groundwatch.evaluations`` point a dashboard sums
    (``sum(groundwatch_evaluations_total{groundwatch_truncated="true"})``)."""
    monitor = capgw.monitor(judge=EchoJudge(), executor=executor)
    monitor.record(question="q", contexts=[PASSAGE] * (MAX_PASSAGES + 5), answer=GOOD)
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    long_answer = GOOD + " " + "x" * MAX_ANSWER_CHARS
    monitor.record(question="q", contexts=[PASSAGE], answer=long_answer)
    spans = capgw.spans()
    assert sorted(bool(_attrs(s).get(sc.GROUNDWATCH_TRUNCATED)) for s in spans) == [
        False,
        True,
        True,
    ]
    points = capgw.metric_points(sc.METRIC_EVALUATIONS)
    truncated = sum(v for a, v in points if a.get(sc.GROUNDWATCH_TRUNCATED) is True)
    assert truncated == 2, points
    assert sum(v for _, v in points) == 3
    assert capgw.metric_total(sc.METRIC_EVALUATIONS, groundwatch__truncated=True) == 2  # type: ignore[arg-type]


def test_monitor_stats_print_as_counts(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=EchoJudge(), sampler=gw.RatioSampler(1.0))
    assert str(monitor.stats) == "Stats(records: none yet; dropped: none; queue: 0)"
    for _ in range(3):
        monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    monitor.record(answer=GOOD)  # no contexts: invalid_input
    monitor.stats.count_dropped(sc.ERROR_SHUTDOWN, 2)
    capgw.flush()
    text = str(monitor.stats)
    assert text == (
        "Stats(records: 4 (sampled 3, error/invalid_input 1); dropped: 2 (shutdown 2); queue: 0)"
    )
    assert repr(monitor.stats) == text
    assert "object at 0x" not in f"{monitor.stats}"


def test_failure_counters_read_zero_before_the_first_failure(capgw: GroundwatchTelemetry) -> None:
    """``groundwatch.errors`` and ``groundwatch.evaluations.dropped`` exist from the start at 0
    for their known label sets, so a panel reads 0 on a healthy service (not "No data") and a
    rule's ``increase()`` sees the first failure."""
    monitor = capgw.monitor(judge=EchoJudge())
    monitor.record(question="q", contexts=[PASSAGE], answer=GOOD)
    dropped = dict((a[sc.ERROR_TYPE], v) for a, v in capgw.metric_points(sc.METRIC_DROPPED))
    assert dropped == {t: 0 for t in sc.DROPPED_ERROR_TYPES}
    assert {"shutdown", "fork", "internal", "transport", "invalid_input"} <= set(dropped)
    zeros = [a for a, v in capgw.metric_points(sc.METRIC_ERRORS) if v == 0]
    assert {a[sc.GROUNDWATCH_COMPONENT] for a in zeros} == set(sc.ERROR_COMPONENTS)
    assert all(set(a) == {sc.GROUNDWATCH_COMPONENT} for a in zeros)
    # The first failure adds its own series beside the zeros, which stay (no series vanishes).
    monitor.shutdown()
    monitor.stats.count_dropped(sc.ERROR_SHUTDOWN, 2)
    dropped = dict((a[sc.ERROR_TYPE], v) for a, v in capgw.metric_points(sc.METRIC_DROPPED))
    assert dropped == {**{t: 0 for t in sc.DROPPED_ERROR_TYPES}, sc.ERROR_SHUTDOWN: 2}


def test_every_component_that_counts_errors_is_published_at_zero() -> None:
    """The runtime's places of failure, as the code names them, are the known label set."""
    import re
    from pathlib import Path

    src = Path(gw.__file__).parent
    found: set[str] = set()
    for sub in ("runtime", "telemetry", "alerts", "queue"):
        for path in (src / sub).rglob("*.py"):
            text = path.read_text()
            found |= set(
                re.findall(r'\bguard\.(?:internal_error|user_error|user_fault)\(\s*"([^"]+)"', text)
            )
            for where in re.findall(r'_collect\(attrs, "([^"]+)"', text):
                found.add(f"telemetry {where}")
    assert found and found <= set(sc.ERROR_COMPONENTS), found - set(sc.ERROR_COMPONENTS)
