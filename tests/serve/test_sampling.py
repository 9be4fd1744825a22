"""Sampling in serve is the in-app sampler's decision on the same trace id; per-route rules
read the route from a span attribute or the service name."""

from __future__ import annotations

import time
from collections.abc import Callable

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry
from groundwatch.types import RagRecord

from .conftest import RunningReceiver
from .otlp import openinference_trace, post, protobuf, recorded


def settle(capgw: GroundwatchTelemetry, receiver: RunningReceiver, traces: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done = receiver.service.health()["traces"].get("interaction", 0)
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
