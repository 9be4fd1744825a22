"""Distributed scoring tests: a real ``redis-server`` per test, started on a free loopback
port with persistence off and stopped by its PID (benchmarks/_redis.py, which the benchmarks
share); worker processes run the real ``groundwatch worker`` command (``worker_main.py``) with
the OpenTelemetry SDK's exporters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The tests import these from here; the benchmarks share them.
from benchmarks._redis import REDIS_SERVER, RedisServer  # noqa: F401
from benchmarks._redis import free_port as _free_port  # noqa: F401
from groundwatch.testing import capgw  # noqa: F401

from ..extras import require_system_tool
from ..runtime.conftest import _raise_internal_errors  # noqa: F401

HARNESS = Path(__file__).with_name("worker_main.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server; skipped when the binary is missing (fails in CI, which installs
    it with ``.ci/run``)."""
    binary = require_system_tool("redis-server", package="redis-server")
    pytest.importorskip("redis")
    server = RedisServer(binary, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class TlsRedisServer(RedisServer):
    """A redis-server that speaks TLS only (``--port 0``, the test's certificates) and knows
    two ACL users limited to groundwatch's keys, ``scorer`` for workers and ``producer`` (XADD
    and XLEN only) for the app's ``RedisQueue``; the default user is off, so
    nothing gets in without the user's password. :attr:`url` is the user's ``rediss://`` URL
    with the CA in ``ssl_ca_certs``."""

    USER = "scorer"
    PRODUCER = "producer"
    PASSWORD = "pw-Jq83-never-printed"

    def __init__(self, binary: str, workdir: Path, pki: Any) -> None:
        super().__init__(binary, workdir)
        self.pki = pki
        self.url = self.url_for(self.USER, self.PASSWORD)

    def url_for(self, user: str | None, password: str | None, ca: bool = True) -> str:
        credentials = f"{user}:{password}@" if user is not None else ""
        query = f"?ssl_ca_certs={self.pki.ca}" if ca else ""
        return f"rediss://{credentials}127.0.0.1:{self.port}/0{query}"

    def argv(self) -> list[str]:
        argv = super().argv()
        argv[argv.index("--port") + 1] = "0"  # no plaintext port
        return [
            *argv,
            "--tls-port", str(self.port),
            "--tls-cert-file", str(self.pki.server_cert),
            "--tls-key-file", str(self.pki.server_key),
            "--tls-ca-cert-file", str(self.pki.ca),
            "--tls-auth-clients", "no",
            "--user", "default", "off",
            # The rules docs/distributed.md gives a worker and a producer, on groundwatch's
            # keys only.
            "--user", self.USER, "on", f">{self.PASSWORD}", "~groundwatch:*", "resetchannels",
            "+@all", "-@dangerous",
            "--user", self.PRODUCER, "on", f">{self.PASSWORD}", "~groundwatch:*",
            "resetchannels", "+xadd", "+xlen",
        ]  # fmt: skip


class WorkerProcess:
    """``groundwatch worker`` in a child process; spans stream to ``<out>.spans.jsonl`` (they
    survive ``kill -9``), metrics are written to ``<out>.metrics.json`` on a clean exit."""

    def __init__(self, out: Path, args: list[str], env: dict[str, str]) -> None:
        self.out = out
        self.log = open(out.with_suffix(".log"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(HARNESS), str(out), "worker", *args],
            # The repository first (the harness imports tests.*); an outer PYTHONPATH (a
            # worktree's sources ahead of an editable install elsewhere) after it.
            env={
                **os.environ,
                **env,
                "PYTHONPATH": os.pathsep.join(
                    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
                ),
            },
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def spans(self) -> list[dict[str, Any]]:
        path = self.out.with_suffix(".spans.jsonl")
        if not path.exists():
            return []
        # Complete lines only: the worker may be writing the last one.
        lines = path.read_text().split("\n")[:-1]
        return [json.loads(line) for line in lines if line.strip()]

    def terminate(self, timeout_s: float = 30) -> dict[str, list[list[Any]]]:
        """SIGTERM, wait, and the metrics the worker exported at exit."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout_s)
        self.log.close()
        assert self.proc.returncode == 0, self.out.with_suffix(".log").read_text()[-3000:]
        data: dict[str, list[list[Any]]] = json.loads(
            self.out.with_suffix(".metrics.json").read_text()
        )
        return data

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Any]:
    """Start worker processes: ``workers(redis_url, *extra_args, env={...})``; any still
    running at the end are killed."""
    started: list[WorkerProcess] = []

    def start(url: str, *args: str, env: dict[str, str] | None = None) -> WorkerProcess:
        out = tmp_path / f"worker{len(started)}"
        argv = ["--redis", url, "--group", "scorers", "--executor", "thread", *args]
        w = WorkerProcess(out, argv, env or {})
        started.append(w)
        return w

    yield start
    for w in started:
        if w.proc.poll() is None:
            w.kill()


def metric_sum(metrics: dict[str, list[list[Any]]], name: str, **attributes: str) -> float:
    want = {k.replace("__", "."): v for k, v in attributes.items()}
    return sum(
        value
        for attrs, value in metrics.get(name, [])
        if all(attrs.get(k) == v for k, v in want.items())
    )


def wait_for(condition: Any, timeout_s: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
