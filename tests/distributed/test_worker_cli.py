"""``groundwatch worker`` as a user runs it: the real command in a subprocess (no test harness
providers), against a real ``redis-server``. A mistake ends in one line naming the option and
an exit code (2: usage or configuration, 1: a runtime failure), with the traceback only under
``--debug``; the worker says where its telemetry goes, shows what it scores with
``--verbose``, and answers the health probes on loopback by default."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from groundwatch.cli import build_parser

from ..extras import require_system_tool
from .conftest import ROOT, RedisServer, _free_port

pytest.importorskip("redis")


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for name in list(env):
        if name.startswith("OTEL_") or name == "GROUNDWATCH_RAISE_INTERNAL_ERRORS":
            env.pop(name)
    return env


def _groundwatch(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groundwatch", *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_redis_url_that_is_not_one_is_a_usage_error_in_one_line() -> None:
    done = _groundwatch("worker", "--redis", "notaurl", "--group", "g", "--executor", "thread")
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith("groundwatch worker: error: --redis 'notaurl'"), line
    assert "redis://" in line  # what to write instead
    assert "consuming" not in done.stdout + done.stderr


def test_debug_shows_the_traceback_with_the_same_exit_code() -> None:
    import socket

    url = f"redis://127.0.0.1:{_free_port()}/0"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = _groundwatch("worker", "--redis", url, "--group", "g", "--health-port", port)
        assert done.returncode == 1, done.stderr
        line = _one_line(done.stderr)
        assert line.startswith(
            f"groundwatch worker: error: cannot listen on 127.0.0.1:{port} (--health-port)"
        ), line
        for argv in (
            ["--debug", "worker", "--redis", url, "--group", "g"],
            ["worker", "--redis", url, "--group", "g", "--debug"],  # after the subcommand too
        ):
            done = _groundwatch(*argv, "--health-port", port)
            assert done.returncode == 1, done.stderr
            assert "Traceback" in done.stderr
            assert done.stderr.rstrip().splitlines()[-1] == line


def test_the_health_port_listens_on_loopback_by_default() -> None:
    args = build_parser().parse_args(["worker", "--redis", "redis://x", "--group", "g"])
    assert args.health_host == "127.0.0.1"
    args = build_parser().parse_args(
        ["worker", "--redis", "redis://x", "--group", "g", "--health-host", "0.0.0.0"]
    )
    assert args.health_host == "0.0.0.0"


class Worker:
    """``groundwatch worker`` in a child process, its output collected by a reader thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "groundwatch", "worker", *args],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout_s: float = 60) -> re.Match[str]:
        """The first line of its output matching ``pattern``."""
        deadline = time.monotonic() + timeout_s
        while True:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            if time.monotonic() > deadline or not self._reader.is_alive():
                raise AssertionError(f"no line matching {pattern!r} in:\n" + "".join(self.lines))
            time.sleep(0.02)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)
        return code


@pytest.fixture
def worker_process() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()


def test_an_unreachable_redis_is_said_once_and_waited_for_before_consuming(
    tmp_path: Path, worker_process: list[Worker]
) -> None:
    binary = require_system_tool("redis-server", package="redis-server")
    server = RedisServer(binary, tmp_path)  # its port, not started yet
    w = Worker("--redis", server.url, "--group", "g", "--executor", "thread")
    worker_process.append(w)
    said = w.wait_for(r"groundwatch worker: cannot reach Redis at (\S+) \(--redis\): .*waiting")
    assert said.group(1) == server.url
    time.sleep(1.0)  # a few retries: still one line, and nothing claims to consume
    out = "".join(w.lines)
    assert out.count("cannot reach Redis") == 1 and "consuming" not in out, out
    server.start()  # Redis comes up: the worker goes on by itself
    try:
        w.wait_for(r"consuming 'groundwatch:records' as group 'g'")
        assert w.stop() == 0
    finally:
        server.stop()
    assert "Traceback" not in "".join(w.lines)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return int(reply.status), reply.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def test_says_where_telemetry_goes_shows_progress_and_what_it_scored(
    redis_server: RedisServer, worker_process: list[Worker]
) -> None:
    import groundwatch as gw

    health_port = _free_port()
    w = Worker(
        "--redis", redis_server.url, "--group", "scorers", "--executor", "thread",
        "--verbose", "--progress-interval-ms", "200", "--capture-content",
        "--health-port", str(health_port),
    )  # fmt: skip
    worker_process.append(w)
    w.wait_for(r"groundwatch worker \S+: consuming 'groundwatch:records' as group 'scorers'")
    # No OTEL_* variable and no opentelemetry-instrument: it says so, and how to change it.
    w.wait_for(r"groundwatch worker: telemetry goes nowhere.*OTEL_EXPORTER_OTLP_ENDPOINT")
    w.wait_for(rf"health probes on http://127\.0\.0\.1:{health_port}/livez and /readyz")
    assert _get(f"http://127.0.0.1:{health_port}/livez")[0] == 200
    deadline = time.monotonic() + 30  # ready once its first round made the group
    while _get(f"http://127.0.0.1:{health_port}/readyz")[0] != 200:
        assert time.monotonic() < deadline, "never ready"
        time.sleep(0.05)
    status, body = _get(f"http://127.0.0.1:{health_port}/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    assert _get(f"http://127.0.0.1:{health_port}/nothing")[0] == 404

    monitor = gw.Monitor(
        sampler=gw.RatioSampler(1.0), queue=gw.RedisQueue(redis_server.url), capture_content=True
    )
    monitor.record(
        question="How long is the warranty?",
        answer="Every appliance carries a two-year warranty.",
        contexts=["Every appliance carries a two-year warranty."],
    )
    monitor.record(
        question="When does shipping arrive?",
        answer="Shipping takes 10 to 12 business days.",
        contexts=["Standard shipping takes 3 to 5 business days."],
    )
    assert monitor.shutdown(timeout_millis=10_000)
    # One line per evaluation with its label, scores and question (captured content) ...
    w.wait_for(r"scored \S+ grounded\b.*faithfulness=1\.00.*How long is the warranty\?")
    w.wait_for(r"scored \S+ (hallucinated|unsupported)\b.*When does shipping arrive\?")
    # ... and the periodic progress line: scored, errors, lag.
    w.wait_for(r"groundwatch worker: scored 2, errors 0, dropped 0, lag 0")
    assert w.stop() == 0
    out = "".join(w.lines)
    assert "Traceback" not in out
    assert "groundwatch groundwatch" not in out
    assert re.search(r"groundwatch worker: stopped \(scored 2, errors 0", out), out


def test_without_verbose_and_without_a_tty_it_prints_no_progress(
    redis_server: RedisServer, worker_process: list[Worker]
) -> None:
    w = Worker(
        "--redis", redis_server.url, "--group", "scorers", "--executor", "thread",
        "--progress-interval-ms", "100",
    )  # fmt: skip
    worker_process.append(w)
    w.wait_for(r"consuming")
    time.sleep(0.5)
    assert w.stop() == 0
    progress = [line for line in w.lines if re.search(r"worker: scored \d+, errors", line)]
    assert not progress, w.lines


# The recipe of docs/distributed.md "Try it on one machine", run as written (the URL is the
# test's redis-server instead of the default port).
RECIPE_WORKER = (
    "groundwatch worker --redis redis://localhost:6379/0 --group scorers --verbose "
    "--capture-content"
)
RECIPE_APP = "python examples/langchain_rag.py --redis redis://localhost:6379/0"


def test_the_try_it_recipe_of_the_docs_runs_as_written(
    redis_server: RedisServer, worker_process: list[Worker]
) -> None:
    pytest.importorskip("groundwatch_langchain")
    doc = (Path(__file__).parents[2] / "docs" / "distributed.md").read_text()
    assert RECIPE_WORKER in doc and RECIPE_APP in doc
    assert 'pip install -e ".[redis,demo]" -e integrations/langchain' in doc
    url = redis_server.url
    worker_args = RECIPE_WORKER.replace("redis://localhost:6379/0", url).split()[2:]
    w = Worker(*worker_args)
    worker_process.append(w)
    w.wait_for(r"consuming")
    app = subprocess.run(
        [sys.executable, *RECIPE_APP.replace("redis://localhost:6379/0", url).split()[1:]],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert app.returncode == 0, app.stderr
    assert "sent 2 runs" in app.stdout, app.stdout
    # What the worker scored: the faithful answer and the made-up figure.
    w.wait_for(r"scored \S+ grounded\b.*How long do I have to ask for a refund\?")
    w.wait_for(r"scored \S+ (hallucinated|unsupported)\b.*How long does standard shipping take\?")
    assert w.stop() == 0
