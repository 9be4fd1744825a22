"""The judge's probability and the random audit through the Redis queue: the app's monitor
sends, a real ``groundwatch worker`` scores, and both mark the same traces (issue #39)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanContext, TraceFlags

import groundwatch as gw
from groundwatch.rates import RateTotals
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from ..runtime.judges import known_probability
from .conftest import HARNESS, ROOT, RedisServer, metric_sum, wait_for

PASSAGES = ["The refund window is 30 days from delivery."]
N = 40
IMPORT = ("feedback", "import", "--audit-rate", "0.5")  # the app's and the worker's audit rate


def _answer(i: int) -> str:
    return f"The refund window is 30 days from delivery. Case {i}." if i % 2 else f"No {i}."


def test_a_worker_marks_the_traces_the_app_audits_and_carries_the_probability(
    capgw: GroundwatchTelemetry, redis_server: RedisServer, workers: Any, tmp_path: Path
) -> None:
    """The whole loop where a worker judges: the app audits nothing itself but knows which
    traces are audited; the worker marks them, writes them to --audit-file; people label the
    file; ``groundwatch feedback import`` brings the labels into the audit counters."""
    monitor = capgw.monitor(queue=gw.RedisQueue(redis_server.url), audit_rate=0.5)
    audit_file = tmp_path / "audit.jsonl"
    worker = workers(
        redis_server.url,
        "--judge",
        "probability",
        "--audit-rate",
        "50%",
        "--capture-content",
        "--audit-file",
        str(audit_file),
        env={"GW_TEST_PROBABILITY_JUDGE": "1"},
    )
    rng = random.Random(5)
    traces = {}
    for i in range(N):
        ctx = SpanContext(
            rng.getrandbits(128), rng.getrandbits(64), True, TraceFlags(TraceFlags.SAMPLED)
        )
        monitor.record(
            question="Refunds?",
            contexts=PASSAGES,
            answer=_answer(i),
            span_context=ctx,
            route="faq",
            attributes={"case": i},
        )
        traces[i] = ctx.trace_id
    assert monitor.force_flush(10_000)
    wait_for(lambda: len(worker.spans()) == N, 60, "every record scored by the worker")
    spans = [s for s in worker.spans() if s["name"] == sc.SPAN_EVALUATION]
    marked = 0
    for span in spans:
        attrs = span["attributes"]
        i = attrs["case"]
        assert span["trace_id"] == f"{traces[i]:032x}"
        assert attrs[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] == known_probability(_answer(i))
        # The worker's mark is the app's Monitor.audited (one hash, one rate, two processes).
        assert attrs.get(sc.GROUNDWATCH_AUDIT, False) == monitor.audited(traces[i])
        marked += monitor.audited(traces[i])
    assert 8 < marked < 32
    metrics = worker.terminate()
    # The worker's rate counters are the totals of what it judged.
    want = RateTotals.from_answers(
        [s["attributes"][sc.GROUNDWATCH_LABEL] == "hallucinated" for s in spans],
        [s["attributes"][sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] for s in spans],
    )
    route = {"groundwatch__route": "faq", "groundwatch__judge": "probability"}
    assert metric_sum(metrics, sc.METRIC_RATE_SCORED, **route) == want.scored == N
    assert metric_sum(metrics, sc.METRIC_RATE_FLAGGED, **route) == want.flagged
    assert (
        abs(metric_sum(metrics, sc.METRIC_RATE_PROBABILITY, **route) - want.probability_sum) < 1e-9
    )
    squares = metric_sum(metrics, sc.METRIC_RATE_PROBABILITY_SQUARES, **route)
    assert abs(squares - want.probability_square_sum) < 1e-9
    # The audit sums wait at 0 for the labels (groundwatch feedback import brings them).
    assert metric_sum(metrics, sc.METRIC_AUDIT_LABELLED, **route) == 0
    assert [p[0] for p in metrics[sc.METRIC_AUDIT_LABELLED]] == [
        {sc.GROUNDWATCH_ROUTE: "faq", sc.GROUNDWATCH_JUDGE: "probability"}
    ]

    # The worker wrote exactly the audited answers, with the verdict a label needs.
    rows = [json.loads(line) for line in audit_file.read_text().splitlines()]
    audited = {f"{traces[i]:032x}" for i in traces if monitor.audited(traces[i])}
    assert {row["trace_id"] for row in rows} == audited and len(rows) == marked
    for row in rows:
        assert row["audit"] is True and row["route"] == "faq" and row["judge"] == "probability"
        assert row["hallucination_probability"] == known_probability(row["answer"])
        row["label"] = "hallucinated" if row["answer"].startswith("No") else "grounded"
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "import"
    # At the audit rate the app and the worker audited at: the hash decides the audit labels.
    done = subprocess.run(
        [sys.executable, str(HARNESS), str(out), *IMPORT, str(labelled)],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    imported = json.loads(out.with_suffix(".metrics.json").read_text())
    want = RateTotals.from_answers(
        [row["judge_label"] == "hallucinated" for row in rows],
        [row["hallucination_probability"] for row in rows],
        [row["label"] == "hallucinated" for row in rows],
    )
    assert metric_sum(imported, sc.METRIC_AUDIT_LABELLED, **route) == want.labelled == marked
    assert metric_sum(imported, sc.METRIC_AUDIT_LABEL_SUM, **route) == want.label_sum
    assert metric_sum(imported, sc.METRIC_AUDIT_LABEL_FLAG, **route) == want.label_flag_sum
    probability = metric_sum(imported, sc.METRIC_AUDIT_LABEL_PROBABILITY, **route)
    assert abs(probability - want.label_probability_sum) < 1e-9


def test_an_audit_file_needs_content_and_a_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundwatch.cli import main

    monkeypatch.delenv("GROUNDWATCH_AUDIT_RATE", raising=False)
    path = str(tmp_path / "audit.jsonl")
    worker = ["worker", "--redis", "redis://127.0.0.1:1", "--group", "g", "--executor", "thread"]
    for argv, needs in (
        ([*worker, "--audit-rate", "0.1", "--no-capture-content", "--audit-file", path],
         "--capture-content"),
        ([*worker, "--capture-content", "--audit-file", path], "--audit-rate"),
        (["serve", "--port", "0", "--grpc-port", "off", "--audit-rate", "0.1",
          "--no-capture-content", "--audit-file", path], "--capture-content"),
    ):  # fmt: skip
        assert main(argv) == 2
        assert needs in capsys.readouterr().err
    assert not Path(path).exists()
