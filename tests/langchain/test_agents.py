"""Agents: real LangGraph graphs (``create_react_agent``, LangChain v1's ``create_agent``) with
scripted tool calls. A top-level agent run that called tools and answered is one record whose
passages are the tools' outputs (and any retrieved documents), named after the tools."""

from __future__ import annotations

import json
from typing import Annotated, Any

import groundwatch_langchain
import pytest
from groundwatch_langchain import GroundwatchCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, create_retriever_tool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import groundwatch as gw
from groundwatch.integration import MAX_PASSAGES
from groundwatch.runtime.sampling import Decision
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry, RecordingMonitor
from groundwatch.types import passage_names
from testkit.chains import TopicRetriever

from .agents import (
    BUILDERS,
    CHANGED,
    FAITHFUL,
    POLICY,
    PRICE_TEXT,
    QUESTION,
    broken_lookup,
    call,
    dump_table,
    get_handle,
    get_price,
    lookup_policy,
    model,
    react_agent,
    record_nothing,
    run,
    tools_then,
)

builders = pytest.mark.parametrize("build", list(BUILDERS))


def _only(monitor: RecordingMonitor) -> dict[str, Any]:
    assert not monitor.failures, monitor.failures
    (record,) = monitor.records
    return record


@builders
def test_a_tool_only_agent_is_recorded_once_with_the_tool_output(build: str) -> None:
    monitor = RecordingMonitor()
    handler = GroundwatchCallbackHandler(monitor, route="support")
    agent = BUILDERS[build](
        tools_then(FAITHFUL, call("lookup_policy", {"topic": "refunds"})), [lookup_policy]
    )

    state = agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})

    assert state["messages"][-1].content == FAITHFUL  # the agent's own result is untouched
    record = _only(monitor)
    assert record["question"] == QUESTION
    assert record["answer"] == FAITHFUL  # the last AI message without tool calls
    [passage] = record["passages"]
    assert (passage.kind, passage.tool, passage.text) == ("tool", "lookup_policy", POLICY)
    assert record["route"] == "support"
    assert record["attributes"][sc.GROUNDWATCH_CONTEXTS_TOOLS] == 1
    assert handler.counts["records"] == 1 and handler.counts["tool_outputs"] == 1


@builders
def test_instrument_records_an_agent_run(build: str, pristine_callback_manager: None) -> None:
    """The issue's case: one line, a ReAct agent, and no record at all."""
    monitor = RecordingMonitor()
    groundwatch_langchain.instrument(monitor)
    agent = BUILDERS[build](tools_then(FAITHFUL, call("lookup_policy")), [lookup_policy])
    agent.invoke({"messages": [("user", QUESTION)]})
    assert [p.tool for p in _only(monitor)["passages"]] == ["lookup_policy"]


@pytest.mark.parametrize(("answer", "label"), [(FAITHFUL, "grounded"), (CHANGED, "hallucinated")])
def test_the_answer_is_scored_against_the_tool_output_and_the_evidence_names_the_tool(
    capgw: GroundwatchTelemetry, answer: str, label: str
) -> None:
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0), capture_content=True)
    handler = GroundwatchCallbackHandler(monitor)
    agent = react_agent(tools_then(answer, call("lookup_policy")), [lookup_policy])
    agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})

    ((_, evaluation),) = capgw.results()
    assert evaluation.label == label
    [claim] = evaluation.claims
    assert claim.verdict == ("supported" if label == "grounded" else "contradicted")
    assert claim.evidence[0].name == "tool lookup_policy"
    [span] = capgw.spans()
    assert span.attributes is not None
    claims = json.loads(str(span.attributes[sc.GROUNDWATCH_CONTENT_CLAIMS]))
    assert claims[0]["sources"] == ["tool lookup_policy"]
    if label == "hallucinated":
        assert evaluation.explanation.endswith("contradicted by tool lookup_policy")
        for event in capgw.events():
            explanation = (event.log_record.attributes or {})[sc.GEN_AI_EVALUATION_EXPLANATION]
            assert "contradicted by tool lookup_policy" in str(explanation)


def test_a_retriever_wrapped_as_a_tool_gives_its_documents_named_after_the_tool() -> None:
    docs = [
        Document(page_content=POLICY, id="policy-1", metadata={"topic": "refund"}),
        Document(
            page_content="Shipping takes 3 to 5 working days.",
            id="ship-1",
            metadata={"topic": "shipping"},
        ),
    ]
    search = create_retriever_tool(
        TopicRetriever(docs=docs), "search_docs", "Search the store's documents."
    )
    monitor = RecordingMonitor()
    agent = react_agent(tools_then(FAITHFUL, call("search_docs", {"query": "refund"})), [search])
    agent.invoke(
        {"messages": [("user", QUESTION)]},
        config={"callbacks": [GroundwatchCallbackHandler(monitor)]},
    )

    passages = _only(monitor)["passages"]
    # The documents themselves (ids, metadata), not the tool's joined text a second time.
    assert [(p.kind, p.tool, p.id) for p in passages] == [("retrieved", "search_docs", "policy-1")]
    assert passage_names(passages) == ["passage 1 (tool search_docs)"]


@builders
def test_parallel_tool_calls_are_all_passages(build: str) -> None:
    monitor = RecordingMonitor()
    answer = "The keyboard KB-101 costs 49.9 EUR and refunds are accepted within 30 days."
    agent = BUILDERS[build](
        tools_then(
            answer,
            call("lookup_policy", {"topic": "refunds"}, "c1"),
            call("get_price", {"sku": "KB-101"}, "c2"),
        ),
        [lookup_policy, get_price],
    )
    agent.invoke(
        {"messages": [("user", QUESTION)]},
        config={"callbacks": [GroundwatchCallbackHandler(monitor)]},
    )

    passages = _only(monitor)["passages"]
    by_tool = {p.tool: p.text for p in passages}
    assert by_tool == {"lookup_policy": POLICY, "get_price": PRICE_TEXT}  # JSON, sorted keys
    assert all(p.kind == "tool" for p in passages)


def test_several_calls_of_one_tool_across_steps_are_numbered() -> None:
    monitor = RecordingMonitor()
    agent = react_agent(
        model(
            AIMessage(content="", tool_calls=[call("get_price", {"sku": "KB-101"}, "c1")]),
            AIMessage(content="", tool_calls=[call("get_price", {"sku": "KB-102"}, "c2")]),
            "Both cost 49.9 EUR.",
        ),
        [get_price],
    )
    agent.invoke(
        {"messages": [("user", "Prices?")]},
        config={"callbacks": [GroundwatchCallbackHandler(monitor)]},
    )
    names = passage_names(_only(monitor)["passages"])
    assert names == ["tool get_price (call 1)", "tool get_price (call 2)"]


@pytest.mark.parametrize(
    "mode", ["stream", "stream_messages", "ainvoke", "astream", "astream_events"]
)
@builders
def test_streaming_agents_are_recorded_once(build: str, mode: str) -> None:
    monitor = RecordingMonitor()
    agent = BUILDERS[build](tools_then(FAITHFUL, call("lookup_policy")), [lookup_policy])
    run(agent, mode, {"callbacks": [GroundwatchCallbackHandler(monitor)]})
    record = _only(monitor)
    assert record["answer"] == FAITHFUL
    assert record["question"] == QUESTION
    assert [(p.tool, p.text) for p in record["passages"]] == [("lookup_policy", POLICY)]


def test_a_stream_the_consumer_stops_early_is_not_scored() -> None:
    monitor = RecordingMonitor()
    agent = react_agent(tools_then(FAITHFUL, call("lookup_policy")), [lookup_policy])
    stream = agent.stream(
        {"messages": [("user", QUESTION)]},
        config={"callbacks": [GroundwatchCallbackHandler(monitor)]},
        stream_mode="updates",
    )
    next(stream)  # the model's tool call
    next(stream)  # the tool's result
    stream.close()  # the final answer is never produced
    assert monitor.records == []


def test_a_tool_that_raises_is_no_passage_and_is_counted() -> None:
    """With LangGraph's ToolNode handling the error, the agent goes on and answers."""
    from langgraph.prebuilt import ToolNode

    monitor = RecordingMonitor()
    handler = GroundwatchCallbackHandler(monitor)
    agent = react_agent(
        tools_then(FAITHFUL, call("broken_lookup", {}, "c1"), call("lookup_policy", {}, "c2")),
        ToolNode([broken_lookup, lookup_policy], handle_tool_errors=True),
    )
    state = agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})

    assert "backend down" in str(state["messages"][-3].content)  # the model saw the error
    record = _only(monitor)
    assert [(p.tool, p.text) for p in record["passages"]] == [("lookup_policy", POLICY)]
    assert record["attributes"][sc.GROUNDWATCH_TOOL_ERRORS] == 1
    assert handler.counts["tool_errors"] == 1


def test_an_agent_whose_only_tool_raised_is_recorded_with_no_passage() -> None:
    from langgraph.prebuilt import ToolNode

    monitor = RecordingMonitor()
    agent = react_agent(
        tools_then("Refunds take 30 days.", call("broken_lookup")),
        ToolNode([broken_lookup], handle_tool_errors=True),
    )
    agent.invoke(
        {"messages": [("user", QUESTION)]},
        config={"callbacks": [GroundwatchCallbackHandler(monitor)]},
    )
    record = _only(monitor)
    assert record["passages"] == []  # it answered from nothing: scoring says so
    assert record["attributes"][sc.GROUNDWATCH_TOOL_ERRORS] == 1


def test_a_tool_error_the_agent_does_not_handle_reaches_the_host_and_is_counted() -> None:
    monitor = RecordingMonitor()
    agent = react_agent(tools_then(FAITHFUL, call("broken_lookup")), [broken_lookup])
    with pytest.raises(RuntimeError, match="backend down"):
        agent.invoke(
            {"messages": [("user", QUESTION)]},
            config={"callbacks": [GroundwatchCallbackHandler(monitor)]},
        )
    assert monitor.records == [] and monitor.failures == [("chain_error", None)]


def test_a_5_mb_tool_output_is_capped_and_marked(capgw: GroundwatchTelemetry) -> None:
    from groundwatch._shared.inputs import MAX_PASSAGE_CHARS

    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0))
    agent = react_agent(tools_then("There are 55000 rows.", call("dump_table")), [dump_table])
    state = agent.invoke(
        {"messages": [("user", "How many rows?")]},
        config={"callbacks": [GroundwatchCallbackHandler(monitor)]},
    )

    assert len(state["messages"][-2].content) > 5_000_000  # the agent got all of it
    ((record, evaluation),) = capgw.results()
    [passage] = record.contexts
    assert passage.kind == "tool" and len(passage.text) == MAX_PASSAGE_CHARS
    assert passage.text.startswith('{"rows": [{"n": 0, "text": "row text ')
    assert record.truncated and evaluation.truncated
    [span] = capgw.spans()
    assert span.attributes is not None and span.attributes[sc.GROUNDWATCH_TRUNCATED] is True


@pytest.mark.parametrize("opaque", ["get_handle", "record_nothing"])
def test_a_tool_output_that_is_not_text_is_left_out_and_counted(opaque: str) -> None:
    """An object with only its default repr, or None (sent to the model as "null")."""
    monitor = RecordingMonitor()
    handler = GroundwatchCallbackHandler(monitor)
    agent = react_agent(
        tools_then(FAITHFUL, call(opaque, {}, "c1"), call("lookup_policy", {}, "c2")),
        [get_handle, record_nothing, lookup_policy],
    )
    state = agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})
    assert state["messages"][-1].content == FAITHFUL  # the agent is untouched
    record = _only(monitor)
    assert [p.tool for p in record["passages"]] == ["lookup_policy"]
    assert record["attributes"][sc.GROUNDWATCH_CONTEXTS_UNREADABLE] == 1
    assert handler.counts["tool_outputs_unreadable"] == 1


def test_tool_outputs_beyond_max_documents_are_dropped_and_counted() -> None:
    monitor = RecordingMonitor()
    handler = GroundwatchCallbackHandler(monitor, max_documents=1)
    agent = react_agent(
        tools_then(FAITHFUL, call("lookup_policy", {}, "c1"), call("get_price", {}, "c2")),
        [lookup_policy, get_price],
    )
    agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})
    record = _only(monitor)
    assert len(record["passages"]) == 1
    assert record["attributes"][sc.GROUNDWATCH_CONTEXTS_DROPPED] == 1
    assert MAX_PASSAGES >= 1


@pytest.mark.parametrize(
    "context_tools",
    [["lookup_policy"], lambda name: name != "get_price"],
    ids=["names", "predicate"],
)
def test_context_tools_chooses_which_outputs_are_context(context_tools: Any) -> None:
    monitor = RecordingMonitor()
    handler = GroundwatchCallbackHandler(monitor, context_tools=context_tools)
    agent = react_agent(
        tools_then(FAITHFUL, call("lookup_policy", {}, "c1"), call("get_price", {}, "c2")),
        [lookup_policy, get_price],
    )
    agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})
    assert [p.tool for p in _only(monitor)["passages"]] == ["lookup_policy"]


def test_an_agent_run_the_sampler_declines_keeps_nothing() -> None:
    monitor = RecordingMonitor(decision=Decision.NOT_SAMPLED)
    handler = GroundwatchCallbackHandler(monitor)
    agent = react_agent(tools_then(FAITHFUL, call("lookup_policy")), [lookup_policy])
    agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})
    assert monitor.records == [] and monitor.decisions == [(Decision.NOT_SAMPLED, None)]
    assert len(monitor.decided) == 1 and handler.counts["tool_outputs"] == 0


SECOND = "And can I get the refund in cash?"
CASH = "Cash refunds are possible for purchases paid in cash."


@tool
def cash_policy(topic: str = "cash") -> str:
    """Look up the cash refund policy."""
    return CASH


def _two_turns(handler: GroundwatchCallbackHandler, thread: str = "thread-42") -> None:
    agent = react_agent(
        model(
            AIMessage(content="", tool_calls=[call("lookup_policy", {}, "c1")]),
            FAITHFUL,
            AIMessage(content="", tool_calls=[call("cash_policy", {}, "c2")]),
            CASH,
        ),
        [lookup_policy, cash_policy],
        checkpointer=InMemorySaver(),
    )
    config: dict[str, Any] = {"callbacks": [handler], "configurable": {"thread_id": thread}}
    agent.invoke({"messages": [("user", QUESTION)]}, config=config)
    agent.invoke({"messages": [("user", SECOND)]}, config=config)


def test_two_turns_of_one_thread_are_two_records_of_one_conversation() -> None:
    monitor = RecordingMonitor()
    _two_turns(GroundwatchCallbackHandler(monitor))
    first, second = monitor.records
    assert first["attributes"][sc.GEN_AI_CONVERSATION_ID] == "thread-42"
    assert second["attributes"][sc.GEN_AI_CONVERSATION_ID] == "thread-42"
    assert (first["question"], first["answer"]) == (QUESTION, FAITHFUL)
    assert (second["question"], second["answer"]) == (SECOND, CASH)
    # Each turn's own tool outputs only: the first turn's stays with the first record.
    assert [p.tool for p in second["passages"]] == ["cash_policy"]


def test_conversation_context_adds_the_earlier_turns() -> None:
    monitor = RecordingMonitor()
    _two_turns(GroundwatchCallbackHandler(monitor, conversation_context=True))
    first, second = monitor.records
    assert [p.kind for p in first["passages"]] == ["tool"]  # no earlier turn yet
    passages = second["passages"]
    assert [(p.kind, p.text) for p in passages] == [
        ("tool", CASH),
        ("conversation", QUESTION),
        ("conversation", FAITHFUL),
    ]
    assert passage_names(passages)[1:] == ["earlier turn 1", "earlier turn 2"]


def test_the_conversation_id_is_a_span_attribute_and_never_a_metric_label(
    capgw: GroundwatchTelemetry,
) -> None:
    monitor = capgw.monitor(sampler=gw.RatioSampler(1.0))
    _two_turns(GroundwatchCallbackHandler(monitor))
    spans = capgw.spans()
    assert [s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in spans if s.attributes] == [
        "thread-42",
        "thread-42",
    ]
    for name in (sc.METRIC_EVALUATIONS, sc.METRIC_CLAIMS, sc.METRIC_EVALUATION_SCORE):
        for attrs, _ in capgw.metric_points(name):
            assert sc.GEN_AI_CONVERSATION_ID not in attrs


RESEARCH = "The research agent found: refunds are accepted within 30 days of purchase."


def _nested(parent_handler: GroundwatchCallbackHandler, sub_callbacks: list[Any]) -> None:
    sub = react_agent(tools_then(RESEARCH, call("lookup_policy")), [lookup_policy])

    @tool
    def research(question: str) -> str:
        """Ask the research agent."""
        state = sub.invoke({"messages": [("user", question)]}, config={"callbacks": sub_callbacks})
        return str(state["messages"][-1].content)

    parent = react_agent(tools_then(FAITHFUL, call("research", {"question": QUESTION})), [research])
    parent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [parent_handler]})


def test_a_subagents_answer_is_a_tool_output_of_its_parent() -> None:
    monitor = RecordingMonitor()
    _nested(GroundwatchCallbackHandler(monitor), [])
    record = _only(monitor)  # the top-level answer only
    assert record["answer"] == FAITHFUL
    # What the parent saw: the subagent's answer, not the subagent's own tool outputs.
    assert [(p.tool, p.text) for p in record["passages"]] == [("research", RESEARCH)]


def test_a_subagents_own_answer_is_scored_with_a_handler_of_its_own() -> None:
    parent_monitor, sub_monitor = RecordingMonitor(), RecordingMonitor()
    _nested(
        GroundwatchCallbackHandler(parent_monitor),
        [GroundwatchCallbackHandler(sub_monitor, route="research")],
    )
    assert [p.tool for p in _only(parent_monitor)["passages"]] == ["research"]
    sub = _only(sub_monitor)
    assert sub["answer"] == RESEARCH and sub["route"] == "research"
    assert [(p.tool, p.text) for p in sub["passages"]] == [("lookup_policy", POLICY)]


def test_a_chain_run_without_tools_or_retrievers_is_still_ignored() -> None:
    monitor = RecordingMonitor()
    handler = GroundwatchCallbackHandler(monitor)
    agent = react_agent(model(FAITHFUL), [lookup_policy])  # answers without calling a tool
    agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})
    assert monitor.records == [] and monitor.failures == []
    assert handler.counts["no_retrieval"] == 1


def test_an_agent_that_called_only_tools_left_out_of_context_is_ignored() -> None:
    monitor = RecordingMonitor()
    handler = GroundwatchCallbackHandler(monitor, context_tools=["lookup_policy"])
    agent = react_agent(tools_then("49.9 EUR.", call("get_price")), [get_price])
    agent.invoke({"messages": [("user", "Price?")]}, config={"callbacks": [handler]})
    assert monitor.records == [] and monitor.failures == [] and monitor.decided == []
    assert handler.counts["no_retrieval"] == 1


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_turn_paused_at_an_interrupt_is_recorded_when_it_resumes(where: str) -> None:
    """Human in the loop: the turn's tools may run in the first run or in the resumed one."""
    monitor = RecordingMonitor()
    handler = GroundwatchCallbackHandler(monitor)
    pause = {f"interrupt_{where}": ["tools"]}
    agent = react_agent(
        tools_then(FAITHFUL, call("lookup_policy")),
        [lookup_policy],
        checkpointer=InMemorySaver(),
        **pause,
    )
    config: dict[str, Any] = {"callbacks": [handler], "configurable": {"thread_id": "t-1"}}
    agent.invoke({"messages": [("user", QUESTION)]}, config=config)
    assert monitor.records == [] and monitor.failures == []  # paused: nothing to score yet
    agent.invoke(None, config=config)  # resume
    record = _only(monitor)
    assert (record["question"], record["answer"]) == (QUESTION, FAITHFUL)
    assert [(p.tool, p.text) for p in record["passages"]] == [("lookup_policy", POLICY)]
    assert record["attributes"][sc.GEN_AI_CONVERSATION_ID] == "t-1"
    assert handler.counts["turns_paused"] == (1 if where == "after" else 0)


@pytest.mark.parametrize(
    "metadata",
    [{"groundwatch_conversation_id": "c-9"}, {"session_id": "c-9"}, {"langfuse_session_id": "c-9"}],
)
def test_the_conversation_id_may_come_from_run_metadata(metadata: dict[str, str]) -> None:
    monitor = RecordingMonitor()
    agent = react_agent(tools_then(FAITHFUL, call("lookup_policy")), [lookup_policy])
    agent.invoke(
        {"messages": [("user", QUESTION)]},
        config={"callbacks": [GroundwatchCallbackHandler(monitor)], "metadata": metadata},
    )
    assert _only(monitor)["attributes"][sc.GEN_AI_CONVERSATION_ID] == "c-9"


def test_a_tool_returning_a_langgraph_command_gives_its_tool_message() -> None:
    """A tool may update the agent's state with ``Command``: the tool message inside it is what
    the model reads, not the command's fields."""

    @tool
    def lookup_with_state(
        tool_call_id: Annotated[str, InjectedToolCallId], topic: str = "refunds"
    ) -> Command[Any]:
        """Look up the policy and update the agent's state."""
        return Command(update={"messages": [ToolMessage(POLICY, tool_call_id=tool_call_id)]})

    monitor = RecordingMonitor()
    agent = react_agent(tools_then(FAITHFUL, call("lookup_with_state")), [lookup_with_state])
    agent.invoke(
        {"messages": [("user", QUESTION)]},
        config={"callbacks": [GroundwatchCallbackHandler(monitor)]},
    )
    passages = _only(monitor)["passages"]
    assert [(p.tool, p.text) for p in passages] == [("lookup_with_state", POLICY)]
