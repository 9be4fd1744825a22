"""The hallucination-rate estimate's inputs online (issue #39): the judge's probability on
every evaluation's span and events, the random audit (``audit_rate``), its labels coming back
(``feedback(source="audit")``) and the counters Prometheus adds across replicas."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanContext, TraceFlags

import groundwatch as gw
from groundwatch.rates import RateTotals
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import EchoJudge, ProbabilityJudge, RaisingJudge, known_probability

PASSAGES = ["The Eiffel Tower stands 330 metres tall. It was finished in 1889."]
GOOD = "The Eiffel Tower stands 330 metres tall."
BAD = "The Eiffel Tower stands 500 metres tall."


def _context(rng: random.Random) -> SpanContext:
    return SpanContext(
        rng.getrandbits(128) | 1,
        rng.getrandbits(64) | 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def _answers(n: int) -> list[str]:
    """``n`` distinct answers, some grounded, some not (distinct probabilities)."""
    return [f"{GOOD if i % 3 else BAD} Answer {i}." for i in range(n)]


def _record_many(monitor: gw.Monitor, n: int, seed: int = 39) -> list[SpanContext]:
    rng = random.Random(seed)
    contexts = []
    for answer in _answers(n):
        ctx = _context(rng)
        monitor.record(question="How tall?", contexts=PASSAGES, answer=answer, span_context=ctx)
        contexts.append(ctx)
    return contexts


def _events_by_span(capgw: GroundwatchTelemetry) -> dict[int, list[dict[str, Any]]]:
    events: dict[int, list[dict[str, Any]]] = {}
    for event in capgw.events():
        record = event.log_record
        if record.attributes and sc.GROUNDWATCH_FEEDBACK_SOURCE in record.attributes:
            continue  # a feedback event, not one of the evaluation's
        assert record.span_id is not None
        events.setdefault(record.span_id, []).append(dict(record.attributes or {}))
    return events


# --- item 1: the judge's probability, on every path ------------------------------------------


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_the_judges_probability_reaches_the_span_and_both_events(
    capgw: GroundwatchTelemetry, executor: str
) -> None:
    monitor = capgw.monitor(ProbabilityJudge(), executor=executor)
    _record_many(monitor, 6)
    results = capgw.results()
    assert len(results) == 6
    expected = {r.record_id: known_probability(r.answer) for r, _ in results}
    assert len(set(expected.values())) == 6, "distinct values: a swapped field would show"
    for record, evaluation in results:  # on_result sees it (the process path: from the codec)
        assert evaluation.hallucination_probability == expected[record.record_id]
    events = _events_by_span(capgw)
    spans = capgw.spans()
    assert len(spans) == 6
    for span in spans:
        attrs = dict(span.attributes or {})
        want = expected[attrs[sc.GROUNDWATCH_RECORD_ID]]
        assert attrs[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] == want
        assert sc.GROUNDWATCH_AUDIT not in attrs  # no audit by default
        mine = events[span.context.span_id]
        assert len(mine) == 2
        assert all(e[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] == want for e in mine)


def test_a_failed_evaluation_carries_no_probability(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(RaisingJudge(), audit_rate=1.0)
    monitor.record(question="q", contexts=PASSAGES, answer=GOOD)
    [span] = capgw.spans()
    attrs = dict(span.attributes or {})
    assert attrs[sc.GROUNDWATCH_LABEL] == "error"
    assert sc.GROUNDWATCH_HALLUCINATION_PROBABILITY not in attrs
    assert sc.GROUNDWATCH_AUDIT not in attrs, "an error is in no rate, so in no audit"
    assert capgw.metric_points(sc.METRIC_RATE_SCORED) == []


# --- item 2: the audit --------------------------------------------------------------------------


def test_the_audit_is_a_share_of_the_scored_traces_independent_of_the_sampler(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(EchoJudge(), sampler=gw.RatioSampler(0.5), audit_rate=0.5)
    contexts = _record_many(monitor, 800)
    spans = capgw.spans()
    assert 340 < len(spans) < 460  # the sampler's half
    events = _events_by_span(capgw)
    marked = 0
    for span in spans:
        trace_id = span.context.trace_id
        audited = bool((span.attributes or {}).get(sc.GROUNDWATCH_AUDIT))
        # What the span says is what Monitor.audited says, for the int and the hex string.
        assert audited == monitor.audited(trace_id) == monitor.audited(f"{trace_id:032x}")
        assert all(
            e.get(sc.GROUNDWATCH_AUDIT, False) == audited for e in events[span.context.span_id]
        )
        marked += audited
    # About half of what the sampler kept: the audit does not reuse the sampler's bits (which
    # would audit all of the sampled traces at a rate above the sampling rate, or none).
    assert 0.4 < marked / len(spans) < 0.6
    # Traces the sampler left out are answered too (a pure function of the trace id).
    scored = {s.context.trace_id for s in spans}
    left_out = [c for c in contexts if c.trace_id not in scored]
    assert 0.4 < sum(monitor.audited(c) for c in left_out) / len(left_out) < 0.6


def test_audited_reads_the_rate_from_the_environment_and_refuses_bad_ids(
    capgw: GroundwatchTelemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_AUDIT_RATE", "100%")
    monitor = capgw.monitor(EchoJudge())
    assert monitor.audit_rate == 1.0 and monitor.audited("0af7651916cd43dd8448eb211c80319c")
    assert not capgw.monitor(EchoJudge(), audit_rate=0.0).audited(12345)
    for bad in ("xyz", 0, None):
        with pytest.raises(ValueError, match="trace"):
            monitor.audited(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="audit_rate"):
        capgw.monitor(EchoJudge(), audit_rate=1.5)


def test_always_scored_records_are_not_in_the_audit_nor_the_rate(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(ProbabilityJudge(), audit_rate=1.0, route="faq")
    monitor.record(question="q", contexts=PASSAGES, answer=GOOD)
    monitor.record(question="q", contexts=PASSAGES, answer=BAD, always_score=True)
    spans = {dict(s.attributes or {})[sc.GROUNDWATCH_LABEL]: s for s in capgw.spans()}
    assert (spans["grounded"].attributes or {}).get(sc.GROUNDWATCH_AUDIT) is True
    # A thumbs-down scored on request is not a random sample: no audit mark, no rate count.
    assert sc.GROUNDWATCH_AUDIT not in (spans["hallucinated"].attributes or {})
    assert capgw.metric_total(sc.METRIC_RATE_SCORED) == 1
    assert capgw.metric_total(sc.METRIC_EVALUATIONS) == 2


def test_a_record_without_a_trace_is_audited_by_its_record_id(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(EchoJudge(), audit_rate=0.5)
    for answer in _answers(200):
        monitor.record(question="q", contexts=PASSAGES, answer=answer)
    marked = [bool((s.attributes or {}).get(sc.GROUNDWATCH_AUDIT)) for s in capgw.spans()]
    assert len(marked) == 200 and 0.35 < sum(marked) / 200 < 0.65


def test_dataset_sink_when_audit_keeps_exactly_the_audited_answers(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = gw.DatasetSink(path, when="audit")
    monitor = capgw.monitor(
        ProbabilityJudge(), audit_rate=0.3, capture_content=True, on_result=sink, route="faq"
    )
    _record_many(monitor, 120)
    monitor.record(question="q", contexts=PASSAGES, answer=BAD, always_score=True)
    spans = capgw.spans()
    audited = {
        f"{s.context.trace_id:032x}": dict(s.attributes or {})
        for s in spans
        if (s.attributes or {}).get(sc.GROUNDWATCH_AUDIT)
    }
    assert 20 < len(audited) < 55
    assert sink.flush(10)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert {row["trace_id"] for row in rows} == set(audited)
    assert len(rows) == len(audited)
    for row in rows:
        span = audited[row["trace_id"]]
        assert row["id"] == row["trace_id"]
        assert row["audit"] is True
        assert row["route"] == "faq" and row["judge"] == "probability"
        assert row["judge_label"] == span[sc.GROUNDWATCH_LABEL]
        assert row["hallucination_probability"] == known_probability(row["answer"])
        assert row["label"] == ""  # for a person to fill


def test_dataset_sink_when_audit_needs_an_audit_rate(
    capgw: GroundwatchTelemetry, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="audit_rate"):
        capgw.monitor(
            EchoJudge(),
            capture_content=True,
            on_result=gw.DatasetSink(tmp_path / "a.jsonl", when="audit"),
        )
    # Other sinks mark no row as an audit, even on an audited trace: they are not random.
    sink = gw.DatasetSink(tmp_path / "flagged.jsonl", when={"hallucinated"})
    monitor = capgw.monitor(EchoJudge(), audit_rate=1.0, capture_content=True, on_result=sink)
    monitor.record(question="q", contexts=PASSAGES, answer=BAD)
    assert monitor.force_flush(10_000)
    [row] = [json.loads(line) for line in sink.path.read_text().splitlines()]
    assert "audit" not in row and row["judge_label"] == "hallucinated"


# --- items 3 and 5: labels back, and the counters ------------------------------------------------


def _totals(capgw: GroundwatchTelemetry, route: str, judge: str) -> RateTotals:
    """RateTotals from the counters' values, as Prometheus rules read them."""

    def value(name: str) -> float:
        return capgw.metric_total(name, groundwatch__route=route, groundwatch__judge=judge)

    return RateTotals(
        scored=int(value(sc.METRIC_RATE_SCORED)),
        flagged=int(value(sc.METRIC_RATE_FLAGGED)),
        probability_sum=value(sc.METRIC_RATE_PROBABILITY),
        probability_square_sum=value(sc.METRIC_RATE_PROBABILITY_SQUARES),
        labelled=int(value(sc.METRIC_AUDIT_LABELLED)),
        label_sum=value(sc.METRIC_AUDIT_LABEL_SUM),
        labelled_flagged=int(value(sc.METRIC_AUDIT_FLAGGED)),
        label_flag_sum=value(sc.METRIC_AUDIT_LABEL_FLAG),
        labelled_probability_sum=value(sc.METRIC_AUDIT_PROBABILITY),
        labelled_probability_square_sum=value(sc.METRIC_AUDIT_PROBABILITY_SQUARES),
        label_probability_sum=value(sc.METRIC_AUDIT_LABEL_PROBABILITY),
    )


def _assert_equal_totals(got: RateTotals, want: RateTotals) -> None:
    for name, value in vars(want).items():
        assert getattr(got, name) == pytest.approx(value, abs=1e-9), name


def test_audit_labels_enter_the_counters_and_a_thumbs_down_never_does(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(ProbabilityJudge(), audit_rate=0.4, route="faq")
    _record_many(monitor, 60)
    results = capgw.results()
    # Before any label: the audit sums are there at 0 (increase() sees the first label).
    assert capgw.metric_points(sc.METRIC_AUDIT_LABELLED) == [
        ({sc.GROUNDWATCH_ROUTE: "faq", sc.GROUNDWATCH_JUDGE: "probability"}, 0)
    ]
    rng = random.Random(7)
    labels: list[bool | None] = []
    audited = not_audited = 0
    for record, _ in results:
        if monitor.audited(record.trace_id):
            human = rng.random() < 0.5
            labels.append(human)
            label = "hallucinated" if human else "grounded"
            monitor.feedback(label=label, trace_id=f"{record.trace_id:032x}", source="audit")
            # The same answer labelled again: counted as feedback, not twice in the audit.
            monitor.feedback(label="grounded", trace_id=record.trace_id, source="audit")
            audited += 1
        else:
            labels.append(None)
            # Not in the audit: a label said to come from it still stays out of the estimate.
            monitor.feedback(label="grounded", trace_id=record.trace_id, source="audit")
            not_audited += 1
        # A thumbs-down, on audited answers and others: feedback, never an audit label.
        monitor.feedback(label="hallucinated", trace_id=record.trace_id)
    assert audited > 10 and not_audited > 10
    assert monitor.force_flush(10_000)
    want = RateTotals.from_evaluations([e for _, e in results], labels)
    _assert_equal_totals(_totals(capgw, "faq", "probability"), want)
    assert want.labelled == audited and want.probability_sum > 0
    # Every call is still counted as feedback, as before.
    assert capgw.metric_total(sc.METRIC_FEEDBACK) == 3 * audited + 2 * not_audited
    # The audit label's event says so, with the judge's probability; the others do not.
    feedback = [
        dict(e.log_record.attributes or {})
        for e in capgw.events()
        if sc.GROUNDWATCH_FEEDBACK_SOURCE in (e.log_record.attributes or {})
    ]
    marked = [e for e in feedback if e.get(sc.GROUNDWATCH_AUDIT)]
    assert len(marked) == audited
    assert all(e[sc.GROUNDWATCH_FEEDBACK_SOURCE] == "audit" for e in marked)
    assert all(0 <= e[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] <= 1 for e in marked)
    assert len(feedback) == 3 * audited + 2 * not_audited


def test_rate_counters_by_route_and_judge_equal_the_rows_totals(
    capgw: GroundwatchTelemetry,
) -> None:
    """Two routes, two judges, two monitors on one meter provider (as two replicas would
    be in Prometheus): each (route, judge)'s counters are the totals of its own rows."""
    first = capgw.monitor(ProbabilityJudge(), route="faq")
    second = capgw.monitor(EchoJudge(), route="search")
    _record_many(first, 30, seed=1)
    _record_many(second, 20, seed=2)
    results = capgw.results()
    for route, judge in (("faq", "probability"), ("search", "echo")):
        rows = [e for r, e in results if r.route == route]
        assert len(rows) in (20, 30)
        _assert_equal_totals(_totals(capgw, route, judge), RateTotals.from_evaluations(rows))
    # No audit: no audit series at all.
    assert capgw.metric_points(sc.METRIC_AUDIT_LABELLED) == []


PROMETHEUS_NAMES = {
    sc.METRIC_RATE_SCORED: "groundwatch_rate_scored_total",
    sc.METRIC_RATE_FLAGGED: "groundwatch_rate_flagged_total",
    sc.METRIC_RATE_PROBABILITY: "groundwatch_rate_probability_total",
    sc.METRIC_RATE_PROBABILITY_SQUARES: "groundwatch_rate_probability_squares_total",
    sc.METRIC_AUDIT_LABELLED: "groundwatch_audit_labelled_total",
    sc.METRIC_AUDIT_LABEL_SUM: "groundwatch_audit_label_sum_total",
    sc.METRIC_AUDIT_FLAGGED: "groundwatch_audit_flagged_total",
    sc.METRIC_AUDIT_LABEL_FLAG: "groundwatch_audit_label_flag_total",
    sc.METRIC_AUDIT_PROBABILITY: "groundwatch_audit_probability_total",
    sc.METRIC_AUDIT_PROBABILITY_SQUARES: "groundwatch_audit_probability_squares_total",
    sc.METRIC_AUDIT_LABEL_PROBABILITY: "groundwatch_audit_label_probability_total",
}
"""The names the recording rules read (examples/prometheus), as the real exporter writes them."""


def test_the_counters_as_prometheus_scrapes_them(capgw: GroundwatchTelemetry) -> None:
    pytest.importorskip("opentelemetry.exporter.prometheus")
    monitor: gw.Monitor | None = None
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ..alerts.conftest import prometheus_reader

    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[prometheus_reader(registry)])
    try:
        monitor = gw.Monitor(
            ProbabilityJudge(),
            meter_provider=provider,
            tracer_provider=capgw.tracer_provider,
            logger_provider=capgw.logger_provider,
            executor="thread",
            shutdown_on_exit=False,
            audit_rate=1.0,
            route="faq",
        )
        contexts = _record_many(monitor, 4)
        assert monitor.force_flush(10_000)
        for i, ctx in enumerate(contexts[:3]):
            label = "hallucinated" if i else "grounded"
            monitor.feedback(label=label, trace_id=ctx.trace_id, source="audit")
        assert monitor.force_flush(10_000)
        samples = {
            sample.name: sample
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for sample in family.samples
            if sample.name.startswith(("groundwatch_rate_", "groundwatch_audit_"))
        }
    finally:
        if monitor is not None:
            monitor.shutdown()
        provider.shutdown()
    assert set(samples) == set(PROMETHEUS_NAMES.values())
    for sample in samples.values():
        assert sample.labels["groundwatch_route"] == "faq"
        assert sample.labels["groundwatch_judge"] == "probability"
    assert samples["groundwatch_rate_scored_total"].value == 4
    assert samples["groundwatch_audit_labelled_total"].value == 3
    assert samples["groundwatch_audit_label_sum_total"].value == 2
