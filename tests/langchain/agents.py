"""Real LangGraph agents for the agent tests: LangGraph's ``create_react_agent`` and LangChain
v1's ``create_agent`` over LangChain's ``GenericFakeChatModel``, its replies (tool calls
included) scripted per test."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool

QUESTION = "How long do I have to return an item for a refund?"
POLICY = "Refund policy: refunds are accepted within 30 days of purchase with a receipt."
FAITHFUL = "Refunds are accepted within 30 days of purchase with a receipt."
CHANGED = "Refunds are accepted within 45 days of purchase with a receipt."
PRICE = {"sku": "KB-101", "currency": "EUR", "price": 49.9}
PRICE_TEXT = '{"currency": "EUR", "price": 49.9, "sku": "KB-101"}'  # sorted keys


class ToolCallingFake(GenericFakeChatModel):
    """``GenericFakeChatModel`` that agents can bind tools to (the replies are scripted), and
    that streams a tool-calling reply as one chunk with its tool calls (the base class streams
    content only: a reply without content would stream nothing)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFake:
        return self

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._generate(messages, stop=stop, **kwargs).generations[0].message
        calls = getattr(reply, "tool_calls", None)
        if calls:
            chunks = [
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(calls)
            ]
            yield ChatGenerationChunk(
                message=AIMessageChunk(content=str(reply.content), tool_call_chunks=chunks)  # type: ignore[arg-type]
            )
            return
        words = str(reply.content).split(" ")
        for i, word in enumerate(words):
            token = word if i == len(words) - 1 else word + " "
            if run_manager is not None:
                run_manager.on_llm_new_token(token)
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))


def call(name: str, args: dict[str, Any] | None = None, call_id: str = "c1") -> dict[str, Any]:
    return {"name": name, "args": args or {}, "id": call_id, "type": "tool_call"}


def model(*replies: AIMessage | str) -> ToolCallingFake:
    """A model answering with ``replies`` in order (a string is a final answer)."""
    messages = [AIMessage(content=r) if isinstance(r, str) else r for r in replies]
    return ToolCallingFake(messages=iter(messages))


def tools_then(answer: str, *calls: dict[str, Any]) -> ToolCallingFake:
    """One turn: the model calls ``calls`` (in one message: parallel), then answers."""
    return model(AIMessage(content="", tool_calls=list(calls)), answer)


@tool
def lookup_policy(topic: str = "refunds") -> str:
    """Look up the store's policy on a topic."""
    return POLICY


@tool
def get_price(sku: str = "KB-101") -> dict[str, Any]:
    """Get a product's price."""
    return dict(PRICE)


class Opaque:
    """A tool result with nothing but Python's default repr."""


@tool
def get_handle(name: str = "main") -> Any:
    """Return an object no model can read."""
    return Opaque()


@tool
def record_nothing(note: str = "") -> None:
    """Store a note; returns nothing."""


@tool
def dump_table(name: str = "rows") -> dict[str, Any]:
    """Return a table of about 5 MB."""
    return {"rows": [{"n": i, "text": "row text " * 10} for i in range(55_000)]}


@tool
def broken_lookup(topic: str = "refunds") -> str:
    """A lookup whose backend is down."""
    raise RuntimeError("backend down: connection refused")


def react_agent(chat_model: Any, tools: Any, **kwargs: Any) -> Any:
    """LangGraph's prebuilt ReAct agent (deprecated in favour of LangChain v1's
    ``create_agent``, and still widely used)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(chat_model, _tools(tools), **kwargs)


def v1_agent(chat_model: Any, tools: Any, **kwargs: Any) -> Any:
    """LangChain v1's ``create_agent`` (the same kind of graph)."""
    from langchain.agents import create_agent

    return create_agent(chat_model, _tools(tools), **kwargs)


def _tools(tools: Any) -> Any:
    """A list of tools, or a ``ToolNode`` as given (it sets how tool errors are handled)."""
    return list(tools) if isinstance(tools, (list, tuple)) else tools


BUILDERS = {"create_react_agent": react_agent, "create_agent": v1_agent}


def ask(question: str = QUESTION) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}]}


def run(agent: Any, mode: str, config: dict[str, Any], question: str = QUESTION) -> Any:
    """Run ``agent`` once the way ``mode`` says; returns the final state or the last chunk."""
    if mode == "invoke":
        return agent.invoke(ask(question), config=config)
    if mode == "stream":
        return list(agent.stream(ask(question), config=config, stream_mode="updates"))
    if mode == "stream_messages":
        return list(agent.stream(ask(question), config=config, stream_mode="messages"))

    async def main() -> Any:
        if mode == "ainvoke":
            return await agent.ainvoke(ask(question), config=config)
        if mode == "astream":
            return [c async for c in agent.astream(ask(question), config=config)]
        if mode == "astream_events":
            return [e async for e in agent.astream_events(ask(question), config=config)]
        raise ValueError(mode)

    return asyncio.run(main())


def final_text(messages: Sequence[BaseMessage]) -> str:
    return str(messages[-1].content)
