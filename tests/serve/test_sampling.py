"""Sampling in serve is the in-app sampler's decision on the same trace id; per-route rules
read the route from a span attribute or the service name."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry
from groundwatch.types import RagRecord

from .conftest import RunningReceiver
from .otlp import openinference_trace, post, protobuf, recorded


def settle(capgw: GroundwatchTelemetry, receiver: RunningReceiver, traces: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        outcomes = receiver.service.health()["traces"]
        # A trace refused at intake is done when its first span arrives.
        done = outcomes.get("interaction", 0) + outcomes.get("not_sampled", 0)
        if done >= traces and receiver.service.monitor.force_flush(10_000):
            return
        time.sleep(0.05)
    raise AssertionError("traces not assembled in time")


def test_the_same_traces_are_picked_as_by_the_in_app_ratio_sampler(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    sampler = gw.RatioSampler(0.3)
    receiver = make_receiver(sampler=gw.RatioSampler(0.3), max_queue_size=512)
    with recorded() as (provider, exported):
        for _ in range(200):
            openinference_trace(provider)
        spans = exported.get_finished_spans()
    assert post(receiver.url, protobuf(spans)).status == 200
    settle(capgw, receiver, 200)
    trace_ids = {s.context.trace_id for s in spans}
    expected = {t for t in trace_ids if sampler.decide(RagRecord(trace_id=t)).value == "sampled"}
    scored = {s.context.trace_id for s in capgw.spans()}
    assert scored == expected
    assert 30 < len(scored) < 90
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="not_sampled") == (
        200 - len(expected)
    )


def test_route_rules_from_a_span_attribute_and_the_service_name(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(
        sampler=gw.RouteSampler(
            {"checkout": gw.RatioSampler(1.0), "search-svc": gw.RatioSampler(1.0)},
            default=gw.RatioSampler(0.0),
        ),
        route_attribute="app.route",
    )
    bodies = []
    for service, route in (("rag-app", "checkout"), ("rag-app", "faq"), ("search-svc", None)):
        with recorded(service) as (provider, exported):
            if route is None:
                openinference_trace(provider)
            else:
                # The route sits on a plain span below the root, which serve does not store.
                tracer = provider.get_tracer("app")
                with (
                    tracer.start_as_current_span("request"),
                    tracer.start_as_current_span("handler", attributes={"app.route": route}),
                ):
                    openinference_trace(provider)
            bodies.append(protobuf(exported.get_finished_spans()))
    for body in bodies:
        assert post(receiver.url, body).status == 200
    settle(capgw, receiver, 3)
    routes = sorted(s.attributes[sc.GROUNDWATCH_ROUTE] for s in capgw.spans())
    assert routes == ["checkout", "search-svc"]
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="not_sampled") == 1


def test_unsampled_traces_keep_no_spans_and_the_ratio_applies_once(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    sampler = gw.RatioSampler(0.5)
    # A quiet period beyond the test: what is pending is what the intake kept.
    receiver = make_receiver(sampler=gw.RatioSampler(0.5), quiet_s=600, max_queue_size=512)
    with recorded() as (provider, exported):
        for _ in range(400):
            openinference_trace(provider)
        spans = exported.get_finished_spans()
    assert post(receiver.url, protobuf(spans)).status == 200
    trace_ids = {s.context.trace_id for s in spans}
    expected = {t for t in trace_ids if sampler.decide(RagRecord(trace_id=t)).value == "sampled"}
    unsampled = 400 - len(expected)
    health = receiver.service.health()
    assert health["pending_traces"] == len(expected)
    # Each unsampled trace's 3 spans were taken and dropped; the trace was decided once.
    assert health["spans"] == {"accepted": 3 * len(expected), "not_sampled": 3 * unsampled}
    assert health["traces"] == {"not_sampled": unsampled}
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="not_sampled") == unsampled
    assert receiver.stop()
    scored = {s.context.trace_id for s in capgw.spans()}
    # The Monitor decides again on the same trace id: the same answer, not a second halving.
    assert scored == expected
    assert 0.4 < len(scored) / 400 < 0.6
    decisions = {
        d: capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision=d)
        for d in ("sampled", "not_sampled")
    }
    assert decisions == {"sampled": len(expected), "not_sampled": unsampled}
    assert sum(decisions.values()) == 400  # seen == decisions


def _first_span(
    trace_id: int, *, root: bool, service: str = "svc", route: str | None = None
) -> Any:
    from groundwatch.serve import SpanData

    parent = b"" if root else b"\x01" * 8
    return SpanData(
        trace_id.to_bytes(16, "big"), b"\x02" * 8, parent, "s", 0, 1, {}, [], service, 0, route
    )


def test_intake_decides_the_route_rate_when_the_first_span_names_the_route() -> None:
    from groundwatch.serve._intake import IntakeSampler

    routes = gw.RouteSampler({"checkout": gw.RatioSampler(1.0)}, default=gw.RatioSampler(0.0))
    by_service = IntakeSampler(routes, route_attribute=None)
    # The root's service.name is the route: known on the root, decided at its route's rate.
    assert by_service.sampled(_first_span(7, root=True, service="checkout"))
    assert not by_service.sampled(_first_span(7, root=True, service="faq"))
    # A child first: the root (and so the route) is still to come; kept at the highest rate,
    # the route's own rate applies when the interaction is recorded.
    assert by_service.sampled(_first_span(7, root=False, service="faq"))
    by_attribute = IntakeSampler(routes, route_attribute="app.route")
    assert not by_attribute.sampled(_first_span(7, root=True, route="faq"))
    assert by_attribute.sampled(_first_span(7, root=True, route="checkout"))
    # The root without the attribute: a later span may carry it.
    assert by_attribute.sampled(_first_span(7, root=True, service="faq"))


def test_intake_decision_is_the_ratio_samplers_on_the_trace_id() -> None:
    from groundwatch.serve._intake import IntakeSampler

    for sampler in (
        gw.RatioSampler(0.25),
        gw.RateLimitSampler(1, gw.RatioSampler(0.25)),
        gw.RouteSampler({"a": gw.RatioSampler(0.1)}, default=gw.RatioSampler(0.25)),
    ):
        intake = IntakeSampler(sampler, route_attribute=None)
        ids = [random.getrandbits(128) for _ in range(2000)]
        picked = {t for t in ids if intake.sampled(_first_span(t, root=False))}
        ratio = gw.RatioSampler(0.25)
        assert picked == {t for t in ids if ratio.decide(RagRecord(trace_id=t)).value == "sampled"}
    # A sampler that is not made of the built-in ones decides at scoring time only.
    custom = IntakeSampler(object(), route_attribute=None)
    assert all(custom.sampled(_first_span(random.getrandbits(128), root=True)) for _ in range(50))


def test_rate_limit_applies_at_scoring_time_only(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RateLimitSampler(60, gw.RatioSampler(1.0), burst=2))
    with recorded() as (provider, exported):
        tracer = provider.get_tracer("app")
        for _ in range(3):  # traces with no interaction take no token
            with tracer.start_as_current_span("health-check"):
                pass
        for _ in range(4):
            openinference_trace(provider)
        spans = exported.get_finished_spans()
    assert post(receiver.url, protobuf(spans)).status == 200
    deadline = time.monotonic() + 30
    while receiver.service.health()["traces"].get("interaction", 0) < 4:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert receiver.service.monitor.force_flush(10_000)
    assert len(capgw.spans()) == 2
    assert capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="throttled") == 2
    assert receiver.service.health()["traces"] == {"interaction": 4, "no_interaction": 3}


def test_the_audit_marks_the_traces_the_app_would_and_the_option_sets_it(
    capgw: GroundwatchTelemetry,
    make_receiver: Callable[..., RunningReceiver],
    monkeypatch: Any,
) -> None:
    receiver = make_receiver(audit_rate=0.5, max_queue_size=512)
    app = capgw.monitor(audit_rate=0.5)  # the app's own monitor, same rate
    with recorded() as (provider, exported):
        for _ in range(60):
            openinference_trace(provider)
        spans = exported.get_finished_spans()
    assert post(receiver.url, protobuf(spans)).status == 200
    settle(capgw, receiver, 60)
    evaluations = capgw.spans()
    assert len(evaluations) == 60
    marked = [bool((s.attributes or {}).get(sc.GROUNDWATCH_AUDIT)) for s in evaluations]
    assert marked == [app.audited(s.context.trace_id) for s in evaluations]
    assert 15 < sum(marked) < 45
    assert all(
        sc.GROUNDWATCH_HALLUCINATION_PROBABILITY in (s.attributes or {}) for s in evaluations
    )

    # `groundwatch serve --audit-rate` (or GROUNDWATCH_AUDIT_RATE) reaches its monitor.
    from groundwatch.cli import build_parser
    from groundwatch.serve.cli import build_service

    monkeypatch.setenv("GROUNDWATCH_AUDIT_RATE", "0.25")
    for argv, rate in ((["serve"], 0.25), (["serve", "--audit-rate", "2%"], 0.02)):
        args = build_parser().parse_args(argv)
        service = build_service(args, gw.LocalJudge())
        try:
            assert service.monitor.audit_rate == rate
        finally:
            service.monitor.shutdown()
