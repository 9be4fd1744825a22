"""The alert rules on a real Prometheus server scraping the real exporter of a real Monitor.

The detector's first alert creates the ``groundwatch_alerts_total`` series at 1 (an
OpenTelemetry counter appears at its first add), which an ``increase()``-only rule never sees.
Here Prometheus (Debian's ``prometheus`` package, installed by ``.ci/run``) scrapes every second
and evaluates ``examples/prometheus/groundwatch-alerts.yml``; ``GroundwatchDropDetected`` must
fire on that first alert. And the audited hallucination-rate estimate: a monitor whose judge's
flags and probabilities are scripted against answers of a known true rate, with audit labels
brought back by ``feedback(source="audit")``, must make Prometheus record an estimate near the
true rate, with bounds around it, far from the judge's flag share.

The rule groups run here every second (a copy of the shipped file with each group's
``interval`` set to 1s): the expressions are the shipped ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry._logs import NoOpLoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.trace import NoOpTracerProvider, SpanContext, TraceFlags
from prometheus_client import CollectorRegistry, start_http_server

import groundwatch as gw
from groundwatch import Judgement
from groundwatch.alerts import AlertingHook, DropDetector, OTelAlertEmitter
from groundwatch.rates import RateTotals, estimate_rate

from ..runtime.judges import EchoJudge
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


@contextlib.contextmanager
def _prometheus_scraping(tmp_path: Path, target_port: int) -> Iterator[Server]:
    """A real Prometheus scraping ``127.0.0.1:target_port`` every second, with the shipped
    rules evaluated every second."""
    binary = _prometheus()
    port = _port()
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
    fast_rules = tmp_path / "rules.yml"
    fast_rules.write_text(yaml.safe_dump(rules, sort_keys=False))
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{json.dumps(str(fast_rules))}]\n"
        "scrape_configs:\n"
        "  - job_name: app\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
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
    try:
        yield Server(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def prometheus(tmp_path: Path, exporter_port: tuple[int, MeterProvider]) -> Iterator[Server]:
    with _prometheus_scraping(tmp_path, exporter_port[0]) as server:
        server.wait("the scrape target up", lambda: server.query('up{job="app"} == 1'))
        yield server


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
    (series,) = prometheus.query('groundwatch_alerts_total{gen_ai_evaluation_name="flag_share"}')
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


# GOOD occurs verbatim in it (the echo judge's "supported"), BAD does not.
RATED_CONTEXT = f"{GOOD} Charging takes 90 minutes."


class _ScriptedJudge(EchoJudge):
    """The echo judge (GOOD is in RATED_CONTEXT: grounded; BAD is not: hallucinated) with the
    probability the script gives the question, as a judge hands its own probability over."""

    name = "scripted"

    def __init__(self, probabilities: dict[str, float]) -> None:
        super().__init__()
        self.probabilities = probabilities

    def judge(self, answer: str, contexts: Any, question: str | None) -> Judgement:
        result = super().judge(answer, contexts, question)
        probability = self.probabilities[question or ""]
        return result.model_copy(update={"hallucination_probability": probability})


def test_audited_estimate_lands_near_the_true_rate(
    prometheus: Server, exporter_port: tuple[int, MeterProvider]
) -> None:
    """A true rate of 20 %; the judge flags a hallucinated answer 3 times in 4 and a faithful
    one 3 times in 10 (a flag share near 40 %), its probability higher for the flagged ones;
    a quarter of the judged answers are audited and their true labels come back. Prometheus
    adds the counters and records PPI++'s estimate and bounds, which must hold the true rate,
    agree with ``estimate_rate`` on the same answers, and fire the rate alert's condition."""
    _, provider = exporter_port
    true_rate = 0.2
    rng = random.Random(39)
    answers: list[tuple[int, str, bool, bool, float]] = []  # trace, question, truth, flag, f
    for i in range(1_201):
        hallucinated = rng.random() < true_rate
        flagged = rng.random() < (0.75 if hallucinated else 0.3)
        f = min(1.0, max(0.0, (0.55 if flagged else 0.25) + 0.1 * hallucinated + rng.gauss(0, 0.1)))
        answers.append((0x5EED0000 + i, f"q{i}", hallucinated, flagged, round(f, 4)))
    monitor = gw.Monitor(
        judge=_ScriptedJudge({q: f for _, q, _, _, f in answers}),
        sampler=gw.RatioSampler(1.0),
        audit_rate=0.25,
        meter_provider=provider,
        tracer_provider=NoOpTracerProvider(),
        logger_provider=NoOpLoggerProvider(),
        executor="thread",
        max_queue_size=2_000,  # every answer judged: none dropped for a full queue
        feedback_memory=2_000,
        shutdown_on_exit=False,
    )

    def send(batch: list[tuple[int, str, bool, bool, float]]) -> RateTotals:
        sums = RateTotals()
        for trace_id, question, _, flagged, _ in batch:
            ctx = SpanContext(trace_id, 0xB1, is_remote=True, trace_flags=TraceFlags(1))
            monitor.record(
                question=question,
                contexts=[RATED_CONTEXT],
                answer=BAD if flagged else GOOD,
                route="rated",
                span_context=ctx,
            )
        assert monitor.force_flush(timeout_millis=30_000)
        for trace_id, _, hallucinated, flagged, f in batch:
            audited = monitor.audited(trace_id)
            if audited:
                label = "hallucinated" if hallucinated else "grounded"
                monitor.feedback(label=label, trace_id=trace_id, source="audit")
            sums = sums.add(flagged, f, hallucinated if audited else None)
        return sums

    try:
        # One answer outside the audit first, so that every counter series exists before the
        # rest: Prometheus's increase() cannot see what a series counted before its first
        # scrape. (The audit counters start at 0 with a route's first judged answer.)
        seed = next(a for a in answers if not monitor.audited(a[0]))
        answers.remove(seed)
        send([seed])
        prometheus.wait(
            "the first answer",
            lambda: prometheus.query('groundwatch_audit_labelled_total{groundwatch_route="rated"}'),
        )
        totals = send(answers)
    finally:
        monitor.shutdown(timeout_millis=5_000)
    expected = estimate_rate(totals)
    assert expected.method == "ppi", expected
    assert expected.flag_share > 0.35
    # Every label scraped, then a few more scrapes. increase() extrapolates the sums to the
    # window's edges by the same factor for every series (scraped at the same instants), which
    # the estimate's ratios cancel.
    prometheus.wait(
        "every audit label",
        lambda: prometheus.query(
            f'groundwatch_audit_labelled_total{{groundwatch_route="rated"}} == {totals.labelled}'
        ),
    )
    time.sleep(5)

    def recorded() -> dict[str, float] | None:
        out = {}
        for name in (
            "hallucination_rate_estimate:audit7d",
            "hallucination_rate_lower:audit7d",
            "hallucination_rate_upper:audit7d",
            "hallucination_flag_share:ratio7d",
            "audit_labelled:increase7d",
        ):
            found = prometheus.query(f'groundwatch_route:{name}{{groundwatch_route="rated"}}')
            if not found:
                return None
            out[name.split(":")[0]] = float(found[0]["value"][1])
        return out

    got = prometheus.wait("the recorded estimate", recorded)
    estimate = got["hallucination_rate_estimate"]
    lower, upper = got["hallucination_rate_lower"], got["hallucination_rate_upper"]
    assert lower <= true_rate <= upper, got
    assert abs(estimate - true_rate) < 0.05, got
    assert upper - lower < 0.12, got
    # The rules compute what estimate_rate computes; the bounds narrow a little with
    # increase()'s extrapolation of the counts.
    assert abs(estimate - expected.estimate) < 0.002, (got, expected)
    assert abs(got["hallucination_flag_share"] - expected.flag_share) < 0.002, (got, expected)
    assert abs(lower - expected.lower) < 0.01 and abs(upper - expected.upper) < 0.01, got
    assert abs(got["hallucination_flag_share"] - true_rate) > 0.15, got
    assert totals.labelled <= got["audit_labelled"] <= 1.5 * totals.labelled, (got, totals)
    # The rate alert's condition holds on the lower bound (it fires after `for: 30m`).
    prometheus.wait(
        "GroundwatchHallucinationRateHigh pending",
        lambda: prometheus.query(
            'ALERTS{alertname="GroundwatchHallucinationRateHigh",groundwatch_route="rated"}'
        ),
    )


def test_the_demo_shows_the_estimate_and_the_rate_alert_pending(tmp_path: Path) -> None:
    """`groundwatch demo --prometheus-port`, scraped by a real Prometheus with the shipped rules:
    the demo audits (its reviewer's labels go through monitor.feedback(source="audit")), so the
    recording rules hold the audited estimate and its bounds, and after the drift the rate alert
    goes pending; the estimate is the one the demo prints."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("opentelemetry.exporter.prometheus")
    root = Path(__file__).resolve().parents[2]
    demo_port = _port()
    with _prometheus_scraping(tmp_path, demo_port) as server:
        server.wait("Prometheus ready", lambda: server.get("/api/v1/targets"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        paths = [str(root / "src"), str(root / "integrations" / "langchain" / "src")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
        demo = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "groundwatch",
                "demo",
                "--prometheus-port",
                str(demo_port),
                "--linger",
                "60",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=root,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(demo.stdout or ()), daemon=True)
        reader.start()
        try:
            # The run is over (and its summary printed) when it starts lingering.
            server.wait(
                "the demo's summary",
                lambda: any(x.startswith("Serving Prometheus metrics") for x in list(lines)),
                timeout_s=120,
            )
            line = next(x for x in list(lines) if x.startswith("  audit of "))
            labels = int(line.split("audit of ")[1].split()[0])
            route = '{groundwatch_route="help-centre"}'

            def recorded() -> dict[str, float] | None:
                out = {}
                for name in (
                    "hallucination_rate_estimate:audit7d",
                    "hallucination_rate_lower:audit7d",
                    "hallucination_rate_upper:audit7d",
                    "hallucination_flag_share:ratio7d",
                    "audit_labelled:increase7d",
                ):
                    found = server.query(f"groundwatch_route:{name}{route}")
                    if not found:
                        return None
                    out[name.split(":")[0]] = float(found[0]["value"][1])
                return out if out["audit_labelled"] >= labels else None

            server.wait("every audit label of the demo", recorded, timeout_s=60)
            time.sleep(3)  # a few more evaluations of the rules on the final counts
            got = recorded()
            assert got is not None
            pending = server.wait(
                "GroundwatchHallucinationRateHigh pending",
                lambda: server.query(
                    'ALERTS{alertname="GroundwatchHallucinationRateHigh",'
                    'groundwatch_route="help-centre"}'
                ),
                timeout_s=30,
            )
            assert pending[0]["metric"]["alertstate"] == "pending"
        finally:
            demo.terminate()
            demo.wait(30)
            reader.join(5)
    # The demo's own line: "audit of N   E%  (90% interval L%–U%; method)".
    estimate, lower, upper = (float(v) / 100 for v in re.findall(r"(\d+\.\d)%", line)[:3])
    assert got["hallucination_rate_lower"] <= estimate <= got["hallucination_rate_upper"], got
    assert abs(got["hallucination_rate_estimate"] - estimate) < 0.02, (got, line)
    assert abs(got["hallucination_rate_lower"] - lower) < 0.03, (got, line)
    assert abs(got["hallucination_rate_upper"] - upper) < 0.03, (got, line)
    assert got["hallucination_rate_lower"] > 0.10  # the drift: the alert's condition
    assert labels <= got["audit_labelled"] <= 1.2 * labels, (got, line)
