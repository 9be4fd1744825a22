"""The OTLP/HTTP contract: encodings, content types, caps, partial success, backpressure,
shutdown; bad input gets a clear OTLP error or a counted skip and serve stays up."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry
from groundwatch.types import Judgement

from .conftest import RunningReceiver, wait_for_evaluations
from .otlp import (
    ANSWER,
    DOCS,
    JSON,
    PROTOBUF,
    QUESTION,
    get,
    openinference_trace,
    otlp_json,
    post,
    protobuf,
    recorded,
)


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out")


def assert_up(receiver: RunningReceiver) -> None:
    reply = get(receiver.url, "/health")
    assert reply.status == 200
    assert json.loads(reply.body)["status"] == "ok"


@pytest.mark.parametrize(
    ("content_type", "encode", "encoding"),
    [
        (PROTOBUF, protobuf, None),
        (PROTOBUF, protobuf, "gzip"),
        (JSON, otlp_json, None),
        (JSON, otlp_json, "gzip"),
        ("application/json; charset=utf-8", otlp_json, None),
    ],
)
def test_each_encoding_is_scored_under_the_root(
    capgw: GroundwatchTelemetry,
    make_receiver: Callable[..., RunningReceiver],
    content_type: str,
    encode: Callable[[Any], bytes],
    encoding: str | None,
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    with recorded() as (provider, exported):
        openinference_trace(provider)
        spans = exported.get_finished_spans()
    body = encode(spans)
    if encoding:
        body = gzip.compress(body)
    reply = post(receiver.url, body, content_type, encoding=encoding)
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith(content_type.split(";")[0])
    assert not reply.response().HasField("partial_success")
    (span,) = wait_for_evaluations(capgw, 1)
    root = next(s for s in spans if s.parent is None)
    assert span.context.trace_id == root.context.trace_id
    assert span.parent.span_id == root.context.span_id
    expected = gw.evaluate(ANSWER, DOCS, question=QUESTION)
    assert span.attributes[sc.GROUNDWATCH_LABEL] == expected.label == "grounded"
    assert span.attributes[sc.GROUNDWATCH_GROUNDEDNESS] == expected.groundedness


def test_truncated_protobuf_is_400_and_serve_stays_up(
    make_receiver: Callable[..., RunningReceiver],
) -> None:
    receiver = make_receiver()
    with recorded() as (provider, exported):
        openinference_trace(provider)
        body = protobuf(exported.get_finished_spans())
    for broken in (body[: len(body) // 2], body[:-3], b"\xff" * 40):
        reply = post(receiver.url, broken)
        assert reply.status == 400, broken
        # OTLP: a 4xx body is a google.rpc.Status in the request's encoding.
        status = reply.rpc_status()
        assert status.code == 3  # INVALID_ARGUMENT
        assert "undecodable protobuf" in status.message
    reply = post(receiver.url, b"{not json", JSON)
    assert reply.status == 400
    assert reply.headers["Content-Type"].startswith(JSON)
    assert "undecodable JSON" in reply.rpc_status().message
    assert post(receiver.url, b"[1, 2]", JSON).status == 400
    assert post(receiver.url, b'{"resourceSpans": [{"scopeSpans": 3}]}', JSON).status == 400
    assert post(receiver.url, gzip.compress(body)[:-8], encoding="gzip").status == 400
    assert post(receiver.url, body, encoding="br").status == 415
    assert_up(receiver)
    assert post(receiver.url, body).status == 200


@pytest.mark.parametrize("content_type", ["text/plain", "", "application/grpc"])
def test_wrong_content_type_is_415(
    make_receiver: Callable[..., RunningReceiver], content_type: str
) -> None:
    receiver = make_receiver()
    reply = post(receiver.url, b"\x0a\x00", content_type)
    assert reply.status == 415
    assert "application/x-protobuf" in reply.rpc_status().message
    assert_up(receiver)


def test_huge_bodies_are_413_compressed_or_not(
    make_receiver: Callable[..., RunningReceiver],
) -> None:
    receiver = make_receiver(max_body_bytes=64 * 1024)
    reply = post(receiver.url, b"\x00" * (64 * 1024 + 1))
    assert reply.status == 413
    assert reply.rpc_status().code == 8  # RESOURCE_EXHAUSTED
    assert "body exceeds 65536 bytes" in reply.rpc_status().message
    # A gzip bomb: 50 KB on the wire inflating to 50 MB is cut at the cap.
    bomb = gzip.compress(b"\x00" * (50 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 64 * 1024
    reply = post(receiver.url, bomb, encoding="gzip")
    assert reply.status == 413
    assert "decompressed body exceeds" in reply.rpc_status().message
    assert_up(receiver)
    assert json.loads(get(receiver.url, "/health").body)["requests"]["413"] == 2


def test_invalid_spans_are_rejected_in_partial_success(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    with recorded() as (provider, exported):
        openinference_trace(provider)
        request = ExportTraceServiceRequest()
        request.ParseFromString(protobuf(exported.get_finished_spans()))
    broken = request.resource_spans[0].scope_spans[0].spans.add()
    broken.name = "no ids"
    reply = post(receiver.url, request.SerializeToString())
    assert reply.status == 200
    partial = reply.response().partial_success
    assert partial.rejected_spans == 1
    assert "trace_id" in partial.error_message
    # The valid spans of the same request are scored.
    assert len(wait_for_evaluations(capgw, 1)) == 1
    health = json.loads(get(receiver.url, "/health").body)
    assert health["spans"] == {"accepted": 3, "rejected": 1}


def test_odd_attributes_are_counted_skips_and_the_rest_is_kept(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    odd = {
        # Not text, not a number: the document is skipped, counted; the others are kept.
        "retrieval.documents.2.document.content": [1, 2, 3],
        # Metadata that is not JSON, and a score that is not a number.
        "retrieval.documents.3.document.content": "Audio guides are free.",
        "retrieval.documents.3.document.metadata": "{not json",
        "retrieval.documents.4.document.content": "Cloakroom in the basement.",
        "retrieval.documents.4.document.score": "high",
        # Keys that look like ours but are not.
        "retrieval.documents.x.document.content": "ignored",
        "retrieval.documents": "flat",
    }
    with recorded() as (provider, exported):
        openinference_trace(provider, extra_retriever=odd)
        body = protobuf(exported.get_finished_spans())
    assert post(receiver.url, body).status == 200
    wait_for_evaluations(capgw, 1)
    ((record, evaluation),) = capgw.results()
    assert [p.text for p in record.contexts] == DOCS
    assert evaluation.label == "grounded"
    skipped = json.loads(get(receiver.url, "/health").body)["skipped"]
    assert skipped == {"openinference.document": 3}
    assert_up(receiver)


class BlockingJudge:
    name = "blocking"

    def __init__(self) -> None:
        self.release = threading.Event()

    def judge(self, answer: str, contexts: Any, question: Any) -> Judgement:
        self.release.wait(30)
        return gw.LocalJudge().judge(answer, contexts, question)


def test_backpressure_is_429_with_retry_after_then_recovers(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    judge = BlockingJudge()
    receiver = make_receiver(
        judge=judge, sampler=gw.RatioSampler(1.0), max_queue_size=4, quiet_s=0.05
    )
    replies = []
    for _ in range(12):
        with recorded() as (provider, exported):
            openinference_trace(provider)
            body = protobuf(exported.get_finished_spans())
        replies.append(post(receiver.url, body))
        time.sleep(0.15)  # let the trace complete and queue
    statuses = [r.status for r in replies]
    assert 429 in statuses, statuses
    refused = next(r for r in replies if r.status == 429)
    assert int(refused.headers["Retry-After"]) >= 1
    assert refused.rpc_status().code == 8  # RESOURCE_EXHAUSTED
    judge.release.set()
    wait_for(lambda: receiver.service.monitor.stats.queue_size() == 0)
    with recorded() as (provider, exported):
        openinference_trace(provider)
        assert post(receiver.url, protobuf(exported.get_finished_spans())).status == 200


def test_loop_protection_our_evaluation_span_sent_back_is_not_ingested(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    with recorded() as (provider, exported):
        openinference_trace(provider)
        assert post(receiver.url, protobuf(exported.get_finished_spans())).status == 200
    (ours,) = wait_for_evaluations(capgw, 1)
    # A Collector fanning traces out to serve and a backend sends our span back to us.
    assert post(receiver.url, protobuf([ours])).status == 200
    time.sleep(0.5)
    capgw.flush()
    assert len(capgw.spans()) == 1
    health = json.loads(get(receiver.url, "/health").body)
    assert health["spans"]["own"] == 1
    assert health["pending_traces"] == 0


def test_shutdown_scores_what_is_pending_and_refuses_with_503(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    # A quiet period far beyond the test: only the shutdown can complete the trace.
    receiver = make_receiver(sampler=gw.RatioSampler(1.0), quiet_s=600)
    with recorded() as (provider, exported):
        openinference_trace(provider)
        body = protobuf(exported.get_finished_spans())
    assert post(receiver.url, body).status == 200
    assert receiver.on_loop(lambda: len(receiver.service.assembler)) == 1
    capgw.flush()
    assert capgw.spans() == []
    receiver.service.stopping = True
    reply = post(receiver.url, body)
    assert reply.status == 503
    assert reply.headers["Retry-After"] == "1"
    assert get(receiver.url, "/health").status == 503
    assert get(receiver.url, "/readyz").status == 503  # out of the load balancer
    assert get(receiver.url, "/livez").status == 200  # but not restarted mid-shutdown
    assert receiver.stop()
    (span,) = capgw.spans()
    assert span.attributes[sc.GROUNDWATCH_LABEL] == "grounded"


def test_serve_instruments_report_what_health_reports(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    with recorded() as (provider, exported):
        openinference_trace(provider)
        body = protobuf(exported.get_finished_spans())
    assert post(receiver.url, body).status == 200
    assert post(receiver.url, b"\xff" * 40).status == 400
    wait_for_evaluations(capgw, 1)
    health = receiver.service.health()

    def points(name: str, attribute: str) -> dict[Any, float]:
        return {attrs[attribute]: value for attrs, value in capgw.metric_points(name)}

    outcome = sc.GROUNDWATCH_SERVE_OUTCOME
    assert points(sc.METRIC_SERVE_SPANS, outcome) == health["spans"] != {}
    assert points(sc.METRIC_SERVE_TRACES, outcome) == health["traces"] != {}
    requests = points(sc.METRIC_SERVE_REQUESTS, sc.HTTP_RESPONSE_STATUS_CODE)
    assert requests == {200: 1, 400: 1}
    assert [v for _, v in capgw.metric_points(sc.METRIC_SERVE_PENDING)] == [0]
