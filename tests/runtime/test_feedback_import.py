"""``groundwatch feedback import``: labelled audit rows back into the same counters and events
as ``Monitor.feedback(source="audit")``, without the app's memory (issue #39 item 3)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import groundwatch as gw
from groundwatch.cli import main
from groundwatch.rates import RateTotals
from groundwatch.runtime.feedback_import import import_labels, read_labels
from groundwatch.telemetry import Stats, Telemetry
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import ProbabilityJudge
from .test_audit import _record_many

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tests" / "distributed" / "worker_main.py"
AUDIT_SUMS = (
    sc.METRIC_AUDIT_LABELLED,
    sc.METRIC_AUDIT_LABEL_SUM,
    sc.METRIC_AUDIT_FLAGGED,
    sc.METRIC_AUDIT_LABEL_FLAG,
    sc.METRIC_AUDIT_PROBABILITY,
    sc.METRIC_AUDIT_PROBABILITY_SQUARES,
    sc.METRIC_AUDIT_LABEL_PROBABILITY,
)


def _audit_rows(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> tuple[gw.Monitor, list[dict[str, Any]]]:
    """An app's monitor with an audit, and the rows its DatasetSink(when="audit") wrote."""
    sink = gw.DatasetSink(tmp_path / "audit.jsonl", when="audit")
    monitor = capgw.monitor(
        ProbabilityJudge(), audit_rate=0.4, capture_content=True, on_result=sink, route="faq"
    )
    _record_many(monitor, 80)
    assert monitor.force_flush(10_000)
    rows = [json.loads(line) for line in sink.path.read_text().splitlines()]
    assert len(rows) > 15
    return monitor, rows


def _sums(telemetry: GroundwatchTelemetry) -> dict[str, float]:
    return {name: telemetry.metric_total(name) for name in AUDIT_SUMS}


def _import(rows: list[dict[str, Any]], into: GroundwatchTelemetry) -> Stats:
    """Import ``rows`` into ``into``'s providers; the returned counts must be kept alive while
    the metrics are read (the instruments hold their sources weakly, as a monitor's)."""
    summary = read_labels(json.dumps(row) for row in rows)
    assert summary.errors == []
    stats = Stats(lambda: 0)
    telemetry = Telemetry(
        tracer_provider=into.tracer_provider,
        meter_provider=into.meter_provider,
        logger_provider=into.logger_provider,
        capture_content=False,
        redact=None,
        content_max_chars=100,
        stats=stats,
    )
    assert import_labels(summary.rows, telemetry, stats, meter_provider=into.meter_provider)
    return stats


def test_an_import_counts_what_monitor_feedback_counts(
    capgw: GroundwatchTelemetry, groundwatch_telemetry: GroundwatchTelemetry, tmp_path: Path
) -> None:
    monitor, rows = _audit_rows(capgw, tmp_path)
    rng = random.Random(3)
    for row in rows:
        row["label"] = rng.choice(["hallucinated", "grounded"])
        # In the app: the memory has the verdict.
        monitor.feedback(label=row["label"], trace_id=row["trace_id"], source="audit")
    assert monitor.force_flush(10_000)
    # Elsewhere (serve, worker): the rows carry the verdict.
    imported = groundwatch_telemetry
    stats = _import(rows, imported)
    assert _sums(imported) == pytest.approx(_sums(capgw))
    want = RateTotals.from_answers(
        [r["judge_label"] == "hallucinated" for r in rows],
        [r["hallucination_probability"] for r in rows],
        [r["label"] == "hallucinated" for r in rows],
    )
    assert _sums(imported)[sc.METRIC_AUDIT_LABELLED] == want.labelled == len(rows)
    assert _sums(imported)[sc.METRIC_AUDIT_LABEL_PROBABILITY] == pytest.approx(
        want.label_probability_sum
    )
    # The same feedback counter, and one event per label in the answer's trace.
    assert imported.metric_total(sc.METRIC_FEEDBACK) == len(rows)
    assert stats.audit.snapshot()
    events = imported.events()
    assert {f"{e.log_record.trace_id:032x}" for e in events} == {r["trace_id"] for r in rows}
    for event in events:
        attrs = dict(event.log_record.attributes or {})
        assert attrs[sc.GROUNDWATCH_AUDIT] is True
        assert attrs[sc.GROUNDWATCH_FEEDBACK_SOURCE] == "audit"
        assert attrs[sc.GROUNDWATCH_ROUTE] == "faq"


def test_rows_outside_the_audit_are_feedback_only(
    groundwatch_telemetry: GroundwatchTelemetry,
) -> None:
    trace = "0af7651916cd43dd8448eb211c80319c"
    audit = {
        "trace_id": trace,
        "label": "hallucinated",
        "audit": True,
        "judge": "local",
        "judge_label": "grounded",
        "hallucination_probability": 0.3,
        "route": "faq",
    }
    thumbs_down = {**audit, "trace_id": "1" * 32, "audit": False}
    no_verdict = {"id": "2" * 32, "label": "unfaithful"}  # a golden-set row: a label only
    errored = {**audit, "trace_id": "3" * 32, "judge_label": "error"}
    unlabelled = {**audit, "trace_id": "4" * 32, "label": ""}
    again = {**audit, "label": "grounded"}  # the same trace labelled twice
    lines = [json.dumps(r) for r in (audit, thumbs_down, no_verdict, errored, unlabelled, again)]
    summary = read_labels(lines)
    assert (len(summary.rows), summary.audit_labels, summary.repeated) == (5, 1, 1)
    assert summary.skipped == {"unlabelled": 1}
    stats = _import(
        [audit, thumbs_down, no_verdict, errored, unlabelled, again], groundwatch_telemetry
    )
    sums = _sums(groundwatch_telemetry)
    assert sums[sc.METRIC_AUDIT_LABELLED] == 1  # only the first audit label
    assert sums[sc.METRIC_AUDIT_LABEL_SUM] == 1
    assert sums[sc.METRIC_AUDIT_FLAGGED] == 0
    assert sums[sc.METRIC_AUDIT_PROBABILITY] == pytest.approx(0.3)
    assert groundwatch_telemetry.metric_total(sc.METRIC_FEEDBACK) == 5
    assert stats.audit.snapshot()


def test_a_file_with_a_bad_row_imports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "labels.jsonl"
    good = {"trace_id": "a" * 32, "label": "grounded", "audit": True, "judge_label": "grounded"}
    bad = [
        "{not json",
        json.dumps({**good, "label": "maybe"}),
        json.dumps({**good, "hallucination_probability": 1.5}),
        json.dumps({**good, "trace_id": "xyz"}),
        json.dumps({**good, "judge_label": "meh"}),
    ]
    path.write_text("\n".join([json.dumps(good), *bad]) + "\n")
    assert main(["feedback", "import", str(path)]) == 1
    err = capsys.readouterr().err
    assert "nothing imported: 5 rows cannot be read" in err
    for line in range(2, 7):
        assert f"line {line}:" in err
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "label": ""}) + "\n")
    assert main(["feedback", "import", "--dry-run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "would count 1 labels: 1 audit, 0 other feedback; skipped 1 unlabelled" in out
    assert main(["feedback", "import", str(tmp_path / "missing.jsonl")]) == 2


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROUNDWATCH_", "OTEL_"))}
    paths = [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return {**env, **extra}


def test_the_command_exports_the_audit_counters(tmp_path: Path) -> None:
    """The real command, with the OpenTelemetry SDK set up as under opentelemetry-instrument
    (the distributed tests' harness); without any destination it refuses."""
    path = tmp_path / "labels.jsonl"
    rows = [
        {
            "trace_id": f"{i + 1:032x}",
            "label": "hallucinated" if i % 2 else "grounded",
            "audit": True,
            "judge": "local",
            "judge_label": "hallucinated" if i % 3 else "grounded",
            "hallucination_probability": i / 10,
            "route": "faq",
        }
        for i in range(6)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "import"
    done = subprocess.run(
        [sys.executable, str(HARNESS), str(out), "feedback", "import", str(path)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "counted 6 labels: 6 audit, 0 other feedback" in done.stdout
    metrics = json.loads(out.with_suffix(".metrics.json").read_text())
    attrs = {sc.GROUNDWATCH_ROUTE: "faq", sc.GROUNDWATCH_JUDGE: "local"}
    assert metrics[sc.METRIC_AUDIT_LABELLED] == [[attrs, 6]]
    assert metrics[sc.METRIC_AUDIT_LABEL_SUM] == [[attrs, 3]]
    assert metrics[sc.METRIC_AUDIT_FLAGGED] == [[attrs, 4]]
    assert metrics[sc.METRIC_AUDIT_PROBABILITY][0][1] == pytest.approx(1.5)
    nowhere = subprocess.run(
        [sys.executable, "-m", "groundwatch", "feedback", "import", str(path)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nowhere.returncode == 2
    assert "no telemetry destination" in nowhere.stderr
