"""Judge-human agreement on a real Prometheus server scraping the real exporter of a real Monitor:
the dashboard's agreement panel and the recording rules return data once people give feedback.

Uses the server fixtures of ``test_prometheus_server`` (Debian's ``prometheus``, rules from
``examples/prometheus/groundwatch-alerts.yml``, scraping every second).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry._logs import NoOpLoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.trace import NoOpTracerProvider, SpanContext, TraceFlags

import groundwatch as gw

from .test_prometheus_server import BAD, CONTEXT, GOOD, Server, exporter_port, prometheus

__all__ = ["exporter_port", "prometheus"]  # the fixtures, imported for pytest

DASHBOARD = (
    Path(__file__).resolve().parents[2] / "examples" / "grafana" / "groundwatch-dashboard.json"
)


def _panel(title: str) -> dict[str, Any]:
    dash = json.loads(DASHBOARD.read_text())
    (panel,) = [p for p in dash["panels"] if p["title"].startswith(title)]
    return dict(panel)


def _as_grafana_sends(expr: str) -> str:
    return expr.replace("$job", "app").replace("$route", ".*")


def test_agreement_panel_and_rules_return_data(
    prometheus: Server, exporter_port: tuple[int, MeterProvider]
) -> None:
    _, provider = exporter_port
    monitor = gw.Monitor(
        sampler=gw.RatioSampler(1.0),
        meter_provider=provider,
        tracer_provider=NoOpTracerProvider(),
        logger_provider=NoOpLoggerProvider(),
        executor="thread",
        shutdown_on_exit=False,
    )
    bad = list(range(0x100, 0x106))
    good = list(range(0x200, 0x206))
    try:
        for trace_id in bad + good:
            ctx = SpanContext(trace_id, 0x1, is_remote=True, trace_flags=TraceFlags(1))
            answer = BAD if trace_id in bad else GOOD
            monitor.record(
                question="Battery?",
                contexts=[CONTEXT],
                answer=answer,
                route="faq",
                span_context=ctx,
            )
        assert monitor.force_flush(timeout_millis=20_000)
        # A first feedback brings the route's series (its label pairs at 0 beside it).
        monitor.feedback(label="hallucinated", trace_id=bad[0])
        monitor.feedback(label="grounded", trace_id=good[0])
        prometheus.wait(
            "the feedback series",
            lambda: prometheus.query(
                'groundwatch_feedback_total{groundwatch_route="faq",'
                'groundwatch_label="hallucinated",groundwatch_feedback_label="grounded"}'
            ),
        )
        # Then eight more: the judge agrees with the person on six.
        for trace_id in bad[1:4]:
            monitor.feedback(label="hallucinated", trace_id=trace_id)
        monitor.feedback(label="grounded", trace_id=bad[4])
        for trace_id in good[1:4]:
            monitor.feedback(label="faithful", trace_id=trace_id)
        monitor.feedback(label="hallucinated", trace_id=good[4])
    finally:
        monitor.shutdown(timeout_millis=5_000)

    panel = _panel("Judge-human agreement")
    agreement, precision = (_as_grafana_sends(t["expr"]) for t in panel["targets"])

    def settled(expr: str, want: float) -> Any:
        def check() -> Any:
            found = prometheus.query(expr)
            return found if found and abs(float(found[0]["value"][1]) - want) < 0.01 else None

        return check

    (series,) = prometheus.wait("the panel's agreement", settled(agreement, 6 / 8))
    assert series["metric"] == {"groundwatch_route": "faq"}
    # Of the four the judge called hallucinated, people agreed on three.
    prometheus.wait("the panel's precision", settled(precision, 3 / 4))
    prometheus.wait(
        "the agreement rule",
        settled('groundwatch_route:judge_human_agreement:ratio1d{groundwatch_route="faq"}', 0.75),
    )
    prometheus.wait(
        "the precision rule",
        settled('groundwatch_route:hallucinated_precision:ratio1d{groundwatch_route="faq"}', 0.75),
    )
