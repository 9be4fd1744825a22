"""Distributed scoring over a Redis that speaks TLS only and admits one ACL user: the app's
``RedisQueue`` and a ``groundwatch worker`` process reach it with a ``rediss://`` URL (the
test's CA in ``ssl_ca_certs``, the user and password in the URL); what Redis refuses for good
(credentials, an untrusted certificate) is a one-line configuration error, the password in
no output; the worker's health port tells its state to a loopback peer only."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from ..extras import require_system_tool
from ..tlscerts import Pki, make_pki
from .conftest import ROOT, RedisServer, TlsRedisServer, WorkerProcess, _free_port, wait_for

redis = pytest.importorskip("redis")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_redis(tmp_path: Path, pki: Pki) -> Iterator[TlsRedisServer]:
    binary = require_system_tool("redis-server", package="redis-server")
    server = TlsRedisServer(binary, tmp_path, pki)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for name in list(env):
        if name.startswith(("OTEL_", "GROUNDWATCH_")):
            env.pop(name)
    return env


def test_rediss_and_an_acl_user_carry_records_from_the_app_to_a_worker(
    capgw: GroundwatchTelemetry, tls_redis: TlsRedisServer, tmp_path: Path
) -> None:
    # The server admits nobody else: not without the user, not in plaintext.
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(tls_redis.url_for(None, None), socket_timeout=5).ping()
    plaintext = f"redis://{tls_redis.USER}:{tls_redis.PASSWORD}@127.0.0.1:{tls_redis.port}/0"
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(plaintext, socket_timeout=5).ping()
    # The ACL user reaches groundwatch's keys only.
    with pytest.raises(redis.exceptions.NoPermissionError):
        redis.Redis.from_url(tls_redis.url, socket_timeout=5).get("other:key")

    # The worker takes the URL from GROUNDWATCH_REDIS_URL: the password is not on its
    # command line, so not in ps.
    out = tmp_path / "worker"
    worker = WorkerProcess(
        out,
        ["--group", "scorers", "--executor", "thread", "--verbose"],
        {**_env(), "GROUNDWATCH_REDIS_URL": tls_redis.url},
    )
    try:
        cmdline = Path(f"/proc/{worker.proc.pid}/cmdline").read_bytes()
        assert tls_redis.PASSWORD.encode() not in cmdline

        # The app's user may only XADD and XLEN: all a producer needs.
        producer = tls_redis.url_for(tls_redis.PRODUCER, tls_redis.PASSWORD)
        monitor = capgw.monitor(
            sampler=gw.RatioSampler(1.0), queue=gw.RedisQueue(producer, timeout_millis=2000)
        )
        for i in range(3):
            monitor.record(
                question=f"How long is the warranty, case {i}?",
                answer="Every appliance carries a two-year warranty.",
                contexts=["Every appliance carries a two-year warranty."],
            )
        assert monitor.shutdown(timeout_millis=10_000)
        assert capgw.metric_total(sc.METRIC_DROPPED) == 0

        def evaluations() -> list[dict[str, Any]]:
            assert worker.proc.poll() is None, out.with_suffix(".log").read_text()
            return [s for s in worker.spans() if s["name"] == sc.SPAN_EVALUATION]

        wait_for(lambda: len(evaluations()) == 3, 60, "three evaluations")
        assert {s["attributes"][sc.GROUNDWATCH_LABEL] for s in evaluations()} == {"grounded"}
        worker.terminate()
    finally:
        if worker.proc.poll() is None:
            worker.kill()
    log = out.with_suffix(".log").read_text()
    assert "consuming 'groundwatch:records'" in log
    assert tls_redis.PASSWORD not in log


def _worker(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groundwatch", "worker", "--redis", url, "--group", "g"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_refused_credentials_and_an_untrusted_certificate_are_exit_2_in_one_line(
    tls_redis: TlsRedisServer,
) -> None:
    wrong = "wrong-pw-Z9"
    cases = [
        (tls_redis.url_for(tls_redis.USER, wrong), "refused the credentials"),
        (tls_redis.url_for(None, None), "refused the credentials"),
        (tls_redis.url_for(tls_redis.USER, tls_redis.PASSWORD, ca=False), "not trusted"),
        (tls_redis.url + "&no_such_option=1", "no_such_option"),
    ]
    for url, said in cases:
        done = _worker(url)
        assert done.returncode == 2, done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert lines[0].startswith("groundwatch worker: error: "), lines
        assert said in lines[0] and "--redis" in lines[0], lines[0]
        assert wrong not in done.stderr and tls_redis.PASSWORD not in done.stderr
        assert "consuming" not in done.stdout


def _non_loopback_address() -> str:
    """An address of this machine that is not loopback (skip when there is none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for UDP connect
            address = str(probe.getsockname()[0])
        except OSError:
            address = "0.0.0.0"
    if address.startswith(("127.", "0.")):
        pytest.skip("no non-loopback IPv4 address on this machine")
    return address


def _get(url: str) -> int:
    """The status of a GET (0: nothing listens yet); a 200 from /health is JSON."""
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            body = reply.read()
            if url.endswith("/health"):
                assert "ready" in json.loads(body)
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def test_the_health_port_tells_its_state_to_loopback_only(
    redis_server: RedisServer, workers: Any
) -> None:
    address = _non_loopback_address()
    port = _free_port()
    w = workers(redis_server.url, "--health-host", "0.0.0.0", "--health-port", str(port))
    deadline = time.monotonic() + 60
    while _get(f"http://127.0.0.1:{port}/readyz") != 200:
        assert time.monotonic() < deadline and w.proc.poll() is None, "never ready"
        time.sleep(0.1)
    # The probes answer anyone (a kubelet probes the pod's address, without credentials) ...
    assert _get(f"http://{address}:{port}/livez") == 200
    assert _get(f"http://{address}:{port}/readyz") == 200
    # ... the state only a peer on the pod itself (kubectl exec, port-forward).
    assert _get(f"http://{address}:{port}/health") == 403
    assert _get(f"http://127.0.0.1:{port}/health") == 200
    w.terminate()
