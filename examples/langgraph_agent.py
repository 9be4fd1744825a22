"""A LangGraph tool-calling agent watched by groundwatch (no network, no API key).

The agent (LangChain v1's ``create_agent``, or LangGraph's ``create_react_agent`` where
``langchain`` is not installed) has two tools: the store's refund policy and an order lookup
that returns a structured record. The chat model is LangChain's fake one, scripted to call the
tools and then answer, over two turns of one conversation: the first answer restates the
tools' results, the second changes the policy's number. One line instruments every LangChain
run; each turn becomes one record whose passages are the tools' outputs, and the evidence
names the tool it comes from.

Run (from the repository root):

    pip install -e . -e integrations/langchain langgraph langchain
    python examples/langgraph_agent.py
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import groundwatch_langchain
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import groundwatch as gw
from groundwatch.telemetry import semconv
from groundwatch.types import passage_names


@tool
def lookup_policy(topic: str) -> str:
    """Look up the store's policy on a topic."""
    return "Refund policy: refunds are accepted within 30 days of purchase with a receipt."


@tool
def get_order(order_id: str) -> dict[str, Any]:
    """Look up an order."""
    return {"order_id": order_id, "status": "delivered", "total_eur": 49.9, "items": 1}


class ScriptedToolModel(GenericFakeChatModel):
    """LangChain's fake chat model, made bindable to tools: its replies are scripted."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:
        return self


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


SCRIPT = [
    # Turn 1: two tool calls in one step (run in parallel), then a faithful answer.
    AIMessage(
        content="",
        tool_calls=[
            call("get_order", {"order_id": "A-1001"}, "c1"),
            call("lookup_policy", {"topic": "refunds"}, "c2"),
        ],
    ),
    AIMessage(
        content="Your order A-1001 was delivered. Refunds are accepted within 30 days of "
        "purchase with a receipt."
    ),
    # Turn 2: the policy again, and an answer that changes its number.
    AIMessage(content="", tool_calls=[call("lookup_policy", {"topic": "refunds"}, "c3")]),
    AIMessage(content="Refunds are accepted within 90 days of purchase with a receipt."),
]

TURNS = ["Where is my order A-1001, and can I still return it?", "How long exactly?"]


def build_agent(model: Any) -> Any:
    tools = [lookup_policy, get_order]
    try:
        from langchain.agents import create_agent
    except ImportError:  # LangGraph alone: its prebuilt ReAct agent builds the same graph
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, tools, checkpointer=InMemorySaver())
    return create_agent(model, tools, checkpointer=InMemorySaver())


def show(record: gw.RagRecord, evaluation: gw.Evaluation) -> None:
    """``on_result`` callback: runs on the monitor's worker thread for each scored turn."""
    conversation = (record.attributes or {}).get(semconv.GEN_AI_CONVERSATION_ID)
    print(f"\n[{conversation}] Q: {record.question}\nA: {record.answer}")
    print(f"   context: {', '.join(passage_names(record.passages))}")
    print(f"   -> {evaluation.label}: {evaluation.explanation}")
    for claim in evaluation.claims:
        where = f"  <- {claim.evidence[0].name}" if claim.evidence else ""
        print(f"      {claim.verdict:13} {claim.text!r}{where}")


def main() -> None:
    monitor = gw.Monitor(sampler=gw.RatioSampler(1.0), on_result=show)
    groundwatch_langchain.instrument(monitor, route="support-agent")
    agent = build_agent(ScriptedToolModel(messages=iter(SCRIPT)))
    config = {"configurable": {"thread_id": "customer-42"}}  # one conversation
    for question in TURNS:
        agent.invoke({"messages": [{"role": "user", "content": question}]}, config=config)
    # The agent answered at once; scoring ran in the background. Wait for it before exiting.
    monitor.shutdown(timeout_millis=30_000)
    groundwatch_langchain.uninstrument()


if __name__ == "__main__":
    main()
