"""What LlamaIndex's objects say, read on the request path without converting anything: what
kind of span a call is, a root's question, the nodes an answer was generated from and their
passage mappings, a tool's output, a chat's earlier turns and its memory's conversation id.

Each reader is guarded where it calls the application's code (a message's property, a tool's
output): a failure there is counted as bad input and the query is still recorded without it.
"""

from __future__ import annotations

import inspect
from typing import Any

from llama_index.core.agent.workflow import AgentWorkflow, BaseWorkflowAgent
from llama_index.core.agent.workflow.workflow_events import AgentOutput
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.chat_engine.types import (
    AgentChatResponse,
    BaseChatEngine,
    StreamingAgentChatResponse,
)
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from groundwatch.integration import (
    bad_input,
    earlier_turns,
    readable_tool_output,
    turn_passage,
)

from ._root import _AGENT, _CHAT_STREAM, _ENGINE, _OTHER, RootRun, _chat_engines, _kinds


def _kind(instance: Any) -> int:
    """What a span's instance is, cached per type.

    ``isinstance`` against LlamaIndex's abstract engine classes goes through ``ABCMeta`` and
    costs microseconds; this runs on every span of every query, so it is asked once per type.
    """
    cls = type(instance)
    kind = _kinds.get(cls)
    if kind is None:
        if issubclass(cls, (BaseQueryEngine, BaseChatEngine)):
            kind = _ENGINE
        elif issubclass(cls, StreamingAgentChatResponse):
            kind = _CHAT_STREAM
        elif issubclass(cls, (BaseWorkflowAgent, AgentWorkflow)):
            kind = _AGENT
        else:
            kind = _OTHER
        if len(_kinds) < 4096:
            _kinds[cls] = kind
    return kind


def _is_chat_engine(instance: Any) -> bool:
    cls = type(instance)
    chat = _chat_engines.get(cls)
    if chat is None:
        chat = issubclass(cls, BaseChatEngine)
        if len(_chat_engines) < 4096:
            _chat_engines[cls] = chat
    return chat


def _query_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, QueryBundle):
        return value.query_str
    content = getattr(value, "content", None)  # a ChatMessage
    return content if isinstance(content, str) else None


def _question(bound_args: inspect.BoundArguments) -> str | None:
    """The question of a root's call; ``None`` when it has none, or none that can be read (the
    application's message object raised): the query is still recorded, without it."""
    arguments = bound_args.arguments
    try:
        for key in ("str_or_query_bundle", "message", "query"):
            if key in arguments:
                return _query_text(arguments[key])
    except BaseException as exc:  # the application's code (a property); see _read_result
        bad_input("llama_index question", exc)
    return None


def _agent_question(bound_args: inspect.BoundArguments) -> str | None:
    """An agent run's question: the ``user_msg`` of its start event (text or a message)."""
    start = bound_args.arguments.get("start_event")
    if start is None:
        return None  # a run resumed from a context
    try:
        return _query_text(start.get("user_msg", None))
    except BaseException as exc:  # the application's message object
        bad_input("llama_index question", exc)
        return None


def _method(span_id: str) -> str:
    # Span ids are "<Class>.<method>-<uuid4>" (see Dispatcher.span).
    return span_id.partition("-")[0].rpartition(".")[2]


def _node_key(node: NodeWithScore) -> str:
    return node.node.node_id


def _select_nodes(root: RootRun) -> list[NodeWithScore]:
    """The nodes the answer was generated from.

    The final response's source nodes are what the LLM saw (after post-processors and
    re-rankers). Engines that synthesise over derived nodes as well (a sub-question engine adds
    one "Sub question: ... Response: ..." node per sub-answer) also list the retrieved nodes
    there; when some source nodes were retrieved in this query, only those are kept, so the
    answer is checked against the documents. Without source nodes, every retrieved node counts.
    """
    retrieved_ids = {_node_key(n) for n in root.retrieved}
    chosen = root.source_nodes or []
    if chosen and retrieved_ids:
        kept = [n for n in chosen if _node_key(n) in retrieved_ids]
        if kept:
            chosen = kept
    if not chosen:
        chosen = root.retrieved
    seen: set[str] = set()
    unique: list[NodeWithScore] = []
    for n in chosen:
        key = _node_key(n)
        if key not in seen:
            seen.add(key)
            unique.append(n)
    return unique


def _passage(node: NodeWithScore) -> dict[str, Any]:
    """A node as a passage mapping (``text``, ``id``, ``score``, ``metadata``).

    A plain mapping rather than a :class:`groundwatch.Passage`: the monitor validates it into a
    ``Passage`` on its worker, and only for sampled records, which keeps pydantic validation off
    the request path. The text and a shallow copy of the metadata are taken now, so nothing of
    LlamaIndex is referenced once the query has returned.
    """
    inner = node.node
    return {
        "text": inner.get_content(),
        "id": inner.node_id,
        "score": node.score,
        "metadata": dict(inner.metadata),
    }


def _source_nodes(raw: Any) -> list[Any] | None:
    """The documents a tool returned, when it returned documents: a query engine's response
    (``QueryEngineTool``: its source nodes, not the sub-engine's synthesised answer, which is a
    model's text), or a list of nodes (``RetrieverTool``, or a function returning nodes)."""
    if isinstance(
        raw,
        (
            Response,
            StreamingResponse,
            AsyncStreamingResponse,
            PydanticResponse,
            AgentChatResponse,
            StreamingAgentChatResponse,
        ),
    ):
        # A streamed response's nodes are known before its text: its text is never read here.
        return raw.source_nodes if isinstance(raw.source_nodes, list) else []
    if isinstance(raw, NodeWithScore | BaseNode):
        return [raw]
    if isinstance(raw, list) and raw and all(isinstance(n, NodeWithScore | BaseNode) for n in raw):
        return raw
    return None


def _tool_value(output: Any) -> tuple[Any, bool]:
    """What of a ``ToolOutput`` becomes context: ``(value, readable)``.

    The raw output when it is data (a string, a mapping, rows, a model: written as JSON with
    sorted keys on the worker, not as the ``str()`` LlamaIndex shows the model); the text
    LlamaIndex made of it for content blocks, an agent's output or a tool that set no raw
    output. Nothing is converted here: the request path only keeps a reference.
    """
    raw = output.raw_output
    if (
        raw is None
        or isinstance(raw, TextBlock | AgentOutput)
        or (isinstance(raw, list) and raw and all(isinstance(b, TextBlock) for b in raw))
    ):
        try:
            text = output.content
        except BaseException as exc:  # the application's object; see Capture._read_result
            bad_input("llama_index tool output", exc)
            return None, False
        return text, bool(text)
    return raw, readable_tool_output(raw)


_USER_MARK = ChatMessage(role=MessageRole.USER, content="")
"""Stands for the current turn's message after a chat engine's history (which ends before it)."""


def speaker(message: Any) -> str | None:
    """Who wrote a message of a conversation (``groundwatch.integration.earlier_turns``):
    ``"user"`` or ``"assistant"`` for a chat message without tool calls."""
    if not isinstance(message, ChatMessage):
        return None
    if message.role == MessageRole.USER:
        return "user"
    if message.role != MessageRole.ASSISTANT or message.additional_kwargs.get("tool_calls"):
        return None
    return None if any(isinstance(b, ToolCallBlock) for b in message.blocks) else "assistant"


def _earlier_turns(messages: Any) -> list[Any]:
    """The messages before the current turn's (the last user message) that people wrote or
    read: user messages and answers, not system prompts, tool calls or tool results."""
    return earlier_turns(messages, speaker)


def _turn_passage(message: Any) -> dict[str, Any] | None:
    """An earlier turn's message as a ``conversation`` context (None without text)."""
    return turn_passage(message.content, speaker(message))


def _memory_id(memory: Any) -> str | None:
    """The conversation a chat memory names: ``Memory.session_id``, or a chat-store memory's
    ``chat_store_key`` unless it is LlamaIndex's default (shared by every such memory)."""
    if memory is None:
        return None
    session_id = getattr(memory, "session_id", None)
    if isinstance(session_id, str) and session_id:
        return session_id
    key = getattr(memory, "chat_store_key", None)
    if isinstance(key, str) and key and key != DEFAULT_CHAT_STORE_KEY:
        return key
    return None
