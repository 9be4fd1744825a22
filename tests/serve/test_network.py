"""``groundwatch serve`` on a network: TLS and bearer tokens on OTLP/HTTP and OTLP/gRPC.

A real serve process with certificates the test makes (``openssl``) and a token file; the
OpenTelemetry SDK's own OTLP exporters send to it with ``certificate_file`` / channel
credentials and the ``authorization`` header. serve's telemetry goes to an in-process OTLP
sink, so that the evaluation spans and the request counts it exports can be read, and the
token looked for in every byte serve wrote."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from groundwatch.serve._grpc import LOGS_SERVICE, TRACE_SERVICE
from groundwatch.telemetry import semconv as sc

from ..tlscerts import Pki, make_pki
from .otlp import openinference_trace, protobuf, recorded
from .test_cli import otlp_sink  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOKEN = "gw-test-token-7Hq2vX9pL4"
ROTATED = "gw-rotated-token-3Kd8sN1m"
WRONG = "gw-wrong-token-0000"
SECRETS = (TOKEN, ROTATED, WRONG)


@pytest.fixture(autouse=True)
def _exporters_trust_what_they_are_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # requests lets these variables override a session's CA file, and with them set the SDK's
    # OTLP/HTTP exporter ignores its certificate_file (requests' environment precedence).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


class Serve:
    """``groundwatch serve`` in a child process, its telemetry to ``sink``."""

    def __init__(self, args: Sequence[str], sink: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GROUNDWATCH_"))}
        if sink is not None:
            env.update(
                OTEL_EXPORTER_OTLP_ENDPOINT=sink,
                OTEL_BSP_SCHEDULE_DELAY="50",
                OTEL_BLRP_SCHEDULE_DELAY="50",
                OTEL_METRIC_EXPORT_INTERVAL="200",
            )
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "groundwatch", "serve", "--port", "0", "--grpc-port", "0",
                "--executor", "thread", "--sample-rate", "1", "--quiet-period-ms", "100",
                *args,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.first_line = self.proc.stdout.readline()
        pattern = r"listening on (https?)://([^:]+):(\d+)(?: and grpc://[^:]+:(\d+))?"
        found = re.search(pattern, self.first_line)
        if found is None:
            out, err = self.proc.communicate(timeout=30)
            raise AssertionError((self.first_line + out, err))
        self.scheme, host, port, grpc_port = found.groups()
        self.host = "127.0.0.1" if host == "0.0.0.0" else host
        self.url = f"{self.scheme}://{self.host}:{port}"
        self.grpc_target = f"{self.host}:{grpc_port}"
        self.stdout = self.stderr = ""

    def stop(self) -> tuple[str, str]:
        """SIGTERM; the whole stdout (first line included) and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        self.stdout, self.stderr = self.first_line + out, err
        return self.stdout, self.stderr


@pytest.fixture
def serve() -> Iterator[Callable[..., Serve]]:
    started: list[Serve] = []

    def start(*args: str, sink: str | None = None) -> Serve:
        process = Serve(args, sink)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.communicate()


def a_trace() -> Sequence[ReadableSpan]:
    with recorded() as (provider, exported):
        openinference_trace(provider)
        return exported.get_finished_spans()


def trace_id(spans: Sequence[ReadableSpan]) -> int:
    return next(s.context.trace_id for s in spans if s.parent is None)


def http_exporter(
    url: str, pki: Pki, token: str | None, timeout: float = 5, **kwargs: Any
) -> OTLPSpanExporter:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    return OTLPSpanExporter(
        endpoint=f"{url}/v1/traces",
        certificate_file=str(pki.ca),
        headers=headers,
        timeout=timeout,
        **kwargs,
    )


def grpc_exporter(
    target: str, pki: Pki, token: str | None, *, client: bool = False, timeout: float = 5
) -> GrpcSpanExporter:
    key = pki.client_key.read_bytes() if client else None
    chain = pki.client_cert.read_bytes() if client else None
    credentials = grpc.ssl_channel_credentials(pki.ca.read_bytes(), key, chain)
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    return GrpcSpanExporter(
        endpoint=target, credentials=credentials, headers=headers, timeout=timeout
    )


def send(exporter: Any, spans: Sequence[ReadableSpan]) -> SpanExportResult:
    try:
        return exporter.export(spans)  # type: ignore[no-any-return]
    finally:
        exporter.shutdown()


def is_refused(exporter: Any, spans: Sequence[ReadableSpan]) -> bool:
    """The export failed: the exporter says FAILURE or, as the OTLP/HTTP exporter does up to
    SDK 1.39 (the lowest this project allows) for a connection the server drops, raises."""
    try:
        return send(exporter, spans).name == "FAILURE"
    except OSError:  # requests' ConnectionError and SSLError are OSErrors
        return True


def https_get(
    url: str, path: str, pki: Pki, token: str | None = None, *, client: bool = False
) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if client:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(f"{url}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def evaluations(bodies: dict[str, list[bytes]]) -> list[Any]:
    found = []
    for body in list(bodies.get("/v1/traces", [])):
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                found.extend(s for s in ss.spans if s.name == sc.SPAN_EVALUATION)
    return found


def wait_for_evaluation(bodies: dict[str, list[bytes]], trace: int, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for span in evaluations(bodies):
            if int.from_bytes(span.trace_id, "big") == trace:
                return span
        time.sleep(0.05)
    raise AssertionError(f"no evaluation span for trace {trace:032x}")


def request_counts(bodies: dict[str, list[bytes]]) -> dict[tuple[int, str | None], float]:
    """The last exported value of ``groundwatch.serve.requests`` per series."""
    counts: dict[tuple[int, str | None], float] = {}
    for body in list(bodies.get("/v1/metrics", [])):
        request = ExportMetricsServiceRequest.FromString(body)
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name != sc.METRIC_SERVE_REQUESTS:
                        continue
                    for point in metric.sum.data_points:
                        attrs = {kv.key: kv.value for kv in point.attributes}
                        status = int(attrs[sc.HTTP_RESPONSE_STATUS_CODE].int_value)
                        error = (
                            attrs[sc.ERROR_TYPE].string_value if sc.ERROR_TYPE in attrs else None
                        )
                        counts[(status, error)] = point.as_int
    return counts


def raw_grpc(target: str, pki: Pki | None, metadata: tuple[tuple[str, str], ...] = ()) -> Any:
    """One raw Export call on ``target`` (plaintext without ``pki``): its status code."""
    body = protobuf(a_trace())
    if pki is None:
        channel = grpc.insecure_channel(target)
    else:
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(pki.ca.read_bytes()))
    with channel:
        try:
            channel.unary_unary(f"/{TRACE_SERVICE}/Export")(body, timeout=5, metadata=metadata)
            return grpc.StatusCode.OK
        except grpc.RpcError as err:
            return err.code()


def test_tls_and_token_over_http_and_grpc_with_the_sdk_exporters(
    pki: Pki,
    tmp_path: Path,
    serve: Callable[..., Serve],
    otlp_sink: Any,  # noqa: F811
) -> None:
    sink, bodies = otlp_sink
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n\n")
    process = serve(
        "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
        "--auth-token-file", str(tokens), "--verbose", "--capture-content",
        sink=sink,
    )  # fmt: skip
    assert process.scheme == "https" and "(TLS, bearer tokens)" in process.first_line

    # Refused: no header, a wrong token, on either transport; plaintext on either port.
    refused = {
        "http without": a_trace(),
        "http wrong": a_trace(),
        "grpc without": a_trace(),
        "grpc wrong": a_trace(),
    }
    assert is_refused(http_exporter(process.url, pki, None), refused["http without"])
    assert is_refused(http_exporter(process.url, pki, WRONG), refused["http wrong"])
    grpc_without = grpc_exporter(process.grpc_target, pki, None)
    assert is_refused(grpc_without, refused["grpc without"])
    grpc_wrong = grpc_exporter(process.grpc_target, pki, WRONG)
    assert is_refused(grpc_wrong, refused["grpc wrong"])
    plain = OTLPSpanExporter(
        endpoint=process.url.replace("https:", "http:") + "/v1/traces",
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=1,
    )
    plain_trace = a_trace()
    assert is_refused(plain, plain_trace)
    assert raw_grpc(process.grpc_target, None) == grpc.StatusCode.UNAVAILABLE
    assert raw_grpc(process.grpc_target, pki) == grpc.StatusCode.UNAUTHENTICATED
    bearer = (("authorization", f"Bearer {WRONG}"),)
    assert raw_grpc(process.grpc_target, pki, bearer) == grpc.StatusCode.UNAUTHENTICATED
    # A client that does not trust serve's CA refuses it: the certificate is what it claims.
    stranger = OTLPSpanExporter(
        endpoint=f"{process.url}/v1/traces",
        certificate_file=str(pki.other_ca),
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=1,
    )
    assert is_refused(stranger, a_trace())

    # Accepted: the same exporters with serve's CA and the token; both are scored under
    # their root span.
    over_http, over_grpc = a_trace(), a_trace()
    assert send(http_exporter(process.url, pki, TOKEN), over_http).name == "SUCCESS"
    assert send(grpc_exporter(process.grpc_target, pki, TOKEN), over_grpc).name == "SUCCESS"
    for spans in (over_http, over_grpc):
        root = next(s for s in spans if s.parent is None)
        evaluation = wait_for_evaluation(bodies, root.context.trace_id)
        assert int.from_bytes(evaluation.parent_span_id, "big") == root.context.span_id

    # Never scored: the refused traces reached no evaluation, though the accepted ones, sent
    # after them, did.
    scored = {int.from_bytes(s.trace_id, "big") for s in evaluations(bodies)}
    assert not scored & {trace_id(t) for t in (*refused.values(), plain_trace)}

    # Counted by reason, in /health (with the token only) and in the exported metric.
    assert https_get(process.url, "/health", pki)[0] == 401
    assert https_get(process.url, "/health", pki, WRONG)[0] == 401
    _, body = https_get(process.url, "/health", pki, TOKEN)
    health = json.loads(body)
    # Six refusals: the four exporters and the two raw gRPC calls with TLS.
    assert health["unauthenticated"] == {"missing_token": 3, "invalid_token": 3}, health
    assert health["requests"] == {"401": 6, "200": 2}, health
    # The probes answer without a token: a kubelet has none.
    assert https_get(process.url, "/livez", pki)[0] == 200
    assert https_get(process.url, "/readyz", pki)[0] == 200
    deadline = time.monotonic() + 10
    want = {(401, "missing_token"): 3, (401, "invalid_token"): 3, (200, None): 2}
    while request_counts(bodies) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    assert request_counts(bodies) == want

    # The token is in nothing serve wrote: stdout, stderr, the spans, events and metrics.
    stdout, stderr = process.stop()
    assert "scored" in stdout  # --verbose printed the evaluations
    exported = b"".join(b for path in bodies for b in bodies[path])
    assert exported
    for secret in SECRETS:
        assert secret not in stdout and secret not in stderr
        assert secret.encode() not in exported


def test_mutual_tls_needs_a_client_certificate_signed_by_the_client_ca(
    pki: Pki, serve: Callable[..., Serve]
) -> None:
    process = serve(
        "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
        "--tls-client-ca", str(pki.ca),
    )  # fmt: skip
    assert "(mutual TLS)" in process.first_line
    # Over HTTP the handshake lets a client without a certificate in, for the kubelet's
    # probes; every other request it makes is refused, counted, and not scored.
    without = http_exporter(process.url, pki, None, timeout=1)
    assert is_refused(without, a_trace())
    assert https_get(process.url, "/readyz", pki)[0] == 200
    assert https_get(process.url, "/livez", pki)[0] == 200
    assert https_get(process.url, "/health", pki)[0] == 401
    with_cert = http_exporter(
        process.url,
        pki,
        None,
        client_certificate_file=str(pki.client_cert),
        client_key_file=str(pki.client_key),
    )
    assert send(with_cert, a_trace()).name == "SUCCESS"
    # OTLP/gRPC has no probes: its handshake requires the certificate.
    without_grpc = grpc_exporter(process.grpc_target, pki, None, timeout=1)
    assert is_refused(without_grpc, a_trace())
    with_cert_grpc = grpc_exporter(process.grpc_target, pki, None, client=True)
    assert send(with_cert_grpc, a_trace()).name == "SUCCESS"
    health = json.loads(https_get(process.url, "/health", pki, client=True)[1])
    assert health["unauthenticated"] == {"missing_client_certificate": 1}, health
    assert health["requests"] == {"401": 1, "200": 2}, health
    process.stop()


def test_sighup_rereads_the_token_file_and_a_bad_file_keeps_the_tokens(
    pki: Pki, tmp_path: Path, serve: Callable[..., Serve]
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    process = serve(
        "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
        "--auth-token-file", str(tokens), "--grpc-port", "off",
    )  # fmt: skip

    def accepted(token: str) -> bool:
        return https_get(process.url, "/health", pki, token)[0] == 200

    assert accepted(TOKEN) and not accepted(ROTATED)
    # Rotation: both tokens for a while, then only the new one.
    tokens.write_text(f"{TOKEN}\n{ROTATED}\n")
    process.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while not accepted(ROTATED) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert accepted(ROTATED) and accepted(TOKEN)
    tokens.write_text(f"{ROTATED}\n")
    process.proc.send_signal(signal.SIGHUP)
    while accepted(TOKEN) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not accepted(TOKEN) and accepted(ROTATED)
    # A file emptied by mistake keeps the tokens read before, and says so.
    tokens.write_text("\n")
    process.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert accepted(ROTATED)
    _, stderr = process.stop()
    assert "holds no token" in stderr and "keeping the 1 tokens read before" in stderr
    for secret in SECRETS:
        assert secret not in stderr


def test_logs_metrics_and_health_need_the_token_too(
    pki: Pki, tmp_path: Path, serve: Callable[..., Serve]
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    process = serve("--auth-token-file", str(tokens))
    url = process.url
    assert url.startswith("http://")  # a token without TLS is allowed, on loopback
    for path in ("/v1/logs", "/v1/metrics", "/v1/traces"):
        request = urllib.request.Request(
            f"{url}{path}", data=b"", headers={"Content-Type": "application/x-protobuf"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401, path
        assert refused.value.headers["WWW-Authenticate"].startswith("Bearer")
    with grpc.insecure_channel(process.grpc_target) as channel, pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(f"/{LOGS_SERVICE}/Export")(b"", timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    _, stderr = process.stop()
    # On loopback nothing is exposed: no warning.
    assert "--insecure" not in stderr


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            lambda p, t: ["--tls-cert", str(t / "absent.pem"), "--tls-key", str(p.server_key)],
            "--tls-cert",
        ),
        (
            lambda p, t: ["--tls-cert", str(p.server_cert), "--tls-key", str(p.other_key)],
            "--tls-key",
        ),
        (lambda p, t: ["--auth-token-file", str(t)], "--auth-token-file"),  # a folder
    ],
    ids=["missing", "mismatched", "unreadable"],
)
def test_a_bad_tls_or_token_file_is_exit_2_naming_the_option_before_listening(
    pki: Pki, tmp_path: Path, options: Callable[[Pki, Path], list[str]], named: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GROUNDWATCH_"))}
    done = subprocess.run(
        [sys.executable, "-m", "groundwatch", "serve", "--port", "0", *options(pki, tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("groundwatch serve: error: "), lines
    assert named in lines[0]
    assert "listening" not in done.stdout


def test_a_non_loopback_plaintext_bind_warns_once_unless_insecure(
    serve: Callable[..., Serve],
) -> None:
    _, stderr = serve("--host", "0.0.0.0", "--grpc-port", "off").stop()
    warnings = [line for line in stderr.splitlines() if "--insecure" in line]
    assert len(warnings) == 1, stderr
    assert "--tls-cert" in warnings[0] and "--auth-token-file" in warnings[0]
    _, stderr = serve("--host", "0.0.0.0", "--grpc-port", "off", "--insecure").stop()
    assert "--insecure" not in stderr and "--tls-cert" not in stderr
