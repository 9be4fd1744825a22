"""The run of one top-level LlamaIndex query, chat turn or agent run: :class:`RootRun`, and the
binding (``instrument()``'s monitor, route and engine) it reports to.

The tracker's fields (the span map, the sampler's decision, tool outputs) are the core's
:class:`~groundwatch.integration.TrackedRun`'s; a :class:`RootRun` adds what LlamaIndex's spans
and events tell about the query (as LangChain's ``RootRun`` does for a chain's run).
"""

from __future__ import annotations

import weakref
from collections.abc import (
    Callable,
)
from typing import Any

from llama_index.core.schema import NodeWithScore
from opentelemetry import trace as trace_api

from groundwatch.integration import (
    MonitorLike,
    TrackedRun,
)

ROOT_METHODS = frozenset({"query", "aquery", "chat", "achat", "stream_chat", "astream_chat"})
"""Engine methods whose span starts a record when no tracked span encloses it."""

AGENT_ROOT_METHOD = "run"
"""An agent workflow's run span (``FunctionAgent.run-<uuid>``, entered by the workflow runtime
around every step of one ``agent.run(...)``): a record when no tracked span encloses it."""

TOOL_STEP_METHOD = "call_tool"
"""The agent step that calls one tool and returns its ``ToolCallResult`` (``BaseWorkflowAgent``
and ``AgentWorkflow`` alike): the place every tool's output passes, whatever the tool."""

HANDOFF_TOOL = "handoff"
"""``AgentWorkflow``'s routing tool: its output says which agent takes over, not a source."""

_WRITER_METHODS = frozenset({"write_response_to_history", "awrite_response_to_history"})
"""Methods of ``StreamingAgentChatResponse`` that consume a streamed chat answer to its end."""

DEFAULT_MAX_OPEN_ROOTS = 4096
"""Queries tracked at once; beyond it the oldest is given up (counted as ``evicted``)."""

DEFAULT_PENDING_TIMEOUT_S = 600.0
"""How long a streamed chat answer may stay unfinished before its query is given up."""

MAX_SPANS_PER_ROOT = 10_000
MAX_NODES_PER_ROOT = 1_000

_OTHER, _ENGINE, _CHAT_STREAM, _AGENT = 0, 1, 2, 3
_kinds: dict[type, int] = {}
_chat_engines: dict[type, bool] = {}
_NOT_RETRIEVAL, _RETRIEVAL_START, _RETRIEVAL_END, _CHAT_START = 0, 1, 2, 3
_retrieval_kinds: dict[type, int] = {}


class _Binding:
    """One ``instrument()`` call: where records go, and which engine they come from."""

    __slots__ = ("active", "conversation_context", "engine", "monitor", "route", "tools")

    def __init__(
        self,
        monitor: MonitorLike,
        route: str | None,
        engine: weakref.ref[Any] | None,
        tools: Callable[[str | None], bool] | None = None,
        conversation_context: bool = False,
    ) -> None:
        self.monitor = monitor
        self.route = route
        self.engine = engine
        self.tools = tools  # which tools' outputs are context (None: every tool)
        self.conversation_context = conversation_context
        self.active = True  # False once uninstrumented: its queries in flight report nothing


def _replace_bindings(old: tuple[_Binding, ...], new: tuple[_Binding, ...]) -> None:
    for binding in old:
        if binding not in new:
            binding.active = False


class RootRun(TrackedRun[str]):
    """Everything captured for one top-level query or chat turn, keyed by its span id.

    The tracker's fields (``retrieving``: a retrieval or a tool call started, even if it found
    nothing; ``decision``: taken then, a query that will not be scored keeps no nodes;
    ``dropped``, ``tool_outputs``, ``tool_errors``, ``unreadable``, ``conversation_id``) come
    from :class:`~groundwatch.integration.TrackedRun`.
    """

    __slots__ = (
        "agent",
        "answer",
        "answer_unreadable",
        "binding",
        "chat",
        "condensed",
        "engine",
        "error",
        "exited",
        "finished",
        "handoffs",
        "overflow",
        "pending",
        "question",
        "retrieved",
        "source_nodes",
        "stream",
        "stream_ended",
        "tool_called",
        "tool_slots",
        "tool_steps",
        "turns",
        "writer_seen",
    )

    # A query engine's query is a retrieval by nature: given up, it is reported ``evicted``
    # even before its retrieval event.
    report_unretrieved_eviction = True

    def __init__(
        self,
        id_: str,
        binding: _Binding,
        engine: str,
        question: str | None,
        span_context: trace_api.SpanContext | None,
    ) -> None:
        super().__init__(id_, binding.monitor, binding.route, span_context)
        self.binding = binding
        self.engine = engine
        self.question = question
        self.retrieved: list[NodeWithScore] = []
        self.overflow = 0  # retrieved nodes past MAX_NODES_PER_ROOT (not kept)
        self.source_nodes: list[NodeWithScore] | None = None
        self.answer: str | None = None
        self.answer_unreadable = False  # reading the response raised (the app's __str__...)
        self.error: str | None = None
        self.stream: str | None = None  # None, "complete" or "closed"
        self.stream_ended = False  # the wrapped generator ended, or was collected unread
        self.pending = 0  # stream consumers still running (chat writers, wrapped generators)
        self.exited = False
        self.finished = False
        self.writer_seen = False
        self.agent = False  # an agent's run: its tools' outputs are the passages
        self.handoffs = False  # an AgentWorkflow's: its handoff tool only routes
        self.chat = False  # a chat engine's turn: the question is the one it retrieved with
        self.condensed: str | None = None
        self.tool_called = False
        # One slot per tool call of the agent itself, in call order (parallel calls finish in
        # any order): a ToolOutput, (tool name, nodes) for a retrieving tool, or None.
        self.tool_slots: list[Any] = []
        self.tool_steps: dict[str, int] = {}  # call_tool span id -> its slot
        # The earlier turns' messages (conversation_context only; None: not taken yet).
        self.turns: list[Any] | None = None

    def target(self) -> MonitorLike | None:
        # Uninstrumented while the query ran: nothing to report to.
        return self.monitor if self.binding.active else None
