"""Tool outputs as passages in the core: deterministic text, caps, names for people, and the
kind and tool name surviving every path a record takes (thread, worker process, the queue's
wire format)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel

import groundwatch as gw
from groundwatch._shared import guard, inputs
from groundwatch.integration import ToolOutput, readable_tool_output, tool_filter
from groundwatch.queue import stream_json
from groundwatch.telemetry import semconv
from groundwatch.testing import GroundwatchTelemetry
from groundwatch.types import Passage, RagRecord, passage_names

POLICY = "Refund policy: refunds are accepted within 30 days of purchase with a receipt."
FAITHFUL = "Refunds are accepted within 30 days of purchase with a receipt."
CHANGED = "Refunds are accepted within 45 days of purchase with a receipt."


class Row(BaseModel):
    sku: str
    price: float


@dataclasses.dataclass
class Order:
    id: int
    status: str


class Opaque:
    """An object with nothing but Python's default repr."""


def test_structured_outputs_read_the_same_whatever_their_key_order() -> None:
    a = inputs.tool_output_text({"b": 1, "a": {"d": 2, "c": 3}}, 1000)
    b = inputs.tool_output_text({"a": {"c": 3, "d": 2}, "b": 1}, 1000)
    assert a == b == '{"a": {"c": 3, "d": 2}, "b": 1}'
    # A JSON string (what a framework sends the model) reads like the structure itself.
    assert inputs.tool_output_text(json.dumps({"b": 1, "a": {"d": 2, "c": 3}}), 1000) == a


def test_rows_are_lines_and_models_and_dataclasses_are_their_fields() -> None:
    rows = [{"sku": "A1", "price": 9.5}, {"price": 12, "sku": "B2"}]
    assert inputs.tool_output_text(rows, 1000).splitlines() == [
        '{"price": 9.5, "sku": "A1"}',
        '{"price": 12, "sku": "B2"}',
    ]
    assert inputs.tool_output_text(Row(sku="A1", price=9.5), 1000) == '{"price": 9.5, "sku": "A1"}'
    assert inputs.tool_output_text(Order(7, "shipped"), 1000) == '{"id": 7, "status": "shipped"}'
    # Values JSON cannot hold are named by type, never by their address (not deterministic).
    text = inputs.tool_output_text({"handle": Opaque(), "tags": {"b", "a"}}, 1000)
    assert text == '{"handle": "<Opaque>", "tags": ["a", "b"]}'


def test_a_huge_structure_is_written_only_up_to_the_cap() -> None:
    big = {"rows": [{"n": i, "text": "x" * 100} for i in range(50_000)]}  # about 5.6 MB
    text = inputs.tool_output_text(big, 4_000)
    assert len(text) == 4_001  # one past the cap: preparing the record sees the cut
    _, passages, _, truncated = inputs.prepare(
        "x", [ToolOutput(big, "dump")], None, max_passage_chars=4_000
    )
    assert truncated and len(passages[0].text) == 4_000 and passages[0].kind == "tool"


def test_unreadable_outputs_are_told_apart_by_type_and_a_cycle_never_raises() -> None:
    assert not readable_tool_output(None)
    assert not readable_tool_output(b"\x00\x01")
    assert not readable_tool_output(Opaque())
    for ok in ("text", 3, {"a": 1}, [1], Row(sku="a", price=1), Order(1, "x")):
        assert readable_tool_output(ok)
    cycle: list[Any] = []
    cycle.append(cycle)
    assert inputs.tool_output_text(cycle, 100) == (
        "[tool output of type list that cannot be read as text]"
    )


def test_passages_are_named_after_their_tool() -> None:
    passages = [
        Passage(text="a"),
        Passage(text="b", kind="tool", tool="lookup_policy"),
        Passage(text="c", kind="tool", tool="get_price"),
        Passage(text="d", kind="tool", tool="get_price"),
        Passage(text="e", tool="search_docs"),
        Passage(text="f", kind="tool"),
        Passage(text="g", kind="conversation"),
    ]
    assert passage_names(passages) == [
        "passage 1",
        "tool lookup_policy",
        "tool get_price (call 1)",
        "tool get_price (call 2)",
        "passage 5 (tool search_docs)",
        "tool output 6",
        "earlier turn 1",
    ]


def test_mapping_contexts_carry_kind_and_tool() -> None:
    p = inputs.to_passage({"text": "t", "kind": "tool", "tool": "x"}, 0)
    assert (p.kind, p.tool) == ("tool", "x")
    with pytest.raises(TypeError, match="kind"):
        inputs.to_passage({"text": "t", "kind": "search"}, 0)


def test_context_tools_filter() -> None:
    assert tool_filter(None) is None
    by_name = tool_filter(["lookup_policy"])
    assert by_name is not None and by_name("lookup_policy") and not by_name("other")
    by_predicate = tool_filter(lambda name: name.startswith("get_"))
    assert by_predicate is not None and by_predicate("get_price") and not by_predicate("x")

    def broken(name: str) -> bool:
        raise RuntimeError("boom")

    failing = tool_filter(broken)
    key = ("context_tools", "RuntimeError")
    before = guard.errors.get(key, 0)
    assert failing is not None and failing("x") is False  # never raises into the run
    assert guard.errors[key] == before + 1  # counted as the user's fault, and logged
    # Not an internal error of ours for the conftest's check: put the counter back as it was,
    # deleted when it did not exist (a key left at 0 is a series other tests would see).
    if before:
        guard.errors[key] = before
    else:
        del guard.errors[key]
    with pytest.raises(TypeError):
        tool_filter("lookup_policy")


def test_evidence_names_the_tool_in_the_reason_and_explanation() -> None:
    tool = [Passage(text=POLICY, kind="tool", tool="lookup_policy")]
    bad = gw.evaluate(CHANGED, tool)
    assert bad.label == "hallucinated"
    assert bad.claims[0].verdict == "contradicted"
    assert bad.claims[0].evidence[0].name == "tool lookup_policy"
    assert bad.explanation.endswith("; contradicted by tool lookup_policy"), bad.explanation
    good = gw.evaluate(FAITHFUL, tool)
    assert good.label == "grounded"
    assert good.claims[0].evidence[0].source == "tool lookup_policy"
    # Plain retrieved passages keep their number.
    plain = gw.evaluate(CHANGED, [POLICY])
    assert plain.claims[0].evidence[0].source is None
    assert plain.claims[0].evidence[0].name == "passage 1"
    assert plain.explanation.endswith("; contradicted by passage 1")


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_tool_passages_reach_the_judge_and_the_span_on_either_executor(
    capgw: GroundwatchTelemetry, executor: str
) -> None:
    results: list[tuple[RagRecord, gw.Evaluation]] = []
    monitor = capgw.monitor(
        executor=executor,
        capture_content=True,
        on_result=lambda record, ev: results.append((record, ev)),
    )
    monitor.record(
        question="How long do refunds take?",
        contexts=[ToolOutput({"policy": POLICY}, "lookup_policy")],
        answer=CHANGED,
        attributes={semconv.GEN_AI_CONVERSATION_ID: "thread-7"},
    )
    monitor.force_flush()
    [(record, evaluation)] = results
    assert record.contexts[0].kind == "tool" and record.contexts[0].tool == "lookup_policy"
    assert evaluation.label == "hallucinated"
    assert "contradicted by tool lookup_policy" in evaluation.explanation
    [span] = capgw.spans()
    assert span.attributes is not None
    assert span.attributes[semconv.GEN_AI_CONVERSATION_ID] == "thread-7"
    claims = json.loads(str(span.attributes[semconv.GROUNDWATCH_CONTENT_CLAIMS]))
    assert claims[0]["sources"] == ["tool lookup_policy"]
    for event in capgw.events():
        attrs = event.log_record.attributes or {}
        assert "contradicted by tool lookup_policy" in str(
            attrs[semconv.GEN_AI_EVALUATION_EXPLANATION]
        )
    # The conversation id is no metric attribute (one series per conversation: unbounded).
    for attrs, _ in capgw.metric_points(semconv.METRIC_EVALUATIONS):
        assert semconv.GEN_AI_CONVERSATION_ID not in attrs


def test_the_wire_format_carries_kind_and_tool() -> None:
    record = RagRecord(
        question="q",
        contexts=[Passage(text=POLICY, kind="tool", tool="lookup_policy"), Passage(text="d")],
        answer="a",
        record_id="0123456789abcdef",
    )
    back = stream_json.decode(stream_json.encode(record, None, 1)).to_record()
    assert [(p.kind, p.tool) for p in back.contexts] == [
        ("tool", "lookup_policy"),
        ("retrieved", None),
    ]


def test_check_names_the_tool_in_its_summary_and_html_report(tmp_path: Any) -> None:
    """``groundwatch check`` reads kind and tool from a JSONL passage like the integrations'."""
    import subprocess
    import sys

    rows = tmp_path / "agent.jsonl"
    passage = {"text": POLICY, "kind": "tool", "tool": "lookup_policy"}
    rows.write_text(json.dumps({"question": "q", "answer": CHANGED, "contexts": [passage]}))
    html = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "groundwatch", "check", str(rows), "--html", str(html)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # the gate fails: a contradicted answer
    assert '(tool lookup_policy: "Refund policy' in done.stdout
    page = html.read_text("utf-8")
    assert "(tool lookup_policy)" in page and "show tool lookup_policy" in page
    # The card's list of passages says whose output each is.
    assert '<span class="pn">tool lookup_policy:</span> Refund policy' in page
