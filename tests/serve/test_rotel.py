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

    def start(upstream: str, protocol: str = "http", *extra: str) -> str:
        http_port, grpc_port = free_port(), free_port()
        log = open(tmp_path / f"rotel{len(procs)}.log", "wb")  # noqa: SIM115 - closed with the process
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
                "--pid-file", str(tmp_path / f"rotel{len(procs)}.pid"),
                *extra,
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


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_through_rotel_over_tls_with_a_bearer_token(
    capgw: GroundwatchTelemetry,
    make_receiver: Callable[..., RunningReceiver],
    rotel: Callable[..., str],
    protocol: str,
    tmp_path: Path,
) -> None:
    """The Collector side of docs/serve.md's "On a network": the exporter speaks TLS to serve
    and sends the token as a header; a Collector without the header is refused, unscored."""
    from groundwatch.serve._auth import TokenFile
    from groundwatch.serve._tls import load

    from ..tlscerts import make_pki
    from .otlp import openinference_trace

    pki = make_pki(tmp_path / "pki")
    tokens = tmp_path / "tokens"
    tokens.write_text("collector-token-Vb71\n")
    receiver = make_receiver(
        sampler=gw.RatioSampler(1.0),
        grpc=protocol == "grpc",
        tls=load(str(pki.server_cert), str(pki.server_key), None),
        auth=TokenFile(str(tokens)),
    )
    assert receiver.url.startswith("https://")
    upstream = receiver.url if protocol == "http" else f"https://{receiver.grpc_target}"
    # rotel 0.0.1a15 refuses --otlp-exporter-tls-ca-file without a client certificate
    # ("Either both or neither of cert and key must be provided", even given both), so it
    # does not check serve's certificate here; the SDK exporters do (test_network.py).
    trust = ("--otlp-exporter-tls-skip-verify",)
    header = ("--otlp-exporter-custom-headers", "authorization=Bearer collector-token-Vb71")
    # First a Collector that trusts serve but sends no token: refused, counted, not scored.
    refused = app_provider(rotel(upstream, protocol, *trust), service="no-token")
    openinference_trace(refused.provider)
    deadline = time.monotonic() + 20
    while not receiver.service.health()["unauthenticated"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert receiver.service.health()["unauthenticated"].get("missing_token", 0) >= 1
    # Then one with the header: scored under the app's root span (checked by the helper).
    lcel_scored_through(capgw, app_provider(rotel(upstream, protocol, *trust, *header)))
    time.sleep(0.5)
    assert len(capgw.spans()) == 1  # the refused trace never reached the monitor
