"""The Monitor's parts: its options grouped by concern (the flat keywords still work), the route
of record_decision/record_failure on their counters, and one audit decision per record that
the span, the events, the verdict memory, a DatasetSink and ``Monitor.audited`` all share."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from opentelemetry.trace import SpanContext, TraceFlags

import groundwatch as gw
from groundwatch.rates import _audit
from groundwatch.runtime.sampling import Decision
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .judges import EchoJudge, ProbabilityJudge

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


# --- the route on every decision ----------------------------------------------------------------


def test_record_decision_and_record_failure_put_the_route_on_their_counters(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(EchoJudge(), route="app")
    monitor.record_decision(Decision.NOT_SAMPLED, route="faq")
    monitor.record_decision(Decision.NOT_SAMPLED, route="faq")
    monitor.record_decision(Decision.THROTTLED)  # the monitor's route
    monitor.record_decision(Decision.ERROR, route="faq")  # the sampler raised
    monitor.record_failure("TimeoutError", route="faq")
    monitor.record_failure("ValueError")
    monitor.record(question="q", contexts=PASSAGES, answer=GOOD, route="faq")
    monitor.record(question="q", contexts=PASSAGES, answer=GOOD)
    capgw.flush()
    points = sorted(
        (
            a.get(sc.GROUNDWATCH_ROUTE),
            a[sc.GROUNDWATCH_DECISION],
            a.get(sc.ERROR_TYPE, ""),
            v,
        )
        for a, v in capgw.metric_points(sc.METRIC_RECORDS)
    )
    assert points == [
        ("app", "error", "ValueError", 1),
        ("app", "sampled", "", 1),
        ("app", "throttled", "", 1),
        ("faq", "error", "TimeoutError", 1),
        ("faq", "error", "sampler_error", 1),
        ("faq", "not_sampled", "", 2),
        ("faq", "sampled", "", 1),
    ]
    # The snapshot for people and tests still adds up by decision.
    decisions, _ = monitor.stats.snapshot()
    assert decisions[("not_sampled", None)] == 2 and decisions[("sampled", None)] == 2


def test_a_decision_without_any_route_has_no_route_attribute(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(EchoJudge())
    monitor.record_decision(Decision.NOT_SAMPLED)
    monitor.record_failure("TimeoutError")
    capgw.flush()
    assert sorted(
        (a[sc.GROUNDWATCH_DECISION], v) for a, v in capgw.metric_points(sc.METRIC_RECORDS)
    ) == [("error", 1), ("not_sampled", 1)]
    assert all(sc.GROUNDWATCH_ROUTE not in a for a, _ in capgw.metric_points(sc.METRIC_RECORDS))


# --- one audit decision per record --------------------------------------------------------------


def test_the_audit_is_decided_once_per_record_and_everyone_agrees(
    capgw: GroundwatchTelemetry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = _audit.is_audited

    def counted(key: int, audit_rate: float) -> bool:
        calls.append(key)
        return real(key, audit_rate)

    monkeypatch.setattr(_audit, "is_audited", counted)
    path = tmp_path / "audit.jsonl"
    sink = gw.DatasetSink(path, when="audit")
    monitor = capgw.monitor(
        ProbabilityJudge(), audit_rate=0.5, capture_content=True, on_result=sink
    )
    rng = random.Random(7)
    traced = [_context(rng) for _ in range(60)]
    for i, ctx in enumerate(traced):
        answer = f"{GOOD if i % 3 else BAD} Answer {i}."
        monitor.record(question="How tall?", contexts=PASSAGES, answer=answer, span_context=ctx)
    for i in range(40):  # outside any span: keyed by the record id
        monitor.record(question="How tall?", contexts=PASSAGES, answer=f"{GOOD} Plain {i}.")
    capgw.flush()
    assert sink.flush(10)
    # One hash per judged record: the span, the events, the memory and the sink share it.
    assert len(calls) == 100

    spans = capgw.spans()
    on_span = {
        s.context.trace_id: bool((s.attributes or {}).get(sc.GROUNDWATCH_AUDIT)) for s in spans
    }
    memory = monitor._feedback.memory
    assert memory is not None
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    in_sink = {row["id"] for row in rows}
    for ctx in traced:
        audited = on_span[ctx.trace_id]
        verdict = memory.recall(ctx.trace_id)
        assert verdict is not None and verdict.audited == audited
        assert monitor.audited(ctx.trace_id) == audited
        assert monitor.audited(f"{ctx.trace_id:032x}") == audited
        assert (f"{ctx.trace_id:032x}" in in_sink) == audited
    # Records without a trace: the span and the sink agree on the same key (the record id).
    by_record = {
        (s.attributes or {}).get(sc.GROUNDWATCH_RECORD_ID): bool(
            (s.attributes or {}).get(sc.GROUNDWATCH_AUDIT)
        )
        for s in spans
        if s.context.trace_id not in {c.trace_id for c in traced}
    }
    assert len(by_record) == 40 and 5 < sum(by_record.values()) < 35
    assert {r for r, audited in by_record.items() if audited} == in_sink - {
        f"{c.trace_id:032x}" for c in traced
    }
    events_audited = {
        e.log_record.attributes.get(sc.GROUNDWATCH_AUDIT, False)  # type: ignore[union-attr]
        for e in capgw.events()
    }
    assert events_audited == {True, False}


def test_the_audit_key_is_the_trace_id_else_a_digest_of_the_record_id() -> None:
    from groundwatch.telemetry._rate_counters import audit_key

    assert audit_key(0x0AF7651916CD43DD8448EB211C80319C, "ab") == 0x0AF7651916CD43DD8448EB211C80319C
    assert audit_key(0, "00f067aa0ba902b7") == audit_key(0, "00f067aa0ba902b7") > 0
    assert audit_key(0, "00f067aa0ba902b7") != audit_key(0, "00f067aa0ba902b8")


# --- the options, grouped; the flat keywords kept -----------------------------------------------


def test_every_flat_keyword_still_works_and_lands_in_its_group(
    capgw: GroundwatchTelemetry,
) -> None:
    # The 21 keyword arguments Monitor has always taken, each given once.
    sink = gw.DatasetSink(Path("/dev/null"))
    monitor = gw.Monitor(
        EchoJudge(),
        gw.RatioSampler(1.0),
        tracer_provider=capgw.tracer_provider,
        meter_provider=capgw.meter_provider,
        logger_provider=capgw.logger_provider,
        max_queue_size=7,
        on_result=[sink],
        capture_content=True,
        redact=str.upper,
        route="faq",
        max_concurrency=3,
        evaluation_timeout_millis=1234,
        executor="thread",
        policy=gw.LabelPolicy(),
        content_max_chars=99,
        shutdown_on_exit=False,
        processes=2,
        queue=None,
        export_from_worker=False,
        feedback_memory=5,
        audit_rate=0.25,
    )
    try:
        assert monitor.executor == "thread" and monitor.route == "faq"
        assert monitor.audit_rate == 0.25 and monitor._feedback.memory is not None
        assert monitor._feedback.memory.capacity == 5
        assert monitor._worker.max_queue_size == 7
        telemetry = monitor._telemetry
        assert telemetry.capture_content and telemetry.content_max_chars == 99
        assert telemetry.redact is str.upper
    finally:
        monitor.shutdown()


def test_the_groups_make_the_same_monitor_as_the_flat_keywords(
    capgw: GroundwatchTelemetry,
) -> None:
    grouped = capgw.monitor(
        EchoJudge(),
        scoring=gw.ScoringOptions(executor="thread", evaluation_timeout_millis=1234),
        capture=gw.CaptureOptions(capture_content=True, content_max_chars=99),
        audit=gw.AuditOptions(audit_rate=0.25, feedback_memory=5),
        queueing=gw.QueueOptions(max_queue_size=7),
    )
    flat = capgw.monitor(
        EchoJudge(),
        executor="thread",
        evaluation_timeout_millis=1234,
        capture_content=True,
        content_max_chars=99,
        audit_rate=0.25,
        feedback_memory=5,
        max_queue_size=7,
    )
    for monitor in (grouped, flat):
        assert monitor.executor == "thread" and monitor.audit_rate == 0.25
        assert monitor._worker.max_queue_size == 7
        assert monitor._telemetry.content_max_chars == 99
        assert monitor._feedback.memory is not None and monitor._feedback.memory.capacity == 5
    # A group and flat keywords of other fields combine.
    mixed = capgw.monitor(EchoJudge(), audit=gw.AuditOptions(audit_rate=0.5), max_queue_size=3)
    assert mixed.audit_rate == 0.5 and mixed._worker.max_queue_size == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"audit": gw.AuditOptions(audit_rate=0.1), "audit_rate": 0.2}, TypeError, "both"),
        ({"max_queue": 3}, TypeError, "unexpected keyword argument 'max_queue'"),
        ({"scoring": gw.CaptureOptions()}, TypeError, "ScoringOptions"),
        ({"max_queue_size": 0}, ValueError, "max_queue_size must be >= 1"),
        ({"audit_rate": 1.5}, ValueError, "audit_rate must be a share within"),
        ({"executor": "gpu"}, ValueError, "executor must be one of"),
    ],
)
def test_options_that_cannot_work_are_refused_by_their_group(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        gw.Monitor(EchoJudge(), shutdown_on_exit=False, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="processes must be >= 1"):
        gw.ScoringOptions(processes=0)
