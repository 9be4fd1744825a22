"""Metrics straight to Prometheus, no Collector: ``opentelemetry-exporter-prometheus``.

A :class:`groundwatch.Monitor` scores a stream of answers (partway through, the answers start
to drift away from their context) and its metrics -- plus the drop detector's alerts -- are
served on ``http://127.0.0.1:PORT/metrics`` for Prometheus to scrape. Load
``examples/prometheus/groundwatch-alerts.yml`` as a rule file and
``examples/grafana/groundwatch-dashboard.json`` in Grafana.

    pip install -e ".[prometheus]"    # from a clone of the repository
    python examples/prometheus_direct.py --port 9464          # serves until Ctrl-C
    curl -s localhost:9464/metrics | grep '^groundwatch_'
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
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address of /metrics (default: this machine only; 0.0.0.0 in a container)",
    )
    parser.add_argument("--answers", type=int, default=400)
    parser.add_argument("--serve-seconds", type=float, default=None, help="default: until Ctrl-C")
    args = parser.parse_args()

    # 1. The reader is the exporter: Prometheus pulls through prometheus_client's HTTP server.
    #    Loopback by default: /metrics has no authentication (--host 0.0.0.0 opens it).
    start_http_server(args.port, addr=args.host)
    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))

    # 2. The monitor emits to the global meter provider; the drop detector rides on on_result.
    #    (A short warm-up and a low run length, for a demo of a few hundred answers.)
    alerts = AlertingHook(
        DropDetector(warmup=50, target_arl=2_000, mean_target_arl=2_000),
        on_alert=[OTelAlertEmitter(), log_alert],
    )
    monitor = gw.Monitor(sampler=gw.RatioSampler(1.0), on_result=alerts, route="support")

    rng = random.Random(0)
    for i in range(args.answers):
        drifting = i > args.answers // 2
        answer = BAD if rng.random() < (0.5 if drifting else 0.05) else GOOD
        monitor.record(
            question="How long does the battery last?", contexts=[CONTEXT], answer=answer
        )
    monitor.force_flush(timeout_millis=30_000)

    print(f"scored {args.answers} answers; alerts:")
    for alert in alerts.alerts:
        print("  " + alert.message)
    print(f"metrics on http://127.0.0.1:{args.port}/metrics")
    with contextlib.suppress(KeyboardInterrupt):
        time.sleep(args.serve_seconds if args.serve_seconds is not None else 10**9)
    monitor.shutdown()


if __name__ == "__main__":
    main()
