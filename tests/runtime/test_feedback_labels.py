"""Audit labels are never lost in-process (issue #45 item 3): a record made outside a span gets
its label back by the id its audit row carries, ``source`` is matched as documented, every bad
``feedback()`` call warns (rate-limited per kind of mistake), and ``audit_rate`` reads "2%"."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import groundwatch as gw
from groundwatch._shared import guard
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import ProbabilityJudge
from .test_audit import PASSAGES, _answers


def test_a_record_made_outside_a_span_gets_its_audit_label_back_by_its_row_id(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    sink = gw.DatasetSink(tmp_path / "audit.jsonl", when="audit")
    monitor = capgw.monitor(
        ProbabilityJudge(), audit_rate=0.5, capture_content=True, on_result=sink, route="faq"
    )
    for answer in _answers(40):
        monitor.record(question="How tall?", contexts=PASSAGES, answer=answer)  # no span
    assert monitor.force_flush(10_000)
    rows = [json.loads(line) for line in sink.path.read_text().splitlines()]
    assert len(rows) > 8 and all(row["trace_id"] is None for row in rows)
    assert all(len(row["id"]) == 16 for row in rows)  # the record id
    assert all(monitor.audited(row["id"]) for row in rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", guard.LossWarning)  # not one refused
        for row in rows:
            monitor.feedback(label="hallucinated", trace_id=row["id"], source="audit")
    assert monitor.force_flush(10_000)
    assert capgw.metric_total(sc.METRIC_AUDIT_LABELLED) == len(rows)
    assert capgw.metric_total(sc.METRIC_AUDIT_PROBABILITY) == pytest.approx(
        sum(row["hallucination_probability"] for row in rows)
    )
    events = [
        e.log_record
        for e in capgw.events()
        if (e.log_record.attributes or {}).get(sc.GROUNDWATCH_FEEDBACK_SOURCE) == "audit"
    ]
    assert len(events) == len(rows)
    assert all(e.attributes[sc.GROUNDWATCH_AUDIT] is True for e in events)  # type: ignore[index]
    assert all(e.trace_id in (0, None) for e in events)  # no trace to put them in


@pytest.mark.parametrize("source", ["Audit", " AUDIT "])
def test_source_is_matched_as_documented(capgw: GroundwatchTelemetry, source: str) -> None:
    monitor = capgw.monitor(ProbabilityJudge(), audit_rate=1.0, route="faq")
    with capgw.tracer.start_as_current_span("request") as span:
        monitor.record(question="How tall?", contexts=PASSAGES, answer=_answers(1)[0])
    assert monitor.force_flush(10_000)
    monitor.feedback(label="grounded", span_context=span.get_span_context(), source=source)
    assert monitor.force_flush(10_000)
    assert capgw.metric_total(sc.METRIC_AUDIT_LABELLED) == 1
    [event] = [
        e.log_record.attributes or {}
        for e in capgw.events()
        if sc.GROUNDWATCH_FEEDBACK_SOURCE in (e.log_record.attributes or {})
    ]
    assert event[sc.GROUNDWATCH_FEEDBACK_SOURCE] == "audit"


def _said(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, guard.LossWarning)]


def test_every_kind_of_bad_feedback_call_warns_rate_limited_per_kind(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "_last_logged", {})
    monitor = capgw.monitor(ProbabilityJudge(), audit_rate=1.0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        monitor.feedback(label="meh", trace_id=1)
        monitor.feedback(label="grounded", trace_id="xyz")  # another mistake: said too
        monitor.feedback(label="grounded", trace_id=1, score=float("nan"))
        monitor.feedback(label="grounded", trace_id=2, source="audit")  # never scored
        monitor.feedback("grounded")  # type: ignore[misc]
        monitor.feedback(label="nope", trace_id=1)  # the same kind within the minute: once
    said = _said(record)
    assert len(said) == 5, said
    assert "label must be one of" in said[0] and "trace_id must be 32 hex" in said[1]
    assert "score" in said[2] and "source='audit'" in said[3] and "keyword" in said[4]
    # Rate-limited, not once per process: past the interval, the same kind is said again.
    monkeypatch.setattr(guard, "LOG_INTERVAL_S", 0.0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        monitor.feedback(label="nope", trace_id=1)
        monitor.feedback(label="nope", trace_id=1)
    assert len(_said(record)) == 2
    assert capgw.metric_total(sc.METRIC_FEEDBACK, error__type="invalid_input") == 7
    monitor.shutdown()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        monitor.feedback(label="grounded", trace_id=1)
    assert ["after shutdown()" in w for w in _said(record)] == [True]


def test_audit_rate_reads_like_the_environment_variable(capgw: GroundwatchTelemetry) -> None:
    assert capgw.monitor(ProbabilityJudge(), audit_rate="2%").audit_rate == pytest.approx(0.02)
    assert capgw.monitor(ProbabilityJudge(), audit_rate="0.3").audit_rate == pytest.approx(0.3)
    for bad in ("200%", "two", -0.1, True):
        with pytest.raises(ValueError, match="audit_rate"):
            capgw.monitor(ProbabilityJudge(), audit_rate=bad)
