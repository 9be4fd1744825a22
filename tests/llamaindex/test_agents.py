"""Agents: real llama-index-core agent workflows with a scripted function-calling mock LLM.

``FunctionAgent``, ``ReActAgent`` and ``AgentWorkflow`` run their real steps; only the model is
scripted (``MockFunctionCallingLLM``'s ``response_generator``): it calls the tools first and
answers once they have answered. A run is one record whose passages are the tools' outputs.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import groundwatch_llamaindex
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import (
    AgentWorkflow,
    FunctionAgent,
    ReActAgent,
    ToolCallResult,
)
from llama_index.core.base.llms.types import MessageRole, ToolCallBlock
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer, Memory
from llama_index.core.tools import FunctionTool, QueryEngineTool, RetrieverTool

import groundwatch as gw
from groundwatch import Decision, Passage
from groundwatch._shared.inputs import MAX_PASSAGE_CHARS
from groundwatch.telemetry import semconv
from groundwatch.testing import GroundwatchTelemetry, RecordingMonitor

from ._fakes import ContextAnswerLLM
from .conftest import FACTS, QUESTIONS
from .test_capture import assert_clean, passages

POLICY = "Refunds are accepted within 30 days of purchase."
QUESTION = "What is the refund policy?"
FAITHFUL = "Refunds are accepted within 30 days of purchase."
CHANGED = "Refunds are accepted within 60 days of purchase."


def lookup_policy(topic: str) -> str:
    """Look up the store's policy on a topic."""
    return POLICY


def lookup_price(item: str) -> dict[str, Any]:
    """Look up an item's price."""
    return {"item": item, "price": 12, "currency": "EUR"}


def broken_inventory(item: str) -> str:
    """Look up the stock of an item (the service is down)."""
    raise ConnectionError("inventory service unavailable")


Call = tuple[str, dict[str, Any]]


class Script:
    """A ``MockFunctionCallingLLM`` response generator: tool calls, then the answer.

    The model asks for ``calls`` (all in one message: parallel calls) when the conversation ends
    with the user's message, and answers once the tools have answered (the last message is a
    tool result). ``answers`` are used one per user turn, the last one repeated.
    """

    def __init__(self, calls: Sequence[Call], *answers: str) -> None:
        self.calls = list(calls)
        self.answers = list(answers)

    def _answer(self, messages: Sequence[ChatMessage]) -> str:
        turn = sum(1 for m in messages if m.role == MessageRole.USER)
        return self.answers[min(turn, len(self.answers)) - 1]

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        if not self.calls or messages[-1].role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content=self._answer(messages))
        blocks = [
            ToolCallBlock(tool_call_id=f"call-{i}", tool_name=name, tool_kwargs=args)
            for i, (name, args) in enumerate(self.calls)
        ]
        return ChatMessage(role="assistant", blocks=blocks)


class ReActScript:
    """The same for a ``ReActAgent``, whose model writes Thought / Action / Answer text."""

    def __init__(self, call: Call, answer: str) -> None:
        self.call = call
        self.answer = answer

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        if (messages[-1].content or "").startswith("Observation:"):
            text = f"Thought: I can answer without using any more tools.\nAnswer: {self.answer}"
        else:
            name, args = self.call
            text = f"Thought: I need a tool.\nAction: {name}\nAction Input: {args}".replace(
                "'", '"'
            )
        return ChatMessage(role="assistant", content=text)


def llm(script: Callable[..., ChatMessage]) -> MockFunctionCallingLLM:
    return MockFunctionCallingLLM(response_generator=script)


def tools(*functions: Callable[..., Any]) -> list[FunctionTool]:
    return [FunctionTool.from_defaults(f) for f in functions]


def make_agent(kind: str, answer: str = FAITHFUL) -> Any:
    call: Call = ("lookup_policy", {"topic": "refunds"})
    if kind == "react":
        return ReActAgent(tools=tools(lookup_policy), llm=llm(ReActScript(call, answer)))
    agent = FunctionAgent(
        name="support",
        description="Answers customers' questions.",
        tools=tools(lookup_policy),
        llm=llm(Script([call], answer)),
    )
    if kind == "workflow":
        return AgentWorkflow(agents=[agent], root_agent="support")
    return agent


@pytest.fixture
def capture_clean(monitor: RecordingMonitor) -> Iterator[RecordingMonitor]:
    yield monitor
    assert_clean()


# --- what a run records ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["function", "react", "workflow"])
async def test_a_tool_only_agent_is_recorded_once_with_the_tool_output(
    capture_clean: RecordingMonitor, kind: str
) -> None:
    monitor = capture_clean
    result = await make_agent(kind).run(user_msg=QUESTION)

    assert str(result) == FAITHFUL
    assert monitor.failures == []
    [record] = monitor.records
    assert record["question"] == QUESTION
    assert record["answer"] == FAITHFUL
    assert record["passages"] == [Passage(text=POLICY, kind="tool", tool="lookup_policy")]
    assert record["attributes"]["llama_index.engine"] == type(make_agent(kind)).__name__
    assert record["attributes"][semconv.GROUNDWATCH_CONTEXTS_TOOLS] == 1


async def test_an_agent_that_calls_no_tool_records_nothing(capture_clean: RecordingMonitor) -> None:
    agent = FunctionAgent(tools=tools(lookup_policy), llm=llm(Script([], "Hello!")))
    assert str(await agent.run(user_msg="Hi")) == "Hello!"
    # Nothing to ground the answer in, as for a chat turn that never retrieved.
    assert capture_clean.records == []
    assert capture_clean.failures == []


async def test_parallel_tool_calls_are_passages_in_call_order(
    capture_clean: RecordingMonitor,
) -> None:
    calls: list[Call] = [("lookup_policy", {"topic": "refunds"}), ("lookup_price", {"item": "mug"})]
    agent = FunctionAgent(
        tools=tools(lookup_policy, lookup_price),
        llm=llm(Script(calls, "A mug costs 12 EUR; refunds within 30 days.")),
    )
    result = await agent.run(user_msg="How much is a mug, and can I return it?")

    assert len(result.tool_calls) == 2
    [record] = capture_clean.records
    assert record["passages"] == [
        Passage(text=POLICY, kind="tool", tool="lookup_policy"),
        # Structured output: JSON with sorted keys, not Python's repr.
        Passage(
            text='{"currency": "EUR", "item": "mug", "price": 12}', kind="tool", tool="lookup_price"
        ),
    ]
    assert record["attributes"][semconv.GROUNDWATCH_CONTEXTS_TOOLS] == 2


async def test_a_tool_that_raises_is_not_a_passage(capture_clean: RecordingMonitor) -> None:
    calls: list[Call] = [("broken_inventory", {"item": "mug"}), ("lookup_policy", {"topic": "x"})]
    agent = FunctionAgent(
        tools=tools(broken_inventory, lookup_policy),
        llm=llm(Script(calls, "Refunds are accepted within 30 days.")),
    )
    result = await agent.run(user_msg=QUESTION)

    [failed, _] = result.tool_calls
    assert failed.tool_output.is_error  # the agent went on; the error went to the model
    [record] = capture_clean.records
    assert record["passages"] == [Passage(text=POLICY, kind="tool", tool="lookup_policy")]
    assert record["attributes"][semconv.GROUNDWATCH_TOOL_ERRORS] == 1


async def test_a_run_whose_only_tool_raised_is_recorded_without_passages(
    capture_clean: RecordingMonitor,
) -> None:
    agent = FunctionAgent(
        tools=tools(broken_inventory),
        llm=llm(Script([("broken_inventory", {"item": "mug"})], "We have 40 mugs in stock.")),
    )
    await agent.run(user_msg="Do you have mugs?")
    # The answer rests on nothing: that is exactly what the judge should see.
    [record] = capture_clean.records
    assert record["passages"] == []
    assert record["attributes"][semconv.GROUNDWATCH_TOOL_ERRORS] == 1


class Opaque:
    """An object with nothing but Python's default repr."""


def big_text() -> str:
    """Return a 5 MB report."""
    return "The warehouse holds 40 mugs. " * (5_000_000 // 29)


def big_table() -> list[dict[str, Any]]:
    """Return 200,000 stock rows."""
    return [{"sku": i, "stock": i % 50} for i in range(200_000)]


def opaque() -> Opaque:
    """Return an object with no text."""
    return Opaque()


def odd_values() -> dict[str, Any]:
    """Return values JSON cannot hold."""
    return {"lock": threading.Lock(), "when": datetime.date(2026, 1, 2), "price": 12}


async def test_huge_and_unreadable_outputs_are_capped_or_counted_never_raised(
    capture_clean: RecordingMonitor,
) -> None:
    names = ["big_text", "big_table", "opaque", "odd_values"]
    agent = FunctionAgent(
        tools=tools(big_text, big_table, opaque, odd_values),
        llm=llm(Script([(n, {}) for n in names], "We hold 40 mugs.")),
    )
    result = await agent.run(user_msg="How many mugs are there?")
    assert str(result) == "We hold 40 mugs."

    [record] = capture_clean.records
    by_tool = {p.tool: p for p in record["passages"]}
    assert set(by_tool) == {"big_text", "big_table", "odd_values"}  # the opaque one: left out
    for name in ("big_text", "big_table"):
        # Cut to the cap, plus one character so that the monitor sees the cut and marks it.
        assert len(by_tool[name].text) == MAX_PASSAGE_CHARS + 1
    assert by_tool["big_table"].text.startswith('{"sku": 0, "stock": 0}\n{"sku": 1, "stock": 1}')
    assert by_tool["odd_values"].text == '{"lock": "<lock>", "price": 12, "when": "<date>"}'
    assert record["attributes"][semconv.GROUNDWATCH_CONTEXTS_UNREADABLE] == 1


# --- retrieval through tools ----------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "stream"])
async def test_query_engine_tool_source_nodes_are_the_passages(
    index: VectorStoreIndex, capture_clean: RecordingMonitor, streaming: bool
) -> None:
    engine = index.as_query_engine(llm=ContextAnswerLLM(), similarity_top_k=2, streaming=streaming)
    tool = QueryEngineTool.from_defaults(engine, name="search_docs", description="The documents.")
    agent = FunctionAgent(
        tools=[tool],
        llm=llm(Script([("search_docs", {"input": QUESTIONS["fuji"]})], FACTS["fuji"])),
    )
    result = await agent.run(user_msg=QUESTIONS["fuji"])

    [call] = result.tool_calls
    response = call.tool_output.raw_output
    # One record for the agent's run, none for the query inside the tool.
    [record] = capture_clean.records
    assert record["question"] == QUESTIONS["fuji"]
    assert record["passages"] == [
        p.model_copy(update={"tool": "search_docs"}) for p in passages(response.source_nodes)
    ]
    assert [p.kind for p in record["passages"]] == ["retrieved", "retrieved"]
    assert record["passages"][0].metadata == {"topic": "fuji"}
    # The sub-engine's synthesised answer is a model's text, not a source: not a passage.
    assert all(p.text != str(response) or p.id for p in record["passages"])


async def test_a_retriever_tool_nodes_are_the_passages(
    index: VectorStoreIndex, capture_clean: RecordingMonitor
) -> None:
    retriever = index.as_retriever(similarity_top_k=1)
    tool = RetrieverTool.from_defaults(retriever, name="retrieve", description="The documents.")
    agent = FunctionAgent(
        tools=[tool],
        llm=llm(Script([("retrieve", {"input": QUESTIONS["wall"]})], FACTS["wall"])),
    )
    result = await agent.run(user_msg=QUESTIONS["wall"])

    nodes = result.tool_calls[0].tool_output.raw_output
    [record] = capture_clean.records
    assert record["passages"] == [
        p.model_copy(update={"tool": "retrieve"}) for p in passages(nodes)
    ]
    assert record["passages"][0].text == FACTS["wall"]


async def test_context_tools_chooses_which_outputs_are_context(index: VectorStoreIndex) -> None:
    calls: list[Call] = [("lookup_policy", {"topic": "refunds"}), ("lookup_price", {"item": "mug"})]

    async def run() -> None:
        agent = FunctionAgent(
            tools=tools(lookup_policy, lookup_price), llm=llm(Script(calls, FAITHFUL))
        )
        await agent.run(user_msg=QUESTION)

    by_name = RecordingMonitor()
    groundwatch_llamaindex.instrument(by_name, context_tools=["lookup_price"])
    try:
        await run()
    finally:
        groundwatch_llamaindex.uninstrument()
    by_predicate = RecordingMonitor()
    groundwatch_llamaindex.instrument(by_predicate, context_tools=lambda n: n.endswith("policy"))
    try:
        await run()
    finally:
        groundwatch_llamaindex.uninstrument()

    assert [p.tool for p in by_name.records[0]["passages"]] == ["lookup_price"]
    assert [p.tool for p in by_predicate.records[0]["passages"]] == ["lookup_policy"]


# --- nested agents, streaming, concurrency, sampling ----------------------------------------------


async def test_a_subagents_answer_is_a_tool_output_of_its_parent(
    capture_clean: RecordingMonitor,
) -> None:
    researcher = FunctionAgent(
        tools=tools(lookup_policy),
        llm=llm(Script([("lookup_policy", {"topic": "refunds"})], "Refunds: 30 days.")),
    )

    async def ask_researcher(question: str) -> str:
        """Ask the research agent."""
        return str(await researcher.run(user_msg=question))

    parent = FunctionAgent(
        tools=tools(ask_researcher),
        llm=llm(Script([("ask_researcher", {"question": "refunds?"})], "Refunds: 30 days.")),
    )
    await parent.run(user_msg=QUESTION)

    # One record, the top-level run's: the subagent's own tool calls are not the parent's.
    [record] = capture_clean.records
    assert record["passages"] == [
        Passage(text="Refunds: 30 days.", kind="tool", tool="ask_researcher")
    ]


async def test_streaming_the_runs_events_records_the_run_once(
    capture_clean: RecordingMonitor,
) -> None:
    handler = make_agent("function").run(user_msg=QUESTION)
    seen = [ev async for ev in handler.stream_events()]
    result = await handler
    assert any(isinstance(ev, ToolCallResult) for ev in seen)
    [record] = capture_clean.records
    assert record["answer"] == str(result) == FAITHFUL
    assert record["passages"] == [Passage(text=POLICY, kind="tool", tool="lookup_policy")]


async def test_concurrent_runs_do_not_mix(capture_clean: RecordingMonitor) -> None:
    def agent_for(key: str) -> FunctionAgent:
        def lookup(topic: str) -> str:
            """Look up a topic."""
            return FACTS[topic]

        return FunctionAgent(
            tools=[FunctionTool.from_defaults(lookup, name="lookup")],
            llm=llm(Script([("lookup", {"topic": key})], FACTS[key])),
        )

    keys = ["eiffel", "fuji", "wall", "amazon"]
    await asyncio.gather(*(agent_for(k).run(user_msg=QUESTIONS[k]) for k in keys))
    records = {r["question"]: r for r in capture_clean.records}
    assert len(records) == len(keys)
    for key in keys:
        record = records[QUESTIONS[key]]
        assert record["answer"] == FACTS[key]
        assert record["passages"] == [Passage(text=FACTS[key], kind="tool", tool="lookup")]


async def test_a_run_the_sampler_declines_keeps_nothing_and_is_counted_once() -> None:
    monitor = RecordingMonitor(decision=Decision.NOT_SAMPLED)
    groundwatch_llamaindex.instrument(monitor)
    try:
        await make_agent("function").run(user_msg=QUESTION)
    finally:
        groundwatch_llamaindex.uninstrument()
    assert monitor.records == []
    assert monitor.decisions == [(Decision.NOT_SAMPLED, None)]
    assert len(monitor.decided) == 1


async def test_an_agent_that_fails_is_counted_not_recorded(
    capture_clean: RecordingMonitor,
) -> None:
    # The model never stops calling tools: the run fails on its iteration limit.
    agent = FunctionAgent(
        tools=tools(lookup_policy),
        llm=llm(lambda messages, **kw: Script([("lookup_policy", {"topic": "x"})])(messages[:1])),
    )
    with pytest.raises(Exception, match="Max iterations"):
        await agent.run(user_msg=QUESTION, max_iterations=2)
    assert capture_clean.records == []
    assert [e for e, _ in capture_clean.failures] == ["WorkflowRuntimeError"]


# --- conversations --------------------------------------------------------------------------------


async def test_two_turns_of_one_session_share_the_conversation_id(
    capture_clean: RecordingMonitor,
) -> None:
    agent = FunctionAgent(
        tools=tools(lookup_policy),
        llm=llm(Script([("lookup_policy", {"topic": "refunds"})], FAITHFUL, "Yes, 30 days.")),
    )
    memory = Memory.from_defaults(session_id="customer-42", token_limit=4000)
    await agent.run(user_msg=QUESTION, memory=memory)
    await agent.run(user_msg="Even for sale items?", memory=memory)
    other = ChatMemoryBuffer.from_defaults(chat_store_key="customer-7")
    await agent.run(user_msg=QUESTION, memory=other)
    await agent.run(user_msg=QUESTION)  # no memory named: no conversation id

    first, second, *_ = capture_clean.records
    assert [first["question"], second["question"]] == [QUESTION, "Even for sale items?"]
    assert second["answer"] == "Yes, 30 days."
    ids = [r["attributes"].get(semconv.GEN_AI_CONVERSATION_ID) for r in capture_clean.records]
    assert ids == ["customer-42", "customer-42", "customer-7", None]


async def test_chat_engine_turns_carry_one_conversation_id_per_engine(
    index: VectorStoreIndex, capture_clean: RecordingMonitor
) -> None:
    engine = index.as_chat_engine(
        chat_mode="condense_plus_context", llm=ContextAnswerLLM(), similarity_top_k=1
    )
    other = index.as_chat_engine(
        chat_mode="condense_plus_context", llm=ContextAnswerLLM(), similarity_top_k=1
    )
    engine.chat(QUESTIONS["fuji"])
    await engine.achat(QUESTIONS["wall"])
    other.chat(QUESTIONS["fuji"])

    ids = [r["attributes"][semconv.GEN_AI_CONVERSATION_ID] for r in capture_clean.records]
    assert ids[0] == ids[1] != ids[2]
    assert all(isinstance(i, str) and len(i) >= 16 for i in ids)


class CondensingLLM(ContextAnswerLLM):
    """Condenses a follow-up into a standalone question, as a real model would."""

    def _answer(self, prompt: str) -> str:
        if "Standalone question" in prompt or "standalone question" in prompt:
            return QUESTIONS["fuji"]
        return super()._answer(prompt)


@pytest.mark.parametrize("mode", ["condense_plus_context", "condense_question"])
def test_a_chat_turn_records_the_condensed_question(
    index: VectorStoreIndex, capture_clean: RecordingMonitor, mode: str
) -> None:
    engine = index.as_chat_engine(chat_mode=mode, llm=CondensingLLM(), similarity_top_k=1)
    engine.chat(QUESTIONS["eiffel"])
    response = engine.chat("And Fuji?")

    first, second = capture_clean.records
    assert first["question"] == QUESTIONS["eiffel"]  # nothing to condense in a first turn
    # What was retrieved for, and what the answer answers: the standalone question.
    assert second["question"] == QUESTIONS["fuji"]
    assert second["answer"] == response.response == "Mount Fuji is 3776 metres high."


# --- with the real monitor: scores and telemetry --------------------------------------------------


@pytest.fixture
def real_monitor(capgw: GroundwatchTelemetry) -> Iterator[gw.Monitor]:
    monitor = capgw.monitor(judge=gw.LocalJudge(), sampler=gw.RatioSampler(1.0))
    groundwatch_llamaindex.instrument(monitor, route="support")
    yield monitor
    groundwatch_llamaindex.uninstrument()


@pytest.mark.parametrize("kind", ["function", "react", "workflow"])
async def test_faithful_answer_is_grounded_and_a_changed_number_contradicted(
    real_monitor: gw.Monitor, capgw: GroundwatchTelemetry, kind: str
) -> None:
    memory = Memory.from_defaults(session_id="s-1", token_limit=4000)
    with capgw.tracer.start_as_current_span("request"):
        await make_agent(kind, FAITHFUL).run(user_msg=QUESTION, memory=memory)
        await make_agent(kind, CHANGED).run(user_msg=QUESTION, memory=memory)
    real_monitor.force_flush()

    (good_record, good), (_, bad) = capgw.results()
    assert good_record.contexts == [Passage(text=POLICY, kind="tool", tool="lookup_policy")]
    assert good.label == "grounded"
    assert bad.label == "hallucinated"
    assert [c.verdict for c in bad.claims] == ["contradicted"]
    # Evidence names the tool, not "passage 1".
    assert bad.claims[0].evidence[0].name == "tool lookup_policy"
    spans = capgw.spans()
    assert [s.attributes[semconv.GEN_AI_CONVERSATION_ID] for s in spans] == ["s-1", "s-1"]
    assert all(s.attributes[semconv.GROUNDWATCH_ROUTE] == "support" for s in spans)
    # Per-conversation views come from spans only: no metric point carries the id.
    for name in (semconv.METRIC_RECORDS, semconv.METRIC_EVALUATIONS, semconv.METRIC_CLAIMS):
        points = capgw.metric_points(name)
        assert points
        assert not any(semconv.GEN_AI_CONVERSATION_ID in attrs for attrs, _ in points)


async def test_conversation_context_adds_the_earlier_turns_last(
    index: VectorStoreIndex,
) -> None:
    monitor = RecordingMonitor()
    groundwatch_llamaindex.instrument(monitor, conversation_context=True)
    try:
        agent = FunctionAgent(
            tools=tools(lookup_policy),
            llm=llm(Script([("lookup_policy", {"topic": "x"})], FAITHFUL, "Yes, 30 days.")),
        )
        memory = ChatMemoryBuffer.from_defaults(chat_store_key="customer-42")
        await agent.run(user_msg=QUESTION, memory=memory)
        await agent.run(user_msg="Even for sale items?", memory=memory)
        engine = index.as_chat_engine(
            chat_mode="condense_plus_context", llm=ContextAnswerLLM(), similarity_top_k=1
        )
        engine.chat(QUESTIONS["fuji"])
        engine.chat(QUESTIONS["wall"])
    finally:
        groundwatch_llamaindex.uninstrument()

    first, second, chat_first, chat_second = monitor.records
    tool = Passage(text=POLICY, kind="tool", tool="lookup_policy")
    assert first["passages"] == [tool]  # a first turn has no earlier ones
    assert second["passages"] == [
        tool,
        Passage(text=QUESTION, kind="conversation", metadata={"role": "user"}),
        Passage(text=FAITHFUL, kind="conversation", metadata={"role": "assistant"}),
    ]
    assert [p.kind for p in chat_first["passages"]] == ["retrieved"]
    assert [(p.kind, p.text) for p in chat_second["passages"][1:]] == [
        ("conversation", QUESTIONS["fuji"]),
        ("conversation", FACTS["fuji"].split(". ")[0] + "."),
    ]


async def test_an_agent_workflow_handoff_is_not_a_passage(
    capture_clean: RecordingMonitor,
) -> None:
    def router(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        if messages[-1].role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content="Handed over.")
        call = ToolCallBlock(
            tool_call_id="h-1",
            tool_name="handoff",
            tool_kwargs={"to_agent": "policies", "reason": "a policy question"},
        )
        return ChatMessage(role="assistant", blocks=[call])

    def expert(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        if messages[-1].role == MessageRole.TOOL and messages[-1].content == POLICY:
            return ChatMessage(role="assistant", content=FAITHFUL)
        call = ToolCallBlock(
            tool_call_id="p-1", tool_name="lookup_policy", tool_kwargs={"topic": "refunds"}
        )
        return ChatMessage(role="assistant", blocks=[call])

    front = FunctionAgent(
        name="front",
        description="Routes questions.",
        tools=[],
        llm=llm(router),
        can_handoff_to=["policies"],
    )
    policies = FunctionAgent(
        name="policies",
        description="Knows the store's policies.",
        tools=tools(lookup_policy),
        llm=llm(expert),
    )
    workflow = AgentWorkflow(agents=[front, policies], root_agent="front")
    result = await workflow.run(user_msg=QUESTION)

    assert str(result) == FAITHFUL
    assert [c.tool_name for c in result.tool_calls] == ["handoff", "lookup_policy"]
    [record] = capture_clean.records
    assert record["answer"] == FAITHFUL
    assert record["passages"] == [Passage(text=POLICY, kind="tool", tool="lookup_policy")]


async def test_a_5_mb_tool_output_is_scored_cut_to_the_cap_and_marked(
    real_monitor: gw.Monitor, capgw: GroundwatchTelemetry
) -> None:
    agent = FunctionAgent(
        tools=tools(big_text, opaque),
        llm=llm(Script([("big_text", {}), ("opaque", {})], "The warehouse holds 40 mugs.")),
    )
    assert str(await agent.run(user_msg="How many mugs are there?")) == (
        "The warehouse holds 40 mugs."
    )
    real_monitor.force_flush()

    ((record, evaluation),) = capgw.results()
    assert len(record.contexts[0].text) <= MAX_PASSAGE_CHARS
    assert evaluation.label == "grounded"
    (span,) = capgw.spans()
    assert span.attributes[semconv.GROUNDWATCH_TRUNCATED] is True
    assert span.attributes[semconv.GROUNDWATCH_CONTEXTS_UNREADABLE] == 1
