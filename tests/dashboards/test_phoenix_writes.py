"""What PhoenixSink writes for an evaluation, before anything is sent (no server needed): the
annotator kind per judge, claims named without content capture and quoted through the redact
hook with it, and the ``--sink phoenix`` option of ``serve`` and ``worker``."""

from __future__ import annotations

import pytest

import groundwatch as gw
from groundwatch.dashboards import SINKS
from groundwatch.dashboards.phoenix import PhoenixSink, annotator_kind
from groundwatch.telemetry import semconv as sc
from groundwatch.types import Claim, Evaluation, Evidence, RagRecord, Usage

from .conftest import LostWrites

CONTEXTS = ["The museum opens at 9am and closes at 5pm.", "Entry is free on Sundays."]
ANSWER = "The museum opens at 9am. Entry costs 20 euros on Sundays. Parking is free."


def record() -> RagRecord:
    return RagRecord(
        question="When does the museum open?",
        contexts=CONTEXTS,
        answer=ANSWER,
        route="museum",
        record_id="0123456789abcdef",
        trace_id=0x1234,
        span_id=0xABCD,
    )


def evaluation(**update: object) -> Evaluation:
    ev = gw.evaluate(ANSWER, CONTEXTS, question="When does the museum open?")
    return ev.model_copy(update=update) if update else ev


def bodies(sink: PhoenixSink, ev: Evaluation) -> dict[str, dict[str, object]]:
    return {
        w.body["name"]: w.body for w in sink.evaluation_writes(record(), ev) if w.kind == "span"
    }


def test_annotator_kind_is_llm_when_a_language_model_judged_and_code_otherwise() -> None:
    assert annotator_kind(Evaluation(label="grounded", judge="local")) == "CODE"
    assert annotator_kind(Evaluation(label="grounded", judge="hhem")) == "CODE"
    llm = Evaluation(label="grounded", judge="openai", usage=Usage(input_tokens=90, calls=1))
    assert annotator_kind(llm) == "LLM"
    # A cascade that escalated to the LLM judge used tokens; one that did not, none.
    escalated = Evaluation(label="grounded", judge="cascade(local,openai)", usage=Usage(calls=1))
    assert annotator_kind(escalated) == "LLM"
    assert annotator_kind(Evaluation(label="grounded", judge="cascade(local,openai)")) == "CODE"


def test_without_content_capture_claims_are_named_by_place_not_quoted() -> None:
    ev = evaluation()
    assert ev.verdict_counts["unsupported"] + ev.verdict_counts["contradicted"] >= 1
    sink = PhoenixSink("http://127.0.0.1:9", "p")
    written = bodies(sink, ev)
    assert set(written) == {"groundedness", "faithfulness", "hallucination"}
    explanation = str(written["groundedness"]["result"]["explanation"])  # type: ignore[index]
    assert "claim 2 (answer[" in explanation
    assert "20 euros" not in explanation and "Parking" not in explanation
    assert all(b["span_id"] == f"{0xABCD:016x}" for b in written.values())
    assert all(b["identifier"] == "groundwatch" for b in written.values())
    sink.shutdown(100)


def test_with_content_capture_claims_are_quoted_through_the_redact_hook() -> None:
    sink = PhoenixSink("http://127.0.0.1:9", "p")
    sink.bind_monitor(capture_content=True, redact=lambda t: t.replace("euros", "[currency]"))
    explanation = str(bodies(sink, evaluation())["faithfulness"]["result"]["explanation"])  # type: ignore[index]
    assert "20 [currency]" in explanation and "euros" not in explanation
    sink.shutdown(100)


def test_a_failed_judge_says_only_its_error_type_without_content_capture() -> None:
    sink = PhoenixSink("http://127.0.0.1:9", "p")
    failed = Evaluation(
        label="error",
        judge="openai",
        error="http_401: the key sk-abc123 was refused for 'When does the museum open?'",
        error_type="http_401",
        explanation="judge failed: http_401: the key sk-abc123 was refused",
    )
    written = bodies(sink, failed)
    assert written["groundedness"]["result"] == {  # no score: there is none
        "label": "error",
        "explanation": "judge failed: http_401",
    }
    assert written["groundedness"]["metadata"]["error_type"] == "http_401"  # type: ignore[index]
    sink.shutdown(100)


def test_document_support_says_which_claims_each_passage_backed() -> None:
    claims = [
        Claim(
            text="a", verdict="supported", evidence=[Evidence(passage=1, start=0, end=1, quote="x")]
        ),
        Claim(text="b", verdict="unsupported"),
        Claim(
            text="c",
            verdict="contradicted",
            evidence=[Evidence(passage=0, start=0, end=1, quote="y")],
        ),
        Claim(
            text="d", verdict="inferred", evidence=[Evidence(passage=1, start=0, end=1, quote="z")]
        ),
    ]
    sink = PhoenixSink("http://127.0.0.1:9", "p")
    [documents] = [
        w
        for w in sink.evaluation_writes(record(), Evaluation(label="hallucinated", claims=claims))
        if w.kind == "documents"
    ]
    assert documents.body["support"] == {
        1: {"supported": [1, 4], "contradicted": []},
        0: {"supported": [], "contradicted": [3]},
    }
    assert documents.body["passages"] == CONTEXTS  # matched here, never sent
    sink.shutdown(100)


def test_a_record_outside_any_trace_is_counted_not_written(lost: LostWrites) -> None:
    sink = PhoenixSink("http://127.0.0.1:9", "p")
    sink(RagRecord(question="q", contexts=["c"], answer="a"), evaluation())
    assert lost.counts("phoenix") == {"invalid_input": 1}
    assert sink.delivery.pending() == 0
    sink.shutdown(100)


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_serve_and_worker_take_sink_phoenix(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from groundwatch.cli import build_parser

    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", "http://phoenix.internal:6006")
    monkeypatch.setenv("PHOENIX_PROJECT_NAME", "support-bot")
    extra = ["--redis", "redis://127.0.0.1:1", "--group", "g"] if command == "worker" else []
    args = build_parser().parse_args([command, *extra, "--sink", "phoenix"])
    module = __import__(
        f"groundwatch.{'queue' if command == 'worker' else 'serve'}.cli", fromlist=["_sinks"]
    )
    [sink] = module._sinks(args)
    assert isinstance(sink, PhoenixSink)
    assert (sink.endpoint, sink.project) == ("http://phoenix.internal:6006", "support-bot")
    assert build_parser().parse_args([command, *extra]).sink == []
    assert "phoenix" in SINKS and "phoenix" in sc.ERROR_COMPONENTS
    sink.shutdown(100)


def test_monitor_feedback_reaches_a_sink_among_its_on_result(lost: LostWrites) -> None:
    sink = PhoenixSink("http://127.0.0.1:9", "p", retry_window_millis=0)
    given: list[object] = []
    build = sink.feedback_writes

    def feedback_writes(feedback: object) -> list[object]:
        given.append(feedback)
        return build(feedback)  # type: ignore[arg-type]

    sink.feedback_writes = feedback_writes  # type: ignore[method-assign,assignment]
    monitor = gw.Monitor(on_result=sink, shutdown_on_exit=False)
    monitor.feedback(label="hallucinated", trace_id="ab" * 16, source="support-desk")
    monitor.force_flush(5_000)
    [feedback] = given
    assert feedback.label == "hallucinated" and feedback.source == "support-desk"  # type: ignore[attr-defined]
    # No span known for that trace: a trace annotation, as HUMAN.
    [write] = build(feedback)  # type: ignore[arg-type]
    assert write.kind == "trace"
    assert write.body["trace_id"] == "ab" * 16 and write.body["annotator_kind"] == "HUMAN"
    monitor.shutdown(1_000)
