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
from groundwatch.rates import RateTotals, is_audited
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


def _import(
    rows: list[dict[str, Any]], into: GroundwatchTelemetry, audit_rate: float = 0.4
) -> Stats:
    """Import ``rows`` into ``into``'s providers; the returned counts must be kept alive while
    the metrics are read (the instruments hold their sources weakly, as a monitor's)."""
    summary = read_labels((json.dumps(row) for row in rows), audit_rate=audit_rate)
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


def _trace(audited: bool, rate: float, start: int = 1) -> str:
    """A trace id that the audit's hash puts in (or out of) the audit at ``rate``."""
    n = start
    while is_audited(n, rate) != audited:
        n += 1
    return f"{n:032x}"


def test_the_audit_hash_decides_which_rows_are_audit_labels(
    groundwatch_telemetry: GroundwatchTelemetry,
) -> None:
    rate = 0.5
    verdict = {"judge": "local", "judge_label": "grounded", "hallucination_probability": 0.3}
    audit = {"trace_id": _trace(True, rate), "label": "hallucinated", "audit": True, **verdict}
    unclaimed = {**audit, "trace_id": _trace(True, rate, 1000)}  # in the audit, says nothing
    del unclaimed["audit"]
    thumbs_down = {"trace_id": _trace(False, rate), "label": "hallucinated", **verdict}
    no_verdict = {"id": _trace(False, rate, 2000), "label": "unfaithful"}  # a golden-set row
    errored = {**thumbs_down, "trace_id": _trace(True, rate, 3000), "judge_label": "error"}
    unlabelled = {**audit, "trace_id": "4" * 32, "label": ""}
    again = dict(audit)  # the same answer, the same label: once
    rows = [audit, unclaimed, thumbs_down, no_verdict, errored, unlabelled, again]
    summary = read_labels((json.dumps(r) for r in rows), audit_rate=rate)
    assert summary.errors == []
    assert (len(summary.rows), summary.audit_labels) == (5, 2)
    assert summary.skipped == {"unlabelled": 1, "repeated": 1}
    stats = _import(rows, groundwatch_telemetry, audit_rate=rate)
    sums = _sums(groundwatch_telemetry)
    assert sums[sc.METRIC_AUDIT_LABELLED] == 2
    assert sums[sc.METRIC_AUDIT_LABEL_SUM] == 2
    assert sums[sc.METRIC_AUDIT_FLAGGED] == 0
    assert sums[sc.METRIC_AUDIT_PROBABILITY] == pytest.approx(0.6)
    assert groundwatch_telemetry.metric_total(sc.METRIC_FEEDBACK) == 5
    assert stats.audit.snapshot()


def test_rows_the_audit_contradicts_are_named_and_import_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a row claims, the hash decides; a row it contradicts, an unreadable audit
    value, disagreeing duplicates and malformed ids each fail the whole file (exit 1)."""
    rate = 0.5
    inside, outside = _trace(True, rate), _trace(False, rate)
    verdict = {"judge": "local", "judge_label": "hallucinated", "hallucination_probability": 0.8}
    good = {"trace_id": inside, "label": "grounded", "audit": True, **verdict}
    bad = {
        "not in the audit": {**good, "trace_id": outside},
        "audit must be true or false, got 'true'": {**good, "audit": "true"},
        "labelled hallucinated here and grounded on line 1": {**good, "label": "hallucinated"},
        "trace_id must be 32 hex digits": {**good, "trace_id": "xyz", "id": inside},
        "name different answers": {**good, "id": outside},
        "carries no judge_label": {"trace_id": _trace(True, rate, 500), "label": "grounded"},
        'says "audit": false': {**good, "trace_id": _trace(True, rate, 900), "audit": False},
    }
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [good, *bad.values()]))
    monkeypatch.setenv("GROUNDWATCH_AUDIT_RATE", "50%")  # the option's default
    assert main(["feedback", "import", "--dry-run", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"nothing imported: {len(bad)} rows cannot be read" in err
    for line, reason in enumerate(bad, 2):
        assert f"line {line}: " in err and reason in err, reason
    # The docs' in-process row shape outside the audit: feedback, named as such.
    path.write_text(json.dumps({"trace_id": outside, "label": "grounded"}) + "\n")
    assert main(["feedback", "import", "--dry-run", "--audit-rate", "0.5", str(path)]) == 0
    assert "would count 1 labels: 0 audit, 1 other feedback" in capsys.readouterr().out
    # No audit rate: a row claiming one says how to give it.
    monkeypatch.delenv("GROUNDWATCH_AUDIT_RATE")
    path.write_text(json.dumps(good) + "\n")
    assert main(["feedback", "import", "--dry-run", str(path)]) == 1
    assert "pass --audit-rate" in capsys.readouterr().err


def test_a_file_with_a_bad_row_imports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "labels.jsonl"
    good = {"trace_id": "a" * 32, "label": "grounded", "audit": True, "judge_label": "grounded"}
    rate = ["--audit-rate", "1"]
    bad = [
        "{not json",
        json.dumps({**good, "label": "maybe"}),
        json.dumps({**good, "hallucination_probability": 1.5}),
        json.dumps({**good, "trace_id": "xyz"}),
        json.dumps({**good, "judge_label": "meh"}),
    ]
    path.write_text("\n".join([json.dumps(good), *bad]) + "\n")
    assert main(["feedback", "import", *rate, str(path)]) == 1
    err = capsys.readouterr().err
    assert "nothing imported: 5 rows cannot be read" in err
    for line in range(2, 7):
        assert f"line {line}:" in err
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "label": ""}) + "\n")
    assert main(["feedback", "import", "--dry-run", *rate, str(path)]) == 0
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
        [sys.executable, str(HARNESS), str(out), "feedback", "import", "--audit-rate=1", str(path)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "6 labels: 6 audit, 0 other feedback" in done.stdout
    assert "the counts of 6 labels, the events of 6" in done.stdout
    metrics = json.loads(out.with_suffix(".metrics.json").read_text())
    attrs = {sc.GROUNDWATCH_ROUTE: "faq", sc.GROUNDWATCH_JUDGE: "local"}
    assert metrics[sc.METRIC_AUDIT_LABELLED] == [[attrs, 6]]
    assert metrics[sc.METRIC_AUDIT_LABEL_SUM] == [[attrs, 3]]
    assert metrics[sc.METRIC_AUDIT_FLAGGED] == [[attrs, 4]]
    assert metrics[sc.METRIC_AUDIT_PROBABILITY][0][1] == pytest.approx(1.5)
    nowhere = subprocess.run(
        [sys.executable, "-m", "groundwatch", "feedback", "import", "--audit-rate=1", str(path)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nowhere.returncode == 2
    assert "no telemetry destination" in nowhere.stderr
