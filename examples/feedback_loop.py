"""From production back to the gate, offline: thumbs-down -> feedback -> agreement -> flagged
file -> labelled -> ``groundwatch check``.

Run: python examples/feedback_loop.py [--out DIR]

1. A small support bot answers questions inside its request spans; a monitor with content
   capture (and a ``redact`` hook) scores them and a ``DatasetSink`` writes the flagged ones.
2. Users press thumbs-up or thumbs-down. A thumbs-down asks for the answer to be scored whatever
   the sampler said (``always_score=True``), and both become ``monitor.feedback(...)`` with the
   request's trace id.
3. The ``groundwatch.feedback`` counter, read here from an in-memory reader as Prometheus would
   scrape it, gives the judge-human agreement per route (the recording rule's arithmetic).
4. A person fills the empty ``label`` of each flagged row; ``groundwatch check`` runs on the file
   and prints the human-label table. Everything stays on this machine: the telemetry goes to
   in-memory exporters.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

import groundwatch as gw

POLICY = (
    "Returns are accepted within 30 days of delivery with the receipt. Refunds go back to the "
    "original card within 5 business days. Contact support@shop.example for a return label."
)
SHIPPING = "Standard shipping takes 3 to 5 business days. Express shipping takes 1 business day."

# (route, question, passages, answer, what the user thinks of it)
TRAFFIC = [
    ("returns", "How long do I have to return?", [POLICY], "You have 30 days from delivery.", "up"),
    (
        "returns",
        "Can I return after 60 days?",
        [POLICY],
        "Yes, returns are accepted for 90 days.",
        "down",
    ),
    (
        "returns",
        "Where does my refund go?",
        [POLICY],
        "Refunds go back to the original card.",
        "up",
    ),
    ("returns", "Do I need the receipt?", [POLICY], "No receipt is needed for a return.", "down"),
    (
        "shipping",
        "How fast is express?",
        [SHIPPING],
        "Express shipping takes 1 business day.",
        "up",
    ),
    # The judge flags this one (the context says nothing of weekends); the user is happy.
    ("shipping", "Do you ship on weekends?", [SHIPPING], "Express also ships on Saturdays.", "up"),
    (
        "shipping",
        "How long is standard?",
        [SHIPPING],
        "Standard shipping takes 3 to 5 business days.",
        None,
    ),
]


def redact(text: str) -> str:
    """What must not leave the process, even into the flagged file: e-mail addresses."""
    return re.sub(r"[\w.+-]+@[\w-]+\.[\w.]+", "<email>", text)


def agreement(reader: InMemoryMetricReader) -> dict[str, tuple[int, int]]:
    """``route -> (agreed, labelled)`` from ``groundwatch.feedback``, as the recording rules
    compute it: flagged (hallucinated, insufficient_context) where the person said
    hallucinated, passed (grounded, no_claims) where they said grounded; unknown left out."""
    out: dict[str, tuple[int, int]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name != "groundwatch.feedback":
                    continue
                for point in metric.data.data_points:
                    attrs = dict(point.attributes or {})
                    judge, human = (
                        attrs.get("groundwatch.label"),
                        attrs.get("groundwatch.feedback.label"),
                    )
                    n = int(getattr(point, "value", 0))
                    if not n or judge in (None, "unknown", "error"):
                        continue
                    flagged = judge in ("hallucinated", "insufficient_context")
                    agreed, total = out.get(str(attrs.get("groundwatch.route")), (0, 0))
                    agree = flagged == (human == "hallucinated")
                    out[str(attrs.get("groundwatch.route"))] = (agreed + n * agree, total + n)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description="the feedback loop, offline")
    parser.add_argument("--out", type=Path, help="where to write the files (default: a temp dir)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="groundwatch-feedback-"))
    out.mkdir(parents=True, exist_ok=True)
    flagged_path = out / "flagged.jsonl"
    flagged_path.unlink(missing_ok=True)

    tracer_provider = TracerProvider()
    reader = InMemoryMetricReader()
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer = tracer_provider.get_tracer("support-bot")

    flagged = gw.DatasetSink(flagged_path)  # every label but grounded
    monitor = gw.Monitor(
        sampler=gw.RatioSampler(1.0),  # in production a fraction; thumbs-down always
        tracer_provider=tracer_provider,
        meter_provider=MeterProvider(metric_readers=[reader]),
        logger_provider=logger_provider,
        capture_content=True,
        redact=redact,
        on_result=flagged,
        executor="thread",
    )

    print("1. requests (the app keeps each request's trace id)")
    served = []
    for route, question, passages, answer, thumb in TRAFFIC:
        with tracer.start_as_current_span(f"POST /chat/{route}") as span:
            trace_id = format(span.get_span_context().trace_id, "032x")
            # The thumbs-down arrives later in real life; the app then records with
            # always_score=True. Here the request already knows it, for brevity.
            monitor.record(
                question=question,
                contexts=passages,
                answer=answer,
                route=route,
                always_score=thumb == "down",
            )
        served.append((trace_id, route, answer, thumb))
        print(f"   {route:9} {trace_id[:12]}...  {answer}")
    monitor.force_flush()

    print("\n2. thumbs -> monitor.feedback(label=..., trace_id=<the request's trace id>)")
    for trace_id, route, _, thumb in served:
        if thumb is None:
            continue
        label = "hallucinated" if thumb == "down" else "grounded"
        monitor.feedback(label=label, trace_id=trace_id, comment=f"thumbs-{thumb}")
        print(f"   {route:9} thumbs-{thumb:4} -> {label}")
    # A thumbs-down on an answer this monitor never scored (served before it started, or
    # left out by the sampler): counted with the judge's label "unknown", outside agreement.
    monitor.feedback(label="hallucinated", trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    print("   (one more on a trace never scored: judge label unknown)")
    monitor.force_flush()
    events = [
        r.log_record
        for r in logs.get_finished_logs()
        if (r.log_record.attributes or {}).get("groundwatch.feedback.source")
    ]
    print(
        f"   {len(events)} gen_ai.evaluation.result events with "
        f"gen_ai.evaluation.evaluator.type=human, each in its request's trace"
    )

    print("\n3. judge-human agreement per route (groundwatch.feedback; unknown = not scored)")
    for route, (agreed, total) in sorted(agreement(reader).items()):
        print(f"   {route:9} {agreed} of {total} labelled answers agree ({agreed / total:.0%})")

    monitor.shutdown()
    rows = [json.loads(line) for line in flagged_path.read_text().splitlines()]
    print(f"\n4. {flagged_path.name}: {len(rows)} flagged rows, label empty for a person to fill")
    for row in rows:
        print(f"   {row['judge_label']:21} {row['answer']}")
    # The person's verdicts: here the users' thumbs stand in for a reviewer.
    thumbs = {trace_id: thumb for trace_id, _, _, thumb in served}
    labelled_path = out / "labelled.jsonl"
    with labelled_path.open("w") as f:
        for row in rows:
            thumb = thumbs.get(row["id"])
            row["label"] = "hallucinated" if thumb == "down" else "grounded"
            f.write(json.dumps(row) + "\n")
    print(f"   labelled -> {labelled_path}")

    print(f"\n5. groundwatch check {labelled_path.name} (the golden set for CI)\n")
    done = subprocess.run(
        [sys.executable, "-m", "groundwatch", "check", str(labelled_path)],
        text=True,
        capture_output=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    print(done.stdout)
    print(f"check exited {done.returncode} (1: the gate fails on the hallucinated answers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
