"""The judge's probability and the random audit through the Redis queue: the app's monitor
sends, a real ``groundwatch worker`` scores, and both mark the same traces (issue #39)."""

from __future__ import annotations

import random
from typing import Any

from opentelemetry.trace import SpanContext, TraceFlags

import groundwatch as gw
from groundwatch.rates import RateTotals
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from ..runtime.judges import known_probability
from .conftest import RedisServer, metric_sum, wait_for

PASSAGES = ["The refund window is 30 days from delivery."]
N = 40


def _answer(i: int) -> str:
    return f"The refund window is 30 days from delivery. Case {i}." if i % 2 else f"No {i}."


def test_a_worker_marks_the_traces_the_app_audits_and_carries_the_probability(
    capgw: GroundwatchTelemetry, redis_server: RedisServer, workers: Any
) -> None:
    monitor = capgw.monitor(queue=gw.RedisQueue(redis_server.url), audit_rate=0.5)
    worker = workers(
        redis_server.url,
        "--judge",
        "probability",
        "--audit-rate",
        "50%",
        env={"GW_TEST_PROBABILITY_JUDGE": "1"},
    )
    rng = random.Random(5)
    traces = {}
    for i in range(N):
        ctx = SpanContext(
            rng.getrandbits(128), rng.getrandbits(64), True, TraceFlags(TraceFlags.SAMPLED)
        )
        monitor.record(
            question="Refunds?",
            contexts=PASSAGES,
            answer=_answer(i),
            span_context=ctx,
            route="faq",
            attributes={"case": i},
        )
        traces[i] = ctx.trace_id
    assert monitor.force_flush(10_000)
    wait_for(lambda: len(worker.spans()) == N, 60, "every record scored by the worker")
    spans = [s for s in worker.spans() if s["name"] == sc.SPAN_EVALUATION]
    marked = 0
    for span in spans:
        attrs = span["attributes"]
        i = attrs["case"]
        assert span["trace_id"] == f"{traces[i]:032x}"
        assert attrs[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] == known_probability(_answer(i))
        # The worker's mark is the app's Monitor.audited (one hash, one rate, two processes).
        assert attrs.get(sc.GROUNDWATCH_AUDIT, False) == monitor.audited(traces[i])
        marked += monitor.audited(traces[i])
    assert 8 < marked < 32
    metrics = worker.terminate()
    # The worker's rate counters are the totals of what it judged.
    want = RateTotals.from_answers(
        [s["attributes"][sc.GROUNDWATCH_LABEL] == "hallucinated" for s in spans],
        [s["attributes"][sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] for s in spans],
    )
    route = {"groundwatch__route": "faq", "groundwatch__judge": "probability"}
    assert metric_sum(metrics, sc.METRIC_RATE_SCORED, **route) == want.scored == N
    assert metric_sum(metrics, sc.METRIC_RATE_FLAGGED, **route) == want.flagged
    assert (
        abs(metric_sum(metrics, sc.METRIC_RATE_PROBABILITY, **route) - want.probability_sum) < 1e-9
    )
    squares = metric_sum(metrics, sc.METRIC_RATE_PROBABILITY_SQUARES, **route)
    assert abs(squares - want.probability_square_sum) < 1e-9
    # The audit sums wait at 0 for the labels (groundwatch feedback import brings them).
    assert metric_sum(metrics, sc.METRIC_AUDIT_LABELLED, **route) == 0
    assert [p[0] for p in metrics[sc.METRIC_AUDIT_LABELLED]] == [
        {sc.GROUNDWATCH_ROUTE: "faq", sc.GROUNDWATCH_JUDGE: "probability"}
    ]
