"""``groundwatch serve`` as a process: its help documents every option; SIGTERM scores what
is pending and the output leaves through the standard OTLP exporter variables (caught here by
an in-process OTLP receiver)."""

from __future__ import annotations

import gzip
import http.server
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from groundwatch.cli import build_parser
from groundwatch.telemetry import semconv as sc

from .otlp import get, openinference_trace, protobuf, recorded
from .test_grpc import export


def test_help_documents_every_option() -> None:
    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    text = serve.format_help()
    for action in serve._actions:
        for flag in action.option_strings:
            assert flag in text
        if action.option_strings and action.dest != "help":
            assert action.help, f"{action.option_strings} has no help"
    for variable in (
        "GROUNDWATCH_SERVE_PORT",
        "GROUNDWATCH_SERVE_GRPC_PORT",
        "GROUNDWATCH_SERVE_QUIET_PERIOD_MILLIS",
        "GROUNDWATCH_SERVE_MAX_PENDING_TRACES",
        "GROUNDWATCH_SERVE_MAX_SPANS_PER_TRACE",
        "GROUNDWATCH_SERVE_MAX_BODY_BYTES",
        "GROUNDWATCH_SAMPLE_RATE",
    ):
        assert variable in text


def test_grpc_port_from_flag_or_environment_and_off() -> None:
    parse = build_parser().parse_args
    assert parse(["serve"]).grpc_port == 4327
    assert parse(["serve", "--grpc-port", "off"]).grpc_port is None
    assert parse(["serve", "--grpc-port", "0"]).grpc_port == 0
    with pytest.raises(SystemExit):
        parse(["serve", "--grpc-port", "70000"])


def test_grpc_port_environment_off_and_a_bad_value_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from groundwatch._shared.config import ConfigWarning

    monkeypatch.setenv("GROUNDWATCH_SERVE_GRPC_PORT", "OFF")
    assert build_parser().parse_args(["serve"]).grpc_port is None
    monkeypatch.setenv("GROUNDWATCH_SERVE_GRPC_PORT", "grpc")
    with pytest.warns(ConfigWarning, match="GROUNDWATCH_SERVE_GRPC_PORT"):
        assert build_parser().parse_args(["serve"]).grpc_port == 4327


def test_environment_sets_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_SERVE_QUIET_PERIOD_MILLIS", "2500")
    monkeypatch.setenv("GROUNDWATCH_SERVE_INTERACTIONS", "pair")
    monkeypatch.setenv("GROUNDWATCH_SERVE_MAX_PENDING_TRACES", "not a number")
    from groundwatch._shared.config import ConfigWarning

    with pytest.warns(ConfigWarning, match="GROUNDWATCH_SERVE_MAX_PENDING_TRACES"):
        args = build_parser().parse_args(["serve"])
    assert args.quiet_period_ms == 2500
    assert args.interactions == "pair"
    assert args.max_pending_traces == 10_000  # a bad value warns and falls back
    assert build_parser().parse_args(["serve", "--quiet-period-ms", "7"]).quiet_period_ms == 7


class _Sink(http.server.BaseHTTPRequestHandler):
    bodies: dict[str, list[bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def otlp_sink() -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    bodies: dict[str, list[bytes]] = {}
    handler = type("Sink", (_Sink,), {"bodies": bodies})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    server.shutdown()
    server.server_close()


def test_sigterm_scores_the_pending_trace_and_exports_over_otlp(
    otlp_sink: tuple[str, dict[str, list[bytes]]],
) -> None:
    sink, bodies = otlp_sink
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": sink,
        "OTEL_SERVICE_NAME": "groundwatch-serve",
        "GROUNDWATCH_SAMPLE_RATE": "1",
    }
    env.pop("GROUNDWATCH_RAISE_INTERNAL_ERRORS", None)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "groundwatch", "serve",
            "--host", "127.0.0.1", "--port", "0", "--grpc-port", "0",
            "--quiet-period-ms", "600000",  # only the shutdown completes the trace
            "--executor", "thread",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"listening on (http://\S+) and grpc://(\S+)", line)
        assert found, (line, proc.stderr.read() if proc.stderr else "")
        url, grpc_target = found.groups()
        assert get(url, "/health").status == 200
        # One probe convention with groundwatch worker: liveness and readiness apart.
        assert get(url, "/livez").status == 200 and get(url, "/readyz").status == 200
        with recorded() as (provider, exported):
            openinference_trace(provider)
            spans = exported.get_finished_spans()
        # The trace goes in over OTLP/gRPC, the health check over HTTP: one service behind both.
        assert export(grpc_target, protobuf(spans)).code.name == "OK"
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
        assert proc.stderr is not None
        stderr = proc.stderr.read()
        # Each line names its command once ("groundwatch serve: stopped", never doubled).
        assert re.search(r"groundwatch serve: stopped \(spans", stderr), stderr
        assert "groundwatch groundwatch" not in stderr
        assert "telemetry goes over OTLP to " + sink in line + stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    root = next(s for s in spans if s.parent is None)
    exported_spans = []
    for body in bodies.get("/v1/traces", []):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                exported_spans.extend(ss.spans)
    (evaluation,) = [s for s in exported_spans if s.name == sc.SPAN_EVALUATION]
    assert int.from_bytes(evaluation.trace_id, "big") == root.context.trace_id
    assert int.from_bytes(evaluation.parent_span_id, "big") == root.context.span_id
    attrs = {kv.key: kv.value for kv in evaluation.attributes}
    assert attrs[sc.GROUNDWATCH_LABEL].string_value == "grounded"
    # The events and the metrics went out through the same OTLP configuration.
    assert bodies.get("/v1/logs") and bodies.get("/v1/metrics")


# The ports an OpenTelemetry Collector (and rotel) listens on by default: OTLP gRPC and HTTP,
# its own metrics, the Prometheus exporter, health_check, zpages, pprof, Zipkin, Jaeger.
COLLECTOR_PORTS = {4317, 4318, 8888, 8889, 13133, 55679, 1777, 9411, 14250, 14268}


def test_default_port_does_not_clash_with_a_collector_on_the_same_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pathlib import Path

    monkeypatch.delenv("GROUNDWATCH_SERVE_PORT", raising=False)
    monkeypatch.delenv("GROUNDWATCH_SERVE_GRPC_PORT", raising=False)
    args = build_parser().parse_args(["serve"])
    port, grpc_port = args.port, args.grpc_port
    assert port not in COLLECTOR_PORTS and grpc_port not in COLLECTOR_PORTS
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    assert f"default: {port}" in serve.format_help()
    assert f"default: {grpc_port}" in serve.format_help()
    doc = (Path(__file__).parents[2] / "docs" / "serve.md").read_text()
    assert f"| `--port` | `GROUNDWATCH_SERVE_PORT` | `{port}` |" in doc
    assert f"| `--grpc-port` | `GROUNDWATCH_SERVE_GRPC_PORT` | `{grpc_port}` |" in doc
    # Every example sends to serve on its default port, never on the Collector's.
    assert "groundwatch-serve:4318" not in doc and f"groundwatch-serve:{port}" in doc


def test_listens_on_loopback_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    monkeypatch.delenv("GROUNDWATCH_SERVE_HOST", raising=False)
    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"
    doc = (Path(__file__).parents[2] / "docs" / "serve.md").read_text()
    assert "| `--host` | `GROUNDWATCH_SERVE_HOST` | `127.0.0.1` |" in doc
    assert "--host 0.0.0.0" in doc  # what a container needs, said where the flag is


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-m", "groundwatch", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_busy_port_is_one_line_naming_the_option_and_exit_1(busy_port: int) -> None:
    common = ("--grpc-port", "off", "--executor", "thread")
    done = _serve("serve", "--port", str(busy_port), *common)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(
        f"groundwatch serve: error: cannot listen on 127.0.0.1:{busy_port} (--port)"
    ), lines[0]
    assert "listening" not in done.stdout
    done = _serve("serve", "--port", "0", "--grpc-port", str(busy_port), "--executor", "thread")
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().startswith(
        f"groundwatch serve: error: cannot listen on 127.0.0.1:{busy_port} (--grpc-port)"
    ), done.stderr
    done = _serve("--debug", "serve", "--port", str(busy_port), *common)
    assert done.returncode == 1 and "Traceback" in done.stderr, done.stderr


def test_a_bad_option_value_is_exit_2_in_one_line() -> None:
    done = _serve("serve", "--judge", "openai", "--grpc-port", "off")  # no --model
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("groundwatch serve: error: --judge openai needs --model"), lines


def test_help_says_each_default_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each option's default is said once, beside the variable it comes from; none is said for
    # options without one (no "default: None", "default: False" or "default: []").
    monkeypatch.setenv("GROUNDWATCH_SERVE_QUIET_PERIOD_MILLIS", "2500")
    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    text = " ".join(serve.format_help().split())
    for noise in ("default: None", "default: False", "default: []", "(default: True)"):
        assert noise not in text
    for action in serve._actions:
        if not action.option_strings or action.help is None:
            continue
        said = action.help.count("default")
        assert said <= 1, f"{action.option_strings}: {action.help}"
    # The variable's value is what --help shows as the default, once.
    assert "(GROUNDWATCH_SERVE_QUIET_PERIOD_MILLIS, default: 2500)" in text
    assert text.count("2500") == 1
    assert "(GROUNDWATCH_SERVE_PORT, default: 4328)" in text
    assert "default 10000) (default" not in text
