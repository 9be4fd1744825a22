"""End to end through a real Collector: the app's OTLP/HTTP exporter sends to ``rotel`` (the
PyPI wheel ships the collector binary), rotel forwards to ``groundwatch serve`` over OTLP/HTTP
or OTLP/gRPC (rotel's default exporter protocol), serve scores and emits; the evaluation span
lands in the app's trace, under its root span."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .conftest import RunningReceiver, wait_for_evaluations
from .pipelines import (
    app_provider,
    lcel_scored_through,
    llamaindex_engine,
    llamaindex_instrumented,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def rotel_binary() -> Path:
    try:
        import rotel
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("rotel is missing in CI (requirements-dev.txt installs it)")
        pytest.skip("needs the rotel collector: pip install rotel")
    binary = Path(rotel.__file__).with_name("rotel-agent")
    assert binary.is_file(), f"the rotel wheel ships no collector binary at {binary}"
    return binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


@pytest.fixture
def rotel(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start rotel forwarding traces to a given OTLP endpoint (``protocol``: rotel's exporter
    protocol, ``http`` or ``grpc``); returns its own OTLP/HTTP endpoint."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(upstream: str, protocol: str = "http") -> str:
        http_port, grpc_port = free_port(), free_port()
        log = open(tmp_path / "rotel.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [
                str(rotel_binary()),
                "start",
                "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
                "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}",
                "--exporter", "otlp",
                "--otlp-exporter-protocol", protocol,
                "--otlp-exporter-endpoint", upstream,
                "--batch-timeout", "100ms",
                "--pid-file", str(tmp_path / "rotel.pid"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        procs.append(proc)
        wait_port(http_port)
        return f"http://127.0.0.1:{http_port}"

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_langchain_chain_through_rotel(
    capgw: GroundwatchTelemetry,
    make_receiver: Callable[..., RunningReceiver],
    rotel: Callable[..., str],
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    collector = rotel(receiver.url)
    # serve's own output goes to the same Collector, which sends it back to serve: the loop
    # a deployment that fans traces out to serve and a backend has.
    capgw.tracer_provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{collector}/v1/traces"))
    )
    app = app_provider(collector)
    lcel_scored_through(capgw, app)
    # Our span came back through the Collector and was not ingested again.
    deadline = time.monotonic() + 10
    while receiver.service.health()["spans"].get("own", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert receiver.service.health()["spans"]["own"] == 1
    time.sleep(0.5)
    assert len(capgw.spans()) == 1


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_llamaindex_query_engine_through_rotel(
    capgw: GroundwatchTelemetry,
    make_receiver: Callable[..., RunningReceiver],
    rotel: Callable[..., str],
    protocol: str,
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0), grpc=protocol == "grpc")
    upstream = receiver.url if protocol == "http" else f"http://{receiver.grpc_target}"
    collector = rotel(upstream, protocol)
    app = app_provider(collector, gzip=True)
    engine = llamaindex_engine()
    question = "How high is Mount Fuji?"
    with llamaindex_instrumented(app.provider):
        answer = str(engine.query(question))
    (span,) = wait_for_evaluations(capgw, 1)
    root = app.root()
    assert span.context.trace_id == root.context.trace_id  # type: ignore[attr-defined]
    assert span.parent.span_id == root.context.span_id  # type: ignore[attr-defined]
    ((record, evaluation),) = capgw.results()
    assert record.question == question
    assert record.answer == answer
    assert evaluation.label == "grounded"
    assert span.attributes[sc.GROUNDWATCH_LABEL] == "grounded"  # type: ignore[attr-defined]
