"""MLflowSink without a server: configuration from MLflow's own variables (credentials never
shown), and the assessments it builds (names, source types, ids, rationale, feedback)."""

from __future__ import annotations

from typing import Any

import pytest

import groundwatch as gw
from groundwatch.dashboards.mlflow import MLflowSink
from groundwatch.runtime.feedback import Pending
from groundwatch.types import Claim, Evaluation, RagRecord, Usage

from .conftest import LostWrites

TRACE = 0x0AF7651916CD43DD8448EB211C80319C
SPAN = 0xB7AD6B7169203331
URL = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def _no_mlflow_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "MLFLOW_TRACKING_URI",
        "MLFLOW_EXPERIMENT_NAME",
        "MLFLOW_EXPERIMENT_ID",
        "MLFLOW_TRACKING_TOKEN",
        "MLFLOW_TRACKING_USERNAME",
        "MLFLOW_TRACKING_PASSWORD",
    ):
        monkeypatch.delenv(name, raising=False)


def evaluation(judge: str = "local", usage: Usage | None = None, **fields: Any) -> Evaluation:
    claims = [
        Claim(text="Refunds take 30 days.", verdict="supported"),
        Claim(text="Shipping is free on weekends.", verdict="unsupported"),
        Claim(text="Refunds take 90 days.", verdict="contradicted"),
    ]
    values: dict[str, Any] = {
        "label": "hallucinated",
        "groundedness": 1 / 3,
        "faithfulness": 2 / 3,
        "claims": claims,
        "judge": judge,
        "usage": usage,
        "explanation": "1 supported, 0 inferred, 1 unsupported, 1 contradicted of 3 claims",
        "hallucination_probability": 0.8125,
        **fields,
    }
    return Evaluation(**values)


def assessments(sink: MLflowSink, ev: Evaluation, route: str | None = "faq") -> dict[str, Any]:
    record = RagRecord(answer="a", route=route, trace_id=TRACE, span_id=SPAN)
    return {w.body[1]["assessment_name"]: w for w in sink.evaluation_writes(record, ev)}


def test_each_evaluation_is_three_assessments_on_the_records_span() -> None:
    writes = assessments(MLflowSink(URL), evaluation())
    assert set(writes) == {"groundedness", "faithfulness", "hallucination"}
    for write in writes.values():
        trace, body = write.body
        assert trace == f"tr-{TRACE:032x}" == body["trace_id"]
        assert body["span_id"] == f"{SPAN:016x}"
        assert body["assessment_id"] == write.key and write.key.startswith("a-")
        assert len(write.key) == 34
        assert body["source"] == {"source_type": "CODE", "source_id": "groundwatch/local"}
        metadata = dict(body["metadata"])
        assert metadata.pop("judge") == "local"
        assert metadata.pop("label") == "hallucinated"
        assert metadata.pop("route") == "faq"
        assert metadata.pop("audit") == "false"
        assert metadata.pop("hallucination_probability") == "0.8125"
        assert metadata == {}
        assert all(isinstance(v, str) for v in body["metadata"].values())  # MLflow's map<string>
    assert writes["groundedness"].body[1]["feedback"] == {"value": 1 / 3}
    assert writes["faithfulness"].body[1]["feedback"] == {"value": 2 / 3}
    assert writes["hallucination"].body[1]["feedback"] == {"value": "hallucinated"}
    assert len({w.key for w in writes.values()}) == 3


def test_ids_are_the_same_on_every_try_and_in_every_process() -> None:
    first = assessments(MLflowSink(URL), evaluation())
    again = assessments(MLflowSink("http://other:5000"), evaluation(label="grounded"))
    assert {n: w.key for n, w in first.items()} == {n: w.key for n, w in again.items()}


@pytest.mark.parametrize(
    ("judge", "usage", "source_type"),
    [
        ("local", None, "CODE"),
        ("hhem", None, "CODE"),
        ("lettucedetect", None, "CODE"),
        ("openai", None, "LLM_JUDGE"),  # a cached answer: no tokens, still an LLM's verdict
        ("gpt-4o-judge", Usage(input_tokens=900, output_tokens=80, calls=1), "LLM_JUDGE"),
        ("cascade(local,openai)", None, "CODE"),  # the local judge decided
        ("cascade(local,openai)", Usage(input_tokens=900, output_tokens=80, calls=1), "LLM_JUDGE"),
    ],
)
def test_the_source_type_says_who_judged(judge: str, usage: Usage | None, source_type: str) -> None:
    writes = assessments(MLflowSink(URL), evaluation(judge=judge, usage=usage))
    sources = {w.body[1]["source"]["source_type"] for w in writes.values()}
    assert sources == {source_type}


def test_the_rationale_names_claims_and_quotes_them_only_with_capture_on() -> None:
    sink = MLflowSink(URL)
    rationale = assessments(sink, evaluation())["groundedness"].body[1]["rationale"]
    assert rationale == (
        "1 supported, 0 inferred, 1 unsupported, 1 contradicted of 3 claims. "
        "contradicted: claim 3. unsupported: claim 2"
    )
    sink.bind_monitor(capture_content=True, redact=lambda t: t.replace("weekends", "[day]"))
    rationale = assessments(sink, evaluation())["groundedness"].body[1]["rationale"]
    assert 'contradicted: claim 3 "Refunds take 90 days."' in rationale
    assert 'unsupported: claim 2 "Shipping is free on [day]."' in rationale


def test_an_answer_without_scores_gets_its_label_only_and_a_failure_says_why() -> None:
    sink = MLflowSink(URL)
    no_claims = Evaluation(label="no_claims", judge="local", explanation="no checkable claim")
    assert set(assessments(sink, no_claims)) == {"hallucination"}
    failed = Evaluation(label="error", judge="openai", error="HTTP 503", error_type="http_503")
    (write,) = assessments(sink, failed).values()
    assert write.body[1]["feedback"] == {
        "value": "error",
        "error": {"error_code": "http_503", "error_message": "HTTP 503"},
    }
    assert write.body[1]["metadata"]["error_type"] == "http_503"


def test_an_evaluation_without_a_trace_is_counted_not_sent(lost: LostWrites) -> None:
    sink = MLflowSink(URL)
    assert sink.evaluation_writes(RagRecord(answer="a"), evaluation()) == []
    assert lost.counts("mlflow") == {"invalid_input": 1}
    assert sink.delivery.lost == 1


def pending(**fields: Any) -> Pending:
    values: dict[str, Any] = {
        "trace_id": TRACE,
        "span_id": SPAN,
        "trace_flags": 1,
        "name": "groundedness",
        "label": "hallucinated",
        "score": None,
        "source": "human",
        "comment": "wrong, see sk-abcdefghijklmnopqrstuvwxyz123456",
        "judge_label": "grounded",
        "route": "faq",
        "timestamp_ns": 0,
        **fields,
    }
    return Pending(**values)


def test_feedback_is_human_with_an_id_drawn_once_per_call() -> None:
    sink = MLflowSink(URL)
    (label,) = sink.feedback_writes(pending())
    trace, body = label.body
    assert trace == f"tr-{TRACE:032x}"
    assert body["assessment_name"] == "hallucination"
    assert body["feedback"] == {"value": "hallucinated"}
    assert body["source"] == {"source_type": "HUMAN", "source_id": "human"}
    assert body["span_id"] == f"{SPAN:016x}"
    assert body["metadata"] == {
        "feedback_name": "groundedness",
        "feedback_source": "human",
        "judge_label": "grounded",
        "route": "faq",
    }
    assert "rationale" not in body  # the comment is content
    (again,) = sink.feedback_writes(pending())
    assert again.key != label.key  # two people's thumbs-down are two assessments

    sink.bind_monitor(capture_content=True, redact=None)
    scored = sink.feedback_writes(pending(score=0.0, span_id=0, source="audit"))
    assert [(w.body[1]["assessment_name"], w.body[1]["feedback"]["value"]) for w in scored] == [
        ("hallucination", "hallucinated"),
        ("groundedness", 0.0),
    ]
    for write in scored:
        assert "span_id" not in write.body[1]  # the monitor forgot the span: on the trace
        assert write.body[1]["source"]["source_type"] == "HUMAN"
        assert write.body[1]["rationale"] == "wrong, see [REDACTED]"


def test_configured_from_mlflows_variables_credentials_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://mlflow.internal:5443/prefix/")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-secret-123")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "42")
    sink = MLflowSink()
    assert sink.tracking_uri == "https://mlflow.internal:5443/prefix"
    assert sink.otlp_endpoint == "https://mlflow.internal:5443/prefix/v1/traces"
    assert sink.otlp_headers() == {  # an id needs no lookup: nothing sent
        "x-mlflow-experiment-id": "42",
        "authorization": "Bearer tok-secret-123",
    }
    assert "tok-secret" not in repr(sink)
    assert sink.delivery.exporter.headers == {"authorization": "Bearer tok-secret-123"}

    # Basic auth wins over a token when both are set (as in MLflow's client); credentials in
    # the URI move out of it.
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ana")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "pw-secret")
    sink = MLflowSink()
    assert sink.otlp_headers()["authorization"] == "Basic YW5hOnB3LXNlY3JldA=="
    sink = MLflowSink("http://bob:hunter2@127.0.0.1:5000")
    assert sink.tracking_uri == "http://127.0.0.1:5000"
    assert "hunter2" not in repr(sink) and "bob" not in repr(sink)
    assert gw.MLflowSink is MLflowSink


@pytest.mark.parametrize(
    "uri", [None, "", "file:///tmp/mlruns", "sqlite:///mlflow.db", "databricks"]
)
def test_a_store_that_is_not_a_server_is_a_clear_error(uri: str | None) -> None:
    with pytest.raises(ValueError, match="MLFLOW_TRACKING_URI"):
        MLflowSink(uri)


def test_an_unreachable_server_for_the_experiment_lookup_says_so_without_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-secret-123")
    sink = MLflowSink(URL, experiment="rag")
    with pytest.raises(RuntimeError, match="connection") as raised:
        sink.otlp_headers(timeout_s=2)
    assert "tok-secret" not in str(raised.value)


def test_serve_and_worker_build_it_by_name_from_mlflows_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from groundwatch.dashboards import sink_by_name

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.internal:5000")
    sink = sink_by_name("mlflow")
    assert isinstance(sink, MLflowSink)
    assert sink.tracking_uri == "http://mlflow.internal:5000"


@pytest.mark.parametrize(
    ("source", "source_type"),
    [("human", "HUMAN"), ("audit", "HUMAN"), ("llm_judge", "LLM_JUDGE"), ("ragas-nightly", "CODE")],
)
def test_feedback_from_other_systems_keeps_their_kind(source: str, source_type: str) -> None:
    (write,) = MLflowSink(URL).feedback_writes(pending(source=source))
    assert write.body[1]["source"] == {"source_type": source_type, "source_id": source}
