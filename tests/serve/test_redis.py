"""serve hands interactions to the Redis stream for a ``groundwatch worker`` pool: the
records on the wire carry the trace's root span as their parent, and a real worker (the
distributed tests' in-process one) scores them into that trace."""

from __future__ import annotations

import time
from collections.abc import Callable

import groundwatch as gw
from groundwatch.queue import stream_json
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from ..distributed.conftest import RedisServer, redis_server  # noqa: F401
from ..distributed.test_queue import InProcessWorker
from .conftest import RunningReceiver, wait_for_evaluations
from .otlp import ANSWER, DOCS, QUESTION, openinference_trace, post, protobuf, recorded

STREAM = "groundwatch:records"


def test_interactions_go_to_the_redis_stream_under_the_root_span(
    capgw: GroundwatchTelemetry,
    make_receiver: Callable[..., RunningReceiver],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    receiver = make_receiver(
        sampler=gw.RatioSampler(1.0), queue=gw.RedisQueue(redis_server.url, stream=STREAM)
    )
    with recorded() as (provider, exported):
        openinference_trace(provider)
        spans = exported.get_finished_spans()
    assert post(receiver.url, protobuf(spans)).status == 200
    client = redis_server.client()
    deadline = time.monotonic() + 20
    while client.xlen(STREAM) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    ((_, fields),) = client.xrange(STREAM)
    record = stream_json.decode(fields[b"record"])
    root = next(s for s in spans if s.parent is None)
    assert record.trace is not None
    assert record.trace.trace_id == root.context.trace_id
    assert record.trace.span_id == root.context.span_id
    assert record.question == QUESTION
    assert record.answer == ANSWER
    assert [p.text for p in record.passages] == DOCS
    assert record.route == "rag-app"
    assert record.attributes[sc.GROUNDWATCH_SERVE_SOURCE] == "openinference"
    # Nothing was judged in serve: the pool scores it, into the app's trace.
    capgw.flush()
    assert capgw.spans() == []
    worker = InProcessWorker(capgw, redis_server.url)
    try:
        (span,) = wait_for_evaluations(capgw, 1)
    finally:
        worker.stop()
    assert span.context.trace_id == root.context.trace_id
    assert span.parent is not None and span.parent.span_id == root.context.span_id
    assert span.attributes[sc.GROUNDWATCH_LABEL] == "grounded"
