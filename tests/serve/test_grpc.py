"""The OTLP/gRPC contract: the SDK's gRPC exporter reaches the same scoring as OTLP/HTTP, and
every refusal carries the status the OTLP specification gives an exporter to act on (retry
after RetryInfo's delay, or give up)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

import groundwatch as gw
from groundwatch.serve import Receiver
from groundwatch.serve._grpc import LOGS_SERVICE, METRICS_SERVICE, TRACE_SERVICE
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .conftest import RunningReceiver, wait_for_evaluations
from .otlp import get, openinference_trace, protobuf, recorded
from .pipelines import app_provider, lcel_scored_through
from .test_http import BlockingJudge, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class Answer:
    """What one raw ``Export`` call got back."""

    def __init__(self, code: grpc.StatusCode, body: bytes, message: str, trailing: Any) -> None:
        self.code, self.body, self.message = code, body, message
        self.trailing = dict(trailing or ())

    def retry_delay_s(self) -> int | None:
        """The RetryInfo delay in the status details, if there is one."""
        raw = self.trailing.get("grpc-status-details-bin")
        if raw is None:
            return None
        status = Status.FromString(raw)
        assert status.code == self.code.value[0]
        for detail in status.details:
            info = RetryInfo()
            if detail.Unpack(info):
                return int(info.retry_delay.seconds)
        return None


def export(target: str, body: bytes, service: str = TRACE_SERVICE) -> Answer:
    """One unary ``Export`` call with a raw protobuf body, as any OTLP/gRPC exporter makes."""
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(f"/{service}/Export")
        try:
            return Answer(grpc.StatusCode.OK, call(body, timeout=10), "", ())
        except grpc.RpcError as err:
            return Answer(err.code(), b"", err.details() or "", err.trailing_metadata())


def trace_body() -> bytes:
    with recorded() as (provider, exported):
        openinference_trace(provider)
        return protobuf(exported.get_finished_spans())


def test_sdk_grpc_exporter_langchain_chain_is_scored_under_its_root(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0), grpc=True)
    app = app_provider(receiver.grpc_target, grpc=True, gzip=True)
    lcel_scored_through(capgw, app)
    # Each gRPC export is counted as a request, like an HTTP one.
    health = json.loads(get(receiver.url, "/health").body)
    assert set(health["requests"]) == {"200"} and health["requests"]["200"] >= 1
    app.provider.shutdown()


def test_undecodable_message_is_invalid_argument_and_bad_spans_are_a_partial_success(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0), grpc=True)
    body = trace_body()
    bad = export(receiver.grpc_target, body[: len(body) // 2])
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT, (bad.code, bad.message)
    assert bad.retry_delay_s() is None  # final: the same bytes fail again
    request = ExportTraceServiceRequest.FromString(body)
    request.resource_spans[0].scope_spans[0].spans.add().name = "no ids"
    good = export(receiver.grpc_target, request.SerializeToString())
    assert good.code == grpc.StatusCode.OK
    partial = ExportTraceServiceResponse.FromString(good.body).partial_success
    assert partial.rejected_spans == 1 and "trace_id" in partial.error_message
    # serve stayed up, and the valid spans of the same request are scored.
    (span,) = wait_for_evaluations(capgw, 1)
    assert span.attributes[sc.GROUNDWATCH_LABEL] == "grounded"


def test_backpressure_is_resource_exhausted_with_retry_info_then_recovers(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    judge = BlockingJudge()
    receiver = make_receiver(
        judge=judge, sampler=gw.RatioSampler(1.0), max_queue_size=4, quiet_s=0.05, grpc=True
    )
    answers = []
    for _ in range(12):
        answers.append(export(receiver.grpc_target, trace_body()))
        wait_for(lambda: receiver.on_loop(lambda: len(receiver.service.assembler)) == 0)
    refused = [a for a in answers if a.code != grpc.StatusCode.OK]
    assert refused, [a.code for a in answers]
    assert {a.code for a in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert all((a.retry_delay_s() or 0) >= 1 for a in refused)
    judge.release.set()
    wait_for(lambda: receiver.service.monitor.stats.queue_size() == 0)
    assert export(receiver.grpc_target, trace_body()).code == grpc.StatusCode.OK


def test_message_over_the_cap_is_final_resource_exhausted(
    make_receiver: Callable[..., RunningReceiver],
) -> None:
    receiver = make_receiver(max_body_bytes=2_000, grpc=True)
    with recorded() as (provider, exported):
        openinference_trace(provider, documents=["x" * 5_000])
        body = protobuf(exported.get_finished_spans())
    answer = export(receiver.grpc_target, body)
    assert answer.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert answer.retry_delay_s() is None  # no RetryInfo: exporters drop it, not retry


def test_stopping_is_unavailable_with_retry_info(
    make_receiver: Callable[..., RunningReceiver],
) -> None:
    receiver = make_receiver(grpc=True)
    receiver.service.stopping = True
    answer = export(receiver.grpc_target, trace_body())
    assert answer.code == grpc.StatusCode.UNAVAILABLE
    assert answer.retry_delay_s() == 1


def test_metrics_are_unimplemented_with_the_reason_and_logs_are_taken(
    make_receiver: Callable[..., RunningReceiver],
) -> None:
    receiver = make_receiver(grpc=True)
    metrics = export(receiver.grpc_target, b"", METRICS_SERVICE)
    assert metrics.code == grpc.StatusCode.UNIMPLEMENTED
    assert "traces and logs only" in metrics.message
    logs = export(
        receiver.grpc_target, ExportLogsServiceRequest().SerializeToString(), LOGS_SERVICE
    )
    assert logs.code == grpc.StatusCode.OK


def test_grpc_is_off_unless_asked_for(make_receiver: Callable[..., RunningReceiver]) -> None:
    receiver = make_receiver()
    assert receiver.receiver.grpc_port is None


def test_a_taken_grpc_port_fails_the_start_and_frees_the_http_port(
    make_receiver: Callable[..., RunningReceiver],
) -> None:
    taken = make_receiver(grpc=True)
    port = int(taken.grpc_target.rsplit(":", 1)[1])
    service = taken.service
    second = Receiver(service, "127.0.0.1", 0, poll_s=0.1, grpc_port=port)
    with pytest.raises(OSError, match="OTLP/gRPC"):
        taken.call(second.start())
    # The HTTP site it had opened is closed again: nothing of the failed start keeps running.
    assert second._runner is not None and not second._runner.sites
    assert export(taken.grpc_target, trace_body()).code == grpc.StatusCode.OK
