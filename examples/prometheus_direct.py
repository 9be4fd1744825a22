"""Metrics straight to Prometheus, no Collector: ``opentelemetry-exporter-prometheus``.

Serves ``/metrics`` on ``--port`` (default 9464) while a monitored stream of answers is scored,
then keeps serving until Ctrl-C (or for ``--serve-seconds``). Scrape it with Prometheus and load
``examples/prometheus/groundwatch-alerts.yml`` as a rule file.

    pip install opentelemetry-exporter-prometheus
    python examples/prometheus_direct.py --port 9464
    curl -s localhost:9464/metrics | grep groundwatch_
"""

from __future__ import annotations

import argparse
import contextlib
import random
import time

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

import groundwatch as gw
from groundwatch.alerts import AlertingHook, DropDetector, OTelAlertEmitter, log_alert

CONTEXT = (
    "The Model X battery lasts 12 hours on a full charge. Charging from empty takes 90 minutes "
    "with the supplied 30 W adapter. The warranty covers the battery for two years."
)
GOOD = "The battery lasts 12 hours. A full charge takes 90 minutes with the 30 W adapter."
BAD = "The battery lasts 48 hours and the warranty covers it for ten years."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9464)
    parser.add_argument("--answers", type=int, default=400)
    parser.add_argument("--serve-seconds", type=float, default=None, help="default: until Ctrl-C")
    args = parser.parse_args()

    # 1. The reader is the exporter: Prometheus pulls from it through prometheus_client.
    start_http_server(args.port, addr="127.0.0.1")
    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))

    # 2. What groundwatch emits goes to the global meter provider; here the drop detector's
    #    counter, plus per-answer counters like the runtime's, fed by a hook.
    meter = metrics.get_meter("groundwatch.example")
    evaluations = meter.create_counter("groundwatch.evaluations", unit="{evaluation}")
    scores = meter.create_histogram(
        "groundwatch.evaluation.score",
        unit="1",
        explicit_bucket_boundaries_advisory=[i / 10 for i in range(11)],
    )
    hook = AlertingHook(
        DropDetector(warmup=100, target_arl=5_000), on_alert=[OTelAlertEmitter(), log_alert]
    )
    judge = gw.LocalJudge()
    rng = random.Random(0)
    for i in range(args.answers):
        drifting = i > args.answers // 2
        answer = BAD if rng.random() < (0.5 if drifting else 0.05) else GOOD
        ev = gw.evaluate(answer, [CONTEXT], question="How long does the battery last?", judge=judge)
        attrs = {"groundwatch.route": "support"}
        evaluations.add(1, {**attrs, "groundwatch.label": ev.label})
        for name in ("faithfulness", "groundedness"):
            value = getattr(ev, name)
            if value is not None:
                scores.record(value, {**attrs, "gen_ai.evaluation.name": name})
        hook(gw.RagRecord(answer=answer, route="support"), ev)

    print(f"scored {args.answers} answers; alerts: {[a.message for a in hook.alerts]}")
    print(f"metrics on http://127.0.0.1:{args.port}/metrics")
    with contextlib.suppress(KeyboardInterrupt):
        time.sleep(args.serve_seconds if args.serve_seconds is not None else 10**9)


if __name__ == "__main__":
    main()
