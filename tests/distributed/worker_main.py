"""Run ``groundwatch <args>`` with the OpenTelemetry SDK: spans are appended to
``<out>.spans.jsonl`` as they end (so a ``kill -9`` loses none that were emitted), metrics
are read by an in-memory reader and written to ``<out>.metrics.json`` at a clean exit.

``GW_TEST_JUDGE_SLEEP_S``: LocalJudge sleeps this long per answer (a worker that holds
entries while it is killed).
``GW_TEST_PROBABILITY_JUDGE``: ``--judge probability`` is the runtime tests' ProbabilityJudge
(a judge that gives each answer a known hallucination probability).

Usage: python worker_main.py OUT worker --redis URL --group NAME ...
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class JsonlSpanExporter(SpanExporter):
    def __init__(self, path: Path) -> None:
        self.file = path.open("a", encoding="utf-8")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            parent = span.parent
            self.file.write(
                json.dumps(
                    {
                        "name": span.name,
                        "trace_id": f"{span.context.trace_id:032x}",
                        "span_id": f"{span.context.span_id:016x}",
                        "parent_span_id": f"{parent.span_id:016x}" if parent else None,
                        "end_ns": span.end_time,
                        "attributes": dict(span.attributes or {}),
                    }
                )
                + "\n"
            )
        self.file.flush()
        return SpanExportResult.SUCCESS


def _metrics(reader: InMemoryMetricReader) -> dict[str, list[list[Any]]]:
    out: dict[str, list[list[Any]]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", getattr(point, "count", None))
                    out.setdefault(metric.name, []).append([dict(point.attributes), value])
    return out


def main() -> int:
    out = Path(sys.argv[1])
    sleep_s = float(os.environ.get("GW_TEST_JUDGE_SLEEP_S", "0"))
    if sleep_s:
        import groundwatch

        original = groundwatch.LocalJudge.judge

        def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
            time.sleep(sleep_s)
            return original(self, *args, **kwargs)

        groundwatch.LocalJudge.judge = slow  # type: ignore[method-assign]
    if os.environ.get("GW_TEST_PROBABILITY_JUDGE"):
        from groundwatch.judging import registry
        from tests.runtime.judges import ProbabilityJudge

        registry.register(
            "probability", lambda options: ProbabilityJudge(), summary="tests' known probability"
        )
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(JsonlSpanExporter(out.with_suffix(".spans.jsonl"))))
    trace.set_tracer_provider(tp)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    from groundwatch.cli import main as groundwatch_main

    code = groundwatch_main(sys.argv[2:])
    out.with_suffix(".metrics.json").write_text(json.dumps(_metrics(reader)))
    return code


if __name__ == "__main__":
    sys.exit(main())
