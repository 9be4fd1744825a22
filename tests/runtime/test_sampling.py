"""Samplers: determinism, the subset property, rate limits, routes, always_score."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace.sampling import Decision as OtelDecision
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from groundwatch import (
    Decision,
    RagRecord,
    RateLimitSampler,
    RatioSampler,
    RouteSampler,
    TokenBudgetSampler,
)
from groundwatch.runtime import sampling
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import EchoJudge


def rec(trace_id: int = 0, record_id: str = "", route: str | None = None) -> RagRecord:
    return RagRecord(
        question="q",
        contexts=[],
        answer="a",
        route=route,
        trace_id=trace_id,
        record_id=record_id or f"{random.getrandbits(64):016x}",
    )


@given(
    st.integers(min_value=1, max_value=(1 << 128) - 1),
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=0, max_value=1),
)
def test_a_lower_rate_selects_a_subset_of_a_higher_one(trace_id: int, a: float, b: float) -> None:
    low, high = sorted((a, b))
    record = rec(trace_id)
    if RatioSampler(low).decide(record) is Decision.SAMPLED:
        assert RatioSampler(high).decide(record) is Decision.SAMPLED


@given(st.integers(min_value=1, max_value=(1 << 128) - 1), st.floats(min_value=0, max_value=1))
def test_ratio_agrees_with_opentelemetrys_trace_id_ratio_sampler(
    trace_id: int, rate: float
) -> None:
    ours = RatioSampler(rate).decide(rec(trace_id)) is Decision.SAMPLED
    theirs = TraceIdRatioBased(rate).should_sample(None, trace_id, "x").decision
    assert ours == (theirs is OtelDecision.RECORD_AND_SAMPLE)


def test_ratio_is_deterministic_and_close_to_its_rate() -> None:
    records = [rec(random.getrandbits(128) or 1) for _ in range(20_000)]
    first = [RatioSampler(0.25).decide(r) for r in records]
    assert first == [RatioSampler(0.25).decide(r) for r in records]
    share = first.count(Decision.SAMPLED) / len(records)
    assert 0.23 < share < 0.27
    no_trace = [rec(record_id=f"{i:016x}") for i in range(20_000)]
    share = sum(RatioSampler(0.25).decide(r) is Decision.SAMPLED for r in no_trace) / 20_000
    assert 0.23 < share < 0.27, "the record id is the key without a trace"
    assert all(RatioSampler(0).decide(r) is Decision.NOT_SAMPLED for r in records[:100])
    assert all(RatioSampler(1).decide(r) is Decision.SAMPLED for r in records[:100])
    with pytest.raises(ValueError):
        RatioSampler(1.5)


def test_rate_limit_is_a_token_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(sampling.time, "monotonic", lambda: now[0])
    limiter = RateLimitSampler(60, burst=5)  # one a second, bursts of five
    got = [limiter.decide(rec()) for _ in range(8)]
    assert got == [Decision.SAMPLED] * 5 + [Decision.THROTTLED] * 3
    now[0] += 2.0
    got = [limiter.decide(rec()) for _ in range(3)]
    assert got == [Decision.SAMPLED] * 2 + [Decision.THROTTLED]
    # On top of a ratio: the ratio's "no" stays not_sampled and costs no token.
    capped = RateLimitSampler(60, RatioSampler(0.0), burst=1)
    assert capped.decide(rec(1)) is Decision.NOT_SAMPLED
    assert capped._tokens == 1.0
    assert capped.rate_for(rec()) == 0.0


def test_route_sampler_picks_by_route() -> None:
    sampler = RouteSampler(
        {"vip": RatioSampler(1.0), "bulk": RatioSampler(0.0)}, default=RatioSampler(0.5)
    )
    assert sampler.decide(rec(1, route="vip")) is Decision.SAMPLED
    assert sampler.decide(rec(1, route="bulk")) is Decision.NOT_SAMPLED
    assert sampling.sampling_rate(sampler, rec(route="other")) == 0.5
    assert sampling.sampling_rate(sampler, rec(route=None)) == 0.5
    assert sampling.sampling_rate(object(), rec()) is None


def test_monitor_counts_every_decision_and_always_score_bypasses(
    capgw: GroundwatchTelemetry,
) -> None:
    sampler = RouteSampler(
        {"vip": RatioSampler(1.0)}, default=RateLimitSampler(1, RatioSampler(1.0), burst=1)
    )
    monitor = capgw.monitor(judge=EchoJudge(), sampler=sampler)
    for route in ("vip", "vip", "bulk", "bulk", "bulk"):
        monitor.record(question="q", contexts=["It is 3 m."], answer="It is 3 m.", route=route)
    monitor.record(
        question="q", contexts=["x"], answer="It is 3 m.", route="bulk", always_score=True
    )
    points = {
        (a[sc.GROUNDWATCH_DECISION], a[sc.GROUNDWATCH_ROUTE]): v
        for a, v in capgw.metric_points(sc.METRIC_RECORDS)
    }
    assert points == {("sampled", "vip"): 2, ("sampled", "bulk"): 2, ("throttled", "bulk"): 2}
    rates = sorted(
        (s.attributes[sc.GROUNDWATCH_ROUTE], s.attributes[sc.GROUNDWATCH_SAMPLING_RATE])  # type: ignore[index]
        for s in capgw.spans()
    )
    assert rates == [("bulk", 1.0), ("bulk", 1.0), ("vip", 1.0), ("vip", 1.0)]


def test_monitor_ratio_follows_the_callers_trace(capgw: GroundwatchTelemetry) -> None:
    """Two processes sampling the same trace at the same rate agree: the decision depends on
    the trace id only."""
    monitors = [capgw.monitor(judge=EchoJudge(), sampler=RatioSampler(0.3)) for _ in range(2)]
    picked: list[list[int]] = [[], []]
    for _ in range(200):
        with capgw.tracer.start_as_current_span("request") as span:
            for i, monitor in enumerate(monitors):
                before = monitor.stats.snapshot()[0].get(("sampled", None), 0)
                monitor.record(question="q", contexts=["x"], answer="y")
                if monitor.stats.snapshot()[0].get(("sampled", None), 0) > before:
                    picked[i].append(span.get_span_context().trace_id)
    assert picked[0] == picked[1] and 30 < len(picked[0]) < 90


def test_token_budget_refuses_once_spent_and_refills(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [5000.0]
    monkeypatch.setattr(sampling.time, "monotonic", lambda: now[0])
    budget = TokenBudgetSampler(100)
    # Inside a route sampler: the monitor still feeds it the results.
    monitor = capgw.monitor(judge=EchoJudge(), sampler=RouteSampler({}, default=budget))
    answer = "It is three metres tall, as the passage says."  # 45 input + 1 output tokens
    for _ in range(4):
        monitor.record(question="q", contexts=["x"], answer=answer)
        capgw.flush()
    points = {a[sc.GROUNDWATCH_DECISION]: v for a, v in capgw.metric_points(sc.METRIC_RECORDS)}
    assert points == {"sampled": 3, "over_budget": 1}
    assert budget._tokens == 100 - 3 * 46
    now[0] += 3600 * 46 / 100  # an hour's refill rate: 46 tokens back
    assert budget.decide(rec()) is Decision.SAMPLED


@pytest.mark.parametrize(
    "make",
    [
        lambda: RateLimitSampler(float("nan")),
        lambda: RateLimitSampler(float("inf")),
        lambda: RateLimitSampler(60, burst=0.5),
        lambda: RateLimitSampler(60, burst=float("nan")),
        lambda: TokenBudgetSampler(float("nan")),
        lambda: TokenBudgetSampler(float("inf")),
    ],
)
def test_limits_that_would_refuse_every_record_are_rejected(make: Any) -> None:
    # NaN passed the old "<= 0" checks and then throttled every record, silently.
    with pytest.raises(ValueError):
        make()
