"""A real LangGraph agent whose tool returns JSON (an order from an API): the answer that
changes the tool's price scores ``contradicted``, the faithful one ``grounded``, through the
whole monitor path (callback handler, sampler, worker, local judge, scoring)."""

from __future__ import annotations

from typing import Any

import pytest
from groundwatch_langchain import GroundwatchCallbackHandler
from langchain_core.tools import tool

import groundwatch as gw
from groundwatch.testing import GroundwatchTelemetry

from .agents import BUILDERS, call, tools_then

QUESTION = "What was the total of my order A-17?"
ORDER = {"order_id": "A-17", "status": "shipped", "total": 42.5, "currency": "EUR"}


@tool
def get_order(order_id: str = "A-17") -> dict[str, Any]:
    """Look an order up in the order service."""
    return dict(ORDER)


@pytest.mark.parametrize("build", list(BUILDERS))
@pytest.mark.parametrize(
    ("answer", "label", "verdict"),
    [
        ("Your order A-17 has shipped; its total was 42.50 EUR.", "grounded", "supported"),
        ("Your order A-17 has shipped; its total was 45.50 EUR.", "hallucinated", "contradicted"),
    ],
)
def test_a_json_tool_output_grounds_and_contradicts_the_agents_answer(
    capgw: GroundwatchTelemetry, build: str, answer: str, label: str, verdict: str
) -> None:
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0))
    handler = GroundwatchCallbackHandler(monitor)
    agent = BUILDERS[build](
        tools_then(answer, call("get_order", {"order_id": "A-17"})), [get_order]
    )

    agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})

    ((record, evaluation),) = capgw.results()
    [passage] = record.contexts
    assert (passage.kind, passage.tool) == ("tool", "get_order")
    assert passage.text.startswith('{"currency": "EUR"')  # the output as sorted JSON
    assert evaluation.label == label
    total = next(c for c in evaluation.claims if "total" in c.text)
    assert total.verdict == verdict
    [evidence] = total.evidence
    assert evidence.name == "tool get_order"
    assert evidence.quote == passage.text[evidence.start : evidence.end]
    if label == "hallucinated":
        assert evaluation.explanation.endswith("contradicted by tool get_order")
