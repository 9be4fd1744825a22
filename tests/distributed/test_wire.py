"""The stream's JSON: what a remote worker needs survives the trip; anything else is refused."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanContext, TraceFlags, TraceState

from groundwatch.queue import stream_json
from groundwatch.runtime.pipeline import prepare_record
from groundwatch.types import Passage, RagRecord


def _record() -> RagRecord:
    ctx = SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
        is_remote=False,
        trace_flags=TraceFlags(1),
        trace_state=TraceState([("vendor", "a1"), ("other", "b2")]),
    )
    record = RagRecord(
        "How long do refunds take?",
        [
            Passage(text="Refunds take 30 days.", id="d1", score=0.9, metadata={"src": "faq"}),
            {"text": "Shipping takes 5 days.", "metadata": {"n": [1, 2], "when": object()}},
        ],
        "Refunds take 30 days.",
        "faq",
        {"tenant": "acme", "ok": True, "tags": ["a", "b"], "bad": {"nested": 1}},
        "00000000000000ab",
        ctx.trace_id,
        ctx.span_id,
        False,
        ctx,
    )
    prepare_record(record)
    return record


def test_round_trip_keeps_what_the_worker_needs() -> None:
    record = _record()
    raw = stream_json.encode(record, 0.25, 123)
    doc = stream_json.decode(raw)
    back = doc.to_record()
    assert json.loads(raw)["version"] == stream_json.VERSION
    assert doc.enqueued_ns == 123 and doc.sampling_rate == 0.25
    assert (back.record_id, back.question, back.answer, back.route) == (
        record.record_id,
        record.question,
        record.answer,
        "faq",
    )
    assert [(p.text, p.id, p.score) for p in back.contexts] == [
        ("Refunds take 30 days.", "d1", 0.9),
        ("Shipping takes 5 days.", None, None),
    ]
    assert back.contexts[0].metadata == {"src": "faq"}
    assert back.contexts[1].metadata["n"] == [1, 2]
    assert isinstance(back.contexts[1].metadata["when"], str)  # not JSON: sent as str()
    # Attributes: primitive values only, as on the span.
    assert back.attributes == {"tenant": "acme", "ok": True, "tags": ["a", "b"]}
    ctx = back.span_context
    assert ctx is not None and ctx.is_valid and ctx.is_remote
    assert (ctx.trace_id, ctx.span_id) == (record.trace_id, record.span_id)
    assert ctx.trace_flags.sampled
    assert ctx.trace_state.to_header() == "vendor=a1,other=b2"


def test_a_record_without_trace_has_none() -> None:
    record = RagRecord(None, ["a passage"], "an answer", record_id="00000000000000cd")
    prepare_record(record)
    back = stream_json.decode(stream_json.encode(record, None, 1)).to_record()
    assert back.span_context is None and back.trace_id == 0 and back.question is None


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"version": 2}',
        json.dumps({"version": 2, "record_id": "x", "question": None, "answer": "a",
                    "passages": [], "enqueued_ns": 1}).encode(),
        json.dumps({"version": 1, "record_id": "x", "question": None, "answer": 5,
                    "passages": [], "enqueued_ns": 1}).encode(),
        json.dumps({"version": 1, "record_id": "x", "question": None, "answer": "a",
                    "passages": [], "enqueued_ns": 1,
                    "trace": {"trace_id": "zz", "span_id": "00", "flags": 1}}).encode(),
    ],
)  # fmt: skip
def test_anything_else_is_malformed(raw: bytes) -> None:
    with pytest.raises(stream_json.MalformedRecord):
        stream_json.decode(raw)


def test_unknown_keys_are_ignored_within_a_version() -> None:
    doc = json.loads(stream_json.encode(_record(), None, 1))
    doc["added_later"] = {"x": 1}
    assert stream_json.decode(json.dumps(doc)).record_id == "00000000000000ab"
