"""``groundwatch demo``: the main job, run as a user runs it (a subprocess), plus its exporters."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from groundwatch.demo import cli as demo_cli

from . import readme_demo

ROOT = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    paths = [str(ROOT / "src"), str(ROOT / "integrations" / "langchain" / "src")]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _run_small_demo() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groundwatch", "demo", "--requests", "60", "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd=ROOT,
    )


def test_demo_runs_and_alerts() -> None:
    out = _run_small_demo()
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "60/60 requests" in text
    # The alert fires, after the drift began, and is printed as it fires (before the summary).
    drift = int(text.split("starts drifting after request ")[1].split(".")[0])
    alert_lines = [line for line in text.splitlines() if ">> ALERT at request" in line]
    assert alert_lines, text
    first = int(alert_lines[0].split("at request ")[1].split(":")[0])
    assert drift < first <= 60
    assert text.index(">> ALERT") < text.index("labels / verdicts")
    # The summary: overall and per phase, the hallucination rate going up, the worst answers.
    rows = {
        line.split()[0]: line for line in text.splitlines() if line.startswith(("all ", "before"))
    }
    assert "grounded" in rows["all"]
    after = next(line for line in text.splitlines() if line.startswith("after drift"))
    before = rows["before"]
    rate = lambda row: float(row.split("%")[0].split()[-1])  # noqa: E731
    assert rate(after) > rate(before) + 20
    assert "Worst answers:" in text and "- unsupported:" in text
    assert "sampled " in text and " of 60 requests, scored " in text
    assert "the first alert fired at request" in text
    # What is still firing when the run ends is said, after the first alert's line.
    assert "Still firing at the end: " in text or "No alert is firing at the end" in text
    assert "went to: in-memory exporters in this process" in text
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in text
    # Seeded: the same run again gives the same output, timings aside: the progress lines show
    # how far the background scoring has got, which depends on the machine's load.
    again = _run_small_demo()
    strip = lambda s: [x for x in s.splitlines() if not x.startswith(("Done in", "["))]  # noqa: E731
    assert strip(again.stdout) == strip(text)


def test_readme_sample_output_is_the_default_run() -> None:
    """The README shows `groundwatch demo` as it prints, bar the progress lines and run time
    (``.ci/run`` runs the same comparison, ``readme_demo.py``, in a fresh ``[demo]`` install)."""
    out = readme_demo.run_demo([sys.executable, "-m", "groundwatch", "demo"], env=_env(), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert readme_demo.readme_sample() == readme_demo.shown(out.stdout)


def test_the_demo_prints_the_same_with_or_without_the_optional_packages(tmp_path: Path) -> None:
    """What the demo prints depends on no package outside its extra: the Chinese tagger
    (rjieba, in the extra) is required, and without it the demo stops with the install line
    instead of printing other figures."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nsys.modules['rjieba'] = None\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    out = readme_demo.run_demo(
        [sys.executable, "-m", "groundwatch", "demo", "--requests", "20"], env=env, cwd=ROOT
    )
    assert out.returncode == 2, out.stdout
    assert "rjieba" in out.stderr and 'pip install -e ".[demo]"' in out.stderr


class _OTLPSink(BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def otlp_server() -> Iterator[tuple[str, list[str]]]:
    handler = type("Sink", (_OTLPSink,), {"paths": []})
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.paths
    httpd.shutdown()
    httpd.server_close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_demo_exports_otlp_and_prometheus(otlp_server: tuple[str, list[str]]) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    endpoint, paths = otlp_server
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groundwatch",
            "demo",
            "--requests",
            "30",
            "--seed",
            "2",
            "--prometheus-port",
            str(port),
            "--linger",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint),
        cwd=ROOT,
    )
    # Scrape while it runs and lingers; keep the last full page.
    scraped = ""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                page = r.read().decode()
            if "groundwatch_" in page:
                scraped = page
        except OSError:
            pass
        time.sleep(0.3)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "groundwatch_evaluations_total" in scraped, stdout + stderr
    assert "groundwatch_records_total" in scraped
    assert "groundwatch_evaluation_score_bucket" in scraped
    assert f"OTLP/HTTP at {endpoint}: delivered (" in stdout and "none failed" in stdout
    assert f"Prometheus at http://127.0.0.1:{port}/metrics" in stdout
    # Shutdown flushed every signal to the OTLP endpoint.
    assert {"/v1/traces", "/v1/logs", "/v1/metrics"} <= set(paths), paths


def test_demo_reports_an_unreachable_otlp_endpoint_as_a_failure() -> None:
    """Connection refused is not "telemetry went to OTLP": the run says so and exits 1."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    endpoint = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    out = subprocess.run(
        [sys.executable, "-m", "groundwatch", "demo", "--requests", "20", "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="1"),
        cwd=ROOT,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"OTLP endpoint {endpoint} is not reachable" in out.stdout
    assert f"OTLP/HTTP at {endpoint}: DELIVERY FAILED" in out.stdout
    assert "delivered" not in out.stdout


def test_demo_without_langchain(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    args = argparse.Namespace(
        requests=10,
        sample_rate=0.5,
        seed=1,
        prometheus_port=None,
        prometheus_host="127.0.0.1",
        linger=0.0,
    )
    assert demo_cli.run(args) == 2
    err = capsys.readouterr().err
    assert "langchain-core" in err and 'pip install -e ".[demo]" -e integrations/langchain' in err


def test_a_prometheus_port_without_the_exporter_stops_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.prometheus", None)
    args = argparse.Namespace(
        requests=10,
        sample_rate=0.5,
        seed=1,
        prometheus_port=9464,
        prometheus_host="127.0.0.1",
        linger=0.0,
    )
    assert demo_cli.run(args) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no traffic simulated, no footer suggesting the flag
    assert err.startswith("groundwatch demo: error: --prometheus-port needs the Prometheus")
    assert 'pip install -e ".[prometheus]"' in err


def test_core_does_not_import_langchain() -> None:
    code = (
        "import sys, groundwatch, groundwatch.cli; groundwatch.cli.build_parser(); "
        "assert 'langchain_core' not in sys.modules, 'langchain imported'"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env()
    )
    assert out.returncode == 0, out.stderr


def test_demo_rejects_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    bad = argparse.Namespace(
        requests=10,
        sample_rate=0.0,
        seed=1,
        prometheus_port=None,
        prometheus_host="127.0.0.1",
        linger=0,
    )
    assert demo_cli.run(bad) == 2
    assert "--sample-rate" in capsys.readouterr().err


def _listening(port: int) -> set[str]:
    """The IPv4 addresses a TCP socket listens on at ``port``, as the kernel tells them."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
@pytest.mark.parametrize(
    ("flags", "address"), [((), "127.0.0.1"), (("--prometheus-host", "0.0.0.0"), "0.0.0.0")]
)
def test_the_prometheus_endpoint_listens_on_loopback_unless_opened(
    flags: tuple[str, ...], address: str
) -> None:
    """An unauthenticated /metrics on every interface is a choice, not a default."""
    pytest.importorskip("opentelemetry.exporter.prometheus")
    port = _free_port()
    command = ["demo", "--requests", "10", "--prometheus-port", str(port), "--linger", "3"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "groundwatch", *command, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    seen: set[str] = set()
    deadline = time.monotonic() + 90
    while not seen and proc.poll() is None and time.monotonic() < deadline:
        seen = _listening(port)
        time.sleep(0.1)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert seen == {address}, (seen, stdout)
    assert f"Prometheus at http://{address}:{port}/metrics" in stdout
