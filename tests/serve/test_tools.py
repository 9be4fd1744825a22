"""Agents' traces: serve reads tool results as passages beside retrieved documents.

OpenInference TOOL spans (their ``output.value``) from the real LlamaIndex instrumentor on a
real agent, and spans written to the OpenTelemetry GenAI conventions (``execute_tool`` spans'
``gen_ai.tool.call.result``, ``retrieval`` spans' ``gen_ai.retrieval.documents``, as defined in
the ``open-telemetry/semantic-conventions-genai`` registry) sent through the SDK's exporter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

import groundwatch as gw
from groundwatch import Passage
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from .conftest import RunningReceiver, wait_for_evaluations
from .otlp import post, recorded
from .pipelines import app_provider, llamaindex_instrumented

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

POLICY = "Refunds are accepted within 30 days of purchase."
QUESTION = "What is the refund policy?"
FAITHFUL = "Refunds are accepted within 30 days of purchase."
CHANGED = "Refunds are accepted within 60 days of purchase."
SALE = "Items bought on sale can be returned within 14 days for store credit."


def _agent(answer: str) -> Any:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import MessageRole, ToolCallBlock
    from llama_index.core.llms import ChatMessage
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    def lookup_policy(topic: str) -> str:
        """The store's policy on a topic."""
        return POLICY

    def check_stock(item: str) -> str:
        """The stock of an item (the service is down)."""
        raise ConnectionError("inventory service unavailable")

    def model(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        if messages[-1].role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content=answer)
        calls = [
            ToolCallBlock(tool_call_id="c1", tool_name="lookup_policy", tool_kwargs={"topic": "x"}),
            ToolCallBlock(tool_call_id="c2", tool_name="check_stock", tool_kwargs={"item": "mug"}),
        ]
        return ChatMessage(role="assistant", blocks=calls)

    return FunctionAgent(
        tools=[FunctionTool.from_defaults(lookup_policy), FunctionTool.from_defaults(check_stock)],
        llm=MockFunctionCallingLLM(response_generator=model),
    )


async def test_openinference_llamaindex_agent_scored_against_its_tool_outputs(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    make = make_receiver(sampler=gw.RatioSampler(1.0))
    app = app_provider(make.url)
    tracer = app.provider.get_tracer("app")
    with llamaindex_instrumented(app.provider):
        for answer in (FAITHFUL, CHANGED):
            with tracer.start_as_current_span("POST /support"):
                await _agent(answer).run(user_msg=QUESTION)
    spans = await asyncio.to_thread(wait_for_evaluations, capgw, 2)

    (good_record, good), (bad_record, bad) = sorted(capgw.results(), key=lambda r: r[0].answer)
    tool = Passage(text=POLICY, kind="tool", tool="lookup_policy")
    for record in (good_record, bad_record):
        assert record.question == QUESTION
        # The tool that raised is not a passage: only the policy's output is.
        assert record.contexts == [tool]
    assert good_record.answer == FAITHFUL and good.label == "grounded"
    assert bad_record.answer == CHANGED and bad.label == "hallucinated"
    assert [c.verdict for c in bad.claims] == ["contradicted"]
    assert bad.claims[0].evidence[0].name == "tool lookup_policy"
    for span in spans:
        assert span.attributes[sc.GROUNDWATCH_CONTEXTS_TOOLS] == 1
        assert span.attributes[sc.GROUNDWATCH_TOOL_ERRORS] == 1
        assert span.attributes[sc.GROUNDWATCH_SERVE_SOURCE] == "openinference"


def _genai_agent_trace(
    tracer: Any, *, result: Any = POLICY, with_failure: bool = True, answer: str = FAITHFUL
) -> None:
    """One agent turn written as the GenAI conventions say: invoke_agent > chat, execute_tool,
    retrieval, chat (the answer)."""
    user = [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    with tracer.start_as_current_span(
        "invoke_agent support",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support",
            "gen_ai.conversation.id": "conv-7",
        },
    ):
        with tracer.start_as_current_span(
            "chat gpt-x",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(user),
                "gen_ai.response.id": "resp-1",
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool lookup_policy",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup_policy",
                "gen_ai.tool.call.id": "call-1",
                "gen_ai.tool.call.result": result,
            },
        ):
            pass
        if with_failure:
            # A failed call: error.type, and no result (the attribute is for successful ones).
            with tracer.start_as_current_span(
                "execute_tool check_stock",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "check_stock",
                    "error.type": "ConnectionError",
                },
            ):
                pass
        documents = [
            {"id": "sale-policy", "score": 0.91, "content": SALE},
            {"id": "no-text", "score": 0.5},  # ids and scores only: nothing to ground in
        ]
        with tracer.start_as_current_span(
            "retrieval handbook",
            attributes={
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.documents": json.dumps(documents),
            },
        ):
            pass
        output = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        with tracer.start_as_current_span(
            "chat gpt-x",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(user),
                "gen_ai.output.messages": json.dumps(output),
                "gen_ai.response.id": "resp-2",
            },
        ):
            pass


def test_genai_conventions_tool_results_and_retrieval_documents(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    app = app_provider(receiver.url)
    _genai_agent_trace(app.provider.get_tracer("app"))
    (span,) = wait_for_evaluations(capgw, 1)

    ((record, evaluation),) = capgw.results()
    assert record.question == QUESTION
    assert record.answer == FAITHFUL
    # In the order the spans started: the tool's result, then the retrieval's document.
    assert record.contexts == [
        Passage(text=POLICY, kind="tool", tool="lookup_policy"),
        Passage(text=SALE, id="sale-policy", score=0.91),
    ]
    assert evaluation.label == "grounded"
    assert span.attributes[sc.GEN_AI_CONVERSATION_ID] == "conv-7"
    assert span.attributes[sc.GROUNDWATCH_TOOL_ERRORS] == 1
    # gen_ai.evaluation.result: correlated with the completion it evaluated.
    events = capgw.events()
    assert events
    for event in events:
        assert event.log_record.attributes["gen_ai.response.id"] == "resp-2"


def test_a_structured_tool_result_is_json_with_sorted_keys(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    """``gen_ai.tool.call.result`` as the conventions prefer it: an object (an OTLP kvlist),
    which the Python SDK cannot write, so the request is edited after encoding."""
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    with recorded() as (provider, exported):
        _genai_agent_trace(provider.get_tracer("app"), result="placeholder", with_failure=False)
    request = encode_spans(exported.get_finished_spans())
    structured = AnyValue()
    for key, value in (("refunds", POLICY), ("days", 30)):
        entry = structured.kvlist_value.values.add()
        entry.key = key
        if isinstance(value, int):
            entry.value.int_value = value
        else:
            entry.value.string_value = value
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                for attribute in span.attributes:
                    if attribute.key == "gen_ai.tool.call.result":
                        attribute.value.CopyFrom(structured)
    assert post(receiver.url, request.SerializeToString()).status == 200
    wait_for_evaluations(capgw, 1)

    ((record, _),) = capgw.results()
    assert record.contexts[0] == Passage(
        text=json.dumps({"days": 30, "refunds": POLICY}), kind="tool", tool="lookup_policy"
    )


def _openinference_span(tracer: Any, name: str, kind: str, **attributes: Any) -> Any:
    return tracer.start_as_current_span(
        name, attributes={"openinference.span.kind": kind, **attributes}
    )


def test_a_retriever_inside_a_tool_gives_its_documents_and_a_nested_tool_is_its_parents(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    app = app_provider(receiver.url)
    tracer = app.provider.get_tracer("app")
    with _openinference_span(tracer, "agent", "AGENT", **{"input.value": QUESTION}):
        # A retriever wrapped as a tool: its documents, named after the tool; the tool's own
        # output (the documents again, formatted) is not a second copy.
        with (
            _openinference_span(
                tracer,
                "search_docs",
                "TOOL",
                **{"tool.name": "search_docs", "output.value": POLICY},
            ),
            _openinference_span(
                tracer,
                "retriever",
                "RETRIEVER",
                **{
                    "retrieval.documents.0.document.content": POLICY,
                    "retrieval.documents.0.document.id": "refunds",
                },
            ),
        ):
            pass
        # A subagent as a tool: its answer is the passage, not its own tools' outputs.
        with (
            _openinference_span(
                tracer,
                "ask_researcher",
                "TOOL",
                **{"tool.name": "ask_researcher", "output.value": SALE},
            ),
            _openinference_span(
                tracer,
                "lookup_policy",
                "TOOL",
                **{"tool.name": "lookup_policy", "output.value": "Sale: 14 days, credit."},
            ),
        ):
            pass
        with _openinference_span(
            tracer,
            "llm",
            "LLM",
            **{
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": FAITHFUL,
            },
        ):
            pass
    wait_for_evaluations(capgw, 1)

    ((record, evaluation),) = capgw.results()
    assert record.question == QUESTION
    assert record.contexts == [
        Passage(text=POLICY, id="refunds", tool="search_docs"),
        Passage(text=SALE, kind="tool", tool="ask_researcher"),
    ]
    assert evaluation.label == "grounded"


def test_pair_mode_pairs_the_answer_with_the_tools_before_it(
    capgw: GroundwatchTelemetry, make_receiver: Callable[..., RunningReceiver]
) -> None:
    receiver = make_receiver(sampler=gw.RatioSampler(1.0), per_pair=True)
    app = app_provider(receiver.url)
    _genai_agent_trace(app.provider.get_tracer("app"))
    (span,) = wait_for_evaluations(capgw, 1)

    # The first model call asked for the tools (no answer); the second answered from them.
    ((record, _),) = capgw.results()
    assert [p.tool for p in record.contexts] == ["lookup_policy", None]
    assert span.attributes[sc.GROUNDWATCH_TOOL_ERRORS] == 1
    assert span.parent.span_id == app.root().context.span_id


@pytest.mark.parametrize("openllmetry", [False, True], ids=["openinference", "openllmetry"])
def test_langchain_tools_under_their_instrumentors(
    capgw: GroundwatchTelemetry,
    make_receiver: Callable[..., RunningReceiver],
    openllmetry: bool,
) -> None:
    """LangChain tools traced by OpenInference's and OpenLLMetry's real instrumentors: a tool
    returning text, and one called with a tool call (its output a ``ToolMessage`` whose content
    is JSON), each read down to the output, then a chat model's answer."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.tools import tool

    from .pipelines import langchain_instrumented

    @tool
    def lookup_policy(topic: str) -> str:
        """The store's policy on a topic."""
        return POLICY

    @tool
    def get_order(order_id: str) -> dict[str, Any]:
        """An order's record."""
        return {"total": 42.5, "order": order_id}

    receiver = make_receiver(sampler=gw.RatioSampler(1.0))
    app = app_provider(receiver.url)
    tracer = app.provider.get_tracer("app")
    with (
        langchain_instrumented(app.provider, openllmetry=openllmetry),
        tracer.start_as_current_span("POST /agent"),
    ):
        lookup_policy.invoke({"topic": "refunds"})
        call = {
            "type": "tool_call",
            "id": "c1",
            "name": "get_order",
            "args": {"order_id": "A-17"},
        }
        get_order.invoke(call)
        FakeListChatModel(responses=[FAITHFUL]).invoke(QUESTION)
    wait_for_evaluations(capgw, 1)

    ((record, evaluation),) = capgw.results()
    assert record.answer == FAITHFUL
    assert record.contexts == [
        Passage(text=POLICY, kind="tool", tool="lookup_policy"),
        Passage(text='{"order": "A-17", "total": 42.5}', kind="tool", tool="get_order"),
    ]
    assert evaluation.label == "grounded"
