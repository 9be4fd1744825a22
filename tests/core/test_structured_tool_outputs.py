"""A tool's structured output (JSON objects, rows, nested values) is evidence like prose: an
answer that restates its values is grounded, one that changes a number, unit, date or name is
contradicted, and only an empty output is insufficient context. Retrieved passages that happen
to hold JSON are judged as before (the reading is for ``tool`` passages only)."""

from __future__ import annotations

from typing import Any

import pytest

import groundwatch as gw
from groundwatch._shared.inputs import MAX_PASSAGE_CHARS, ToolOutput, tool_output_text
from groundwatch.judging.text.structured import tool_records
from groundwatch.types import Passage

from .structured_tool_cases import CASES, judge_case, measure

ORDER = {"order_id": "A-17", "status": "shipped", "total": 42.5, "currency": "EUR"}


def _tool(output: Any, name: str = "get_order") -> Passage:
    return ToolOutput(output, name).passage()


def _verdicts(ev: gw.Evaluation) -> list[str]:
    return [c.verdict for c in ev.claims]


def _quotes_are_exact(ev: gw.Evaluation, passages: list[Passage]) -> None:
    for claim in ev.claims:
        for e in claim.evidence:
            assert e.quote == passages[e.passage].text[e.start : e.end]


def test_the_issue_case_a_changed_price_is_contradicted_and_the_faithful_one_grounded() -> None:
    passages = [_tool(ORDER)]
    changed = gw.evaluate("Your order total was 45.50 EUR.", passages)
    faithful = gw.evaluate("Your order total was 42.50 EUR.", passages)
    assert (changed.label, _verdicts(changed)) == ("hallucinated", ["contradicted"])
    assert changed.explanation.endswith("contradicted by tool get_order")
    assert (faithful.label, _verdicts(faithful)) == ("grounded", ["supported"])
    for ev in (changed, faithful):
        _quotes_are_exact(ev, passages)
        # The evidence is the object in the passage's own JSON, not the judge's wording.
        assert ev.claims[0].evidence[0].quote == passages[0].text


def test_a_currency_named_in_a_sibling_field_is_the_numbers_unit() -> None:
    passages = [_tool(ORDER)]
    ev = gw.evaluate("Your order total was $42.50.", passages)
    assert _verdicts(ev) == ["contradicted"]  # the same amount in dollars is another amount


def test_rows_a_changed_unit_and_a_changed_date_are_contradicted_in_the_right_row() -> None:
    rows = [
        {"tracking": "1Z999", "carrier": "UPS", "weight_kg": 2.5, "eta": "2024-05-04"},
        {"tracking": "JD014", "carrier": "DHL", "weight_kg": 0.8, "eta": "2024-05-07"},
    ]
    passages = [_tool(rows, "list_shipments")]
    assert passages[0].text.count("\n") == 1  # rows as lines
    unit = gw.evaluate("The UPS parcel weighs 2.5 lb.", passages)
    date = gw.evaluate("The DHL parcel arrives on May 9, 2024.", passages)
    right = gw.evaluate("The DHL parcel weighs 0.8 kg and arrives on May 7, 2024.", passages)
    assert _verdicts(unit) == ["contradicted"]
    assert unit.claims[0].evidence[0].quote.startswith('{"carrier": "UPS"')
    assert _verdicts(date) == ["contradicted"]
    assert date.claims[0].evidence[0].quote.startswith('{"carrier": "DHL"')
    assert right.label == "grounded"
    for ev in (unit, date, right):
        _quotes_are_exact(ev, passages)


def test_a_nested_object_reads_its_fields_under_its_name_and_its_currency() -> None:
    invoice = {
        "invoice": {"number": "INV-2291", "customer": "Acme Corp", "due": "2024-07-31"},
        "amounts": {"total": 1428, "tax": 228, "currency": "EUR"},
    }
    passages = [_tool(invoice, "fetch_invoice")]
    assert gw.evaluate("Invoice INV-2291 totals 1,428 EUR.", passages).label == "grounded"
    assert _verdicts(gw.evaluate("Invoice INV-2291 totals 1,482 EUR.", passages)) == [
        "contradicted"
    ]
    assert _verdicts(gw.evaluate("Invoice INV-2291 is due on July 30, 2024.", passages)) == [
        "contradicted"
    ]


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("Order A-17 was placed on March 15, 2024.", "supported"),
        ("Order A-17 was placed on 15 March 2024.", "supported"),
        ("Order A-17 was placed on March 15.", "supported"),
        ("Order A-17 was placed in March 2024.", "supported"),
        ("Order A-17 was placed on March 16, 2024.", "contradicted"),
        ("Order A-17 was placed on 15 April 2024.", "contradicted"),
        ("Order A-17 was placed in April 2024.", "contradicted"),
    ],
)
def test_a_date_is_compared_whole_in_any_common_writing(answer: str, verdict: str) -> None:
    passages = [_tool({"order_id": "A-17", "placed_on": "2024-03-15", "total": 42.5})]
    assert _verdicts(gw.evaluate(answer, passages)) == [verdict]


def test_a_name_put_in_place_of_the_records_name_is_contradicted_with_the_field() -> None:
    passages = [_tool({"city": "Oslo", "date": "2025-01-10", "condition": "light snow"})]
    ev = gw.evaluate("In Bergen on January 10, 2025 there is light snow.", passages)
    assert _verdicts(ev) == ["contradicted"]
    assert "city is Oslo" in ev.claims[0].reason
    same = gw.evaluate("In Oslo on January 10, 2025 there is light snow.", passages)
    assert same.label == "grounded"


def test_a_false_field_is_said_negated() -> None:
    passages = [_tool({"name": "Wireless Mouse", "in_stock": False, "price": 24.5})]
    ev = gw.evaluate("The Wireless Mouse is in stock.", passages)
    assert _verdicts(ev) == ["contradicted"]


def test_a_claim_the_record_says_nothing_of_is_unsupported_not_contradicted() -> None:
    passages = [_tool({"city": "Oslo", "date": "2025-01-10", "condition": "light snow"})]
    ev = gw.evaluate("In Oslo there is light snow, and the roads are closed.", passages)
    assert ev.label == "hallucinated"
    assert _verdicts(ev) == ["unsupported"]
    added = gw.evaluate(
        "ACME trades at $182.35 and pays a $0.50 dividend.",
        [_tool({"symbol": "ACME", "price": 182.35, "currency": "USD"}, "get_quote")],
    )
    assert "contradicted" not in _verdicts(added)  # $0.50 changes no value: the price is taken


@pytest.mark.parametrize("output", [{}, [], {"tracking": None}, [{}, {}]])
def test_only_an_empty_tool_output_is_insufficient_context(output: Any) -> None:
    ev = gw.evaluate("Your order total was 42.50 EUR.", [_tool(output)])
    assert ev.label == "insufficient_context"


def test_a_tool_output_with_values_or_words_is_substantive() -> None:
    for output in ({"total": 42.5}, "Order not found"):
        ev = gw.evaluate("Your order total was 45.50 EUR.", [_tool(output)])
        assert ev.label == "hallucinated", output


def test_the_reading_is_for_tool_passages_only() -> None:
    """The same JSON retrieved as a document is judged exactly as before: the dev-set figures
    of the local judge cannot move."""
    text = tool_output_text(ORDER, MAX_PASSAGE_CHARS)
    retrieved = gw.evaluate("Your order total was 45.50 EUR.", [text])
    # A one-line output stating values is prose (issue #45): the answer, not the retrieval.
    assert retrieved.label == "hallucinated"
    assert _verdicts(retrieved) == ["unsupported"]
    assert tool_records(Passage(text=text)) == ()
    assert tool_records(Passage(text=text, kind="tool"))


def test_a_capped_output_is_read_up_to_the_cut() -> None:
    rows = [{"sku": f"SKU-{i}", "price": 10 + i, "currency": "EUR"} for i in range(400)]
    passage = _tool(rows, "catalog")
    assert len(passage.text) > 2000
    cut = Passage(text=passage.text[:2000], kind="tool", tool="catalog")
    records = tool_records(cut)
    assert records and all(cut.text[r.start : r.end] for r in records)
    ev = gw.evaluate("SKU-3 costs 13 EUR.", [cut])
    assert ev.label == "grounded"
    assert _verdicts(gw.evaluate("SKU-3 costs 31 EUR.", [cut])) == ["contradicted"]


def test_odd_structures_never_raise_and_keep_spans_in_the_text() -> None:
    odd: list[Any] = [
        {"a": {"b": {"c": {"d": [1, 2, {"e": "deep"}]}}}},
        [1, "two", None, True],
        {"camelCaseKey": "Value", "list": ["x", "y"], "n": -3.5e2},
        {"date": "2024-02-30", "when": "2024-13-01T00:00:00Z"},
        '{"broken": ',
        '[{"ok": 1}\n{"also": 2}',
        {"text": '"quoted" {braces} [and] \\ backslashes'},
        {"x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
    ]
    for output in odd:
        passage = _tool(output, "odd")
        for r in tool_records(passage):
            assert 0 <= r.start < r.end <= len(passage.text)
        gw.evaluate("The value is 350.", [passage])  # never raises


def test_the_reading_is_deterministic() -> None:
    a = _tool({"b": 1, "a": {"z": "Z", "y": 2}})
    b = _tool({"a": {"y": 2, "z": "Z"}, "b": 1})
    assert a.text == b.text and tool_records(a) == tool_records(b)


def test_every_case_of_the_set_quotes_its_passage_exactly() -> None:
    for case in CASES:
        passage = ToolOutput(case["output"], case["tool"]).passage()
        _quotes_are_exact(judge_case(case), [passage])


def test_the_held_out_cases_stay_at_their_measured_accuracy() -> None:
    """docs/agents.md gives the figure; the split was made before the reading was built."""
    strict, binary, n = measure("held_out")
    assert n == 36
    assert strict >= HELD_OUT_STRICT_FLOOR
    assert binary >= HELD_OUT_BINARY_FLOOR


# Measured once the reading was done (python tests/core/structured_tool_cases.py held_out):
# 31 of 36 judged right, 33 of 36 right on grounded-vs-not. The judge is deterministic.
HELD_OUT_STRICT_FLOOR = 31 / 36
HELD_OUT_BINARY_FLOOR = 33 / 36
