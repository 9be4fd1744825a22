"""The alert rules on a real Prometheus server scraping the real exporter of a real Monitor.

The detector's first alert creates the ``groundwatch_alerts_total`` series at 1 (an
OpenTelemetry counter appears at its first add), which an ``increase()``-only rule never sees.
Here Prometheus (Debian's ``prometheus`` package, installed by ``.ci/run``) scrapes every second
and evaluates ``examples/prometheus/groundwatch-alerts.yml``; ``GroundwatchDropDetected`` must
fire on that first alert.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry._logs import NoOpLoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.trace import NoOpTracerProvider
from prometheus_client import CollectorRegistry, start_http_server

import groundwatch as gw
from groundwatch.alerts import AlertingHook, DropDetector, OTelAlertEmitter

from .conftest import prometheus_reader, require_tool

RULES = Path(__file__).resolve().parents[2] / "examples" / "prometheus" / "groundwatch-alerts.yml"
CONTEXT = "The Model X battery lasts 12 hours. Charging takes 90 minutes."
GOOD = "The battery lasts 12 hours."
BAD = "The warranty covers it for ten years and it ships from Berlin."
# What the rule used to be: blind to a series whose first sample is already 1.
INCREASE_ONLY = (
    "sum by (gen_ai_evaluation_name, groundwatch_route) "
    "(increase(groundwatch_alerts_total[10m])) > 0"
)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _prometheus() -> str:
    return require_tool("prometheus")


class Server:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/query", query=expr)["result"])

    def wait(self, what: str, check: Any, timeout_s: float = 60) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if found := check():
                    return found
            except OSError:
                pass
            time.sleep(0.5)
        pytest.fail(f"Prometheus never showed {what}")


@pytest.fixture
def exporter_port() -> Iterator[tuple[int, MeterProvider]]:
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[prometheus_reader(registry)])
    port = _port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    yield port, provider
    server.shutdown()
    thread.join(5)
    provider.shutdown()


@pytest.fixture
def prometheus(tmp_path: Path, exporter_port: tuple[int, MeterProvider]) -> Iterator[Server]:
    binary = _prometheus()
    port = _port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{json.dumps(str(RULES))}]\n"
        "scrape_configs:\n"
        "  - job_name: app\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{exporter_port[0]}']}}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    server = Server(f"http://127.0.0.1:{port}")
    try:
        server.wait("the scrape target up", lambda: server.query('up{job="app"} == 1'))
        yield server
    finally:
        proc.terminate()
        proc.wait(10)


def test_drop_detected_fires_on_the_first_alert_of_a_series(
    prometheus: Server, exporter_port: tuple[int, MeterProvider]
) -> None:
    _, provider = exporter_port
    hook = AlertingHook(
        DropDetector(warmup=5, floors=None, target_arl=50, mean_target_arl=50),
        on_alert=[OTelAlertEmitter(meter_provider=provider, logger_provider=NoOpLoggerProvider())],
    )
    monitor = gw.Monitor(
        sampler=gw.RatioSampler(1.0),
        meter_provider=provider,
        tracer_provider=NoOpTracerProvider(),
        logger_provider=NoOpLoggerProvider(),
        on_result=hook,
        executor="thread",
        shutdown_on_exit=False,
    )
    try:
        for _ in range(10):
            monitor.record(question="Battery?", contexts=[CONTEXT], answer=GOOD, route="faq")
        assert monitor.force_flush(timeout_millis=20_000)
        # Prometheus has the route's evaluations before any alert exists.
        prometheus.wait(
            "the evaluations series",
            lambda: prometheus.query('groundwatch_evaluations_total{groundwatch_route="faq"}'),
        )
        assert prometheus.query("groundwatch_alerts_total") == []
        for _ in range(10):
            monitor.record(question="Battery?", contexts=[CONTEXT], answer=BAD, route="faq")
        assert monitor.force_flush(timeout_millis=20_000)
        assert any(a.kind == "fired" for a in hook.alerts)
    finally:
        monitor.shutdown(timeout_millis=5_000)

    def firing() -> list[dict[str, Any]]:
        alerts = prometheus.get("/api/v1/alerts")["alerts"]
        return [
            a
            for a in alerts
            if a["labels"]["alertname"] == "GroundwatchDropDetected" and a["state"] == "firing"
        ]

    alerts = prometheus.wait("GroundwatchDropDetected firing", firing)
    assert {a["labels"]["groundwatch_route"] for a in alerts} == {"faq"}
    # The series Prometheus saw began at 1, so increase() alone reports nothing.
    (series,) = prometheus.query(
        'groundwatch_alerts_total{gen_ai_evaluation_name="hallucination_rate"}'
    )
    assert float(series["value"][1]) >= 1
    assert prometheus.query(INCREASE_ONLY) == []


class _SlowJudge:
    name = "SlowJudge"

    def judge(self, answer: str, contexts: Any, question: str | None) -> Any:
        time.sleep(0.2)
        return gw.LocalJudge().judge(answer, contexts, question)


def test_failure_counters_read_zero_on_a_healthy_service_and_increase_sees_the_first(
    prometheus: Server, exporter_port: tuple[int, MeterProvider]
) -> None:
    """``groundwatch_errors_total`` and ``groundwatch_evaluations_dropped_total`` are scraped at 0
    before anything failed (a panel reads 0, not "No data"), with the labels dashboards group by;
    the first drop then shows in ``increase()``, which a series born at 1 would hide."""
    _, provider = exporter_port
    healthy = gw.Monitor(
        sampler=gw.RatioSampler(1.0),
        meter_provider=provider,
        tracer_provider=NoOpTracerProvider(),
        logger_provider=NoOpLoggerProvider(),
        executor="thread",
        shutdown_on_exit=False,
    )
    try:
        healthy.record(question="Battery?", contexts=[CONTEXT], answer=GOOD, route="faq")
        assert healthy.force_flush(timeout_millis=20_000)

        def both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
            errors = prometheus.query("groundwatch_errors_total")
            dropped = prometheus.query("groundwatch_evaluations_dropped_total")
            return (errors, dropped) if errors and dropped else None

        errors, dropped = prometheus.wait("the failure counters", both)
        assert {s["metric"]["error_type"] for s in dropped} >= {"shutdown", "transport"}
        assert all(float(s["value"][1]) == 0 for s in dropped), dropped
        # groundwatch.errors counts the whole process (earlier tests' errors carry their
        # error_type); each component's series from the start has none, at 0.
        components = [s for s in errors if "error_type" not in s["metric"]]
        assert components and all(float(s["value"][1]) == 0 for s in components), errors
        by_component = "sum by (groundwatch_component) (groundwatch_errors_total)"
        assert {
            s["metric"].get("groundwatch_component") for s in prometheus.query(by_component)
        } >= {
            "on_result",
            "record",
        }, "a panel grouped by component reads 0 for each"
        assert prometheus.query('groundwatch_evaluations_dropped_total{error_type="shutdown"} == 0')

        # Now a first failure: records left queued at a short shutdown deadline.
        slow = gw.Monitor(
            judge=_SlowJudge(),
            meter_provider=provider,
            tracer_provider=NoOpTracerProvider(),
            logger_provider=NoOpLoggerProvider(),
            executor="thread",
            shutdown_on_exit=False,
        )
        for _ in range(5):
            slow.record(question="Battery?", contexts=[CONTEXT], answer=GOOD, route="faq")
        assert slow.shutdown(timeout_millis=100) is False
        assert slow.stats.snapshot()[1].get("shutdown", 0) > 0
        prometheus.wait(
            "increase() of the first drop",
            lambda: prometheus.query(
                'increase(groundwatch_evaluations_dropped_total{error_type="shutdown"}[1m]) > 0'
            ),
        )
    finally:
        healthy.shutdown(timeout_millis=5_000)
