"""Span and event handlers that turn LlamaIndex queries and chat turns into groundwatch records.

LlamaIndex's instrumentation dispatcher calls every registered span handler when a decorated
method starts (``span_enter``), returns (``span_exit``) or raises (``span_drop``), and every event
handler for each event, on the thread (or asyncio task) doing the work. A *root* is the span of a
top-level ``query``/``aquery``/``chat``/``achat``/``stream_chat``/``astream_chat`` call on a query
or chat engine, or of an agent workflow's ``run``: one whose parent span is not itself part of a
tracked root. An agent's tool calls are its ``call_tool`` steps (direct children of the run's
span), whose ``ToolCallResult`` holds what each tool returned. Every span entered
below a root is mapped to it (span id -> root), so events such as ``RetrievalEndEvent`` can be
attributed to the right query even when many run concurrently. The map, its bounds, the
sampler's decision at the first retrieval and the query's one terminal call are the core's
:class:`~groundwatch.integration.RunTracker`'s; this module maps LlamaIndex's spans and events
onto it.

Work done here runs on the host's request path, so it is capture only: remember references,
turn the chosen nodes into passage mappings at the end and hand them to ``Monitor.record`` (which
only samples and enqueues). Nothing here raises into LlamaIndex: every entry point is guarded,
and failures are logged with a rate limit and counted (the core's guard, from
``groundwatch.integration``).
"""

from __future__ import annotations

import inspect
import threading
import uuid
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterator,
)
from typing import Any, TypeVar

from llama_index.core.agent.workflow import AgentWorkflow, BaseWorkflowAgent
from llama_index.core.agent.workflow.workflow_events import AgentOutput, ToolCallResult
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
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import LLMChatStartEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.workflow import StopEvent
from opentelemetry import trace as trace_api

from groundwatch.integration import (
    Decision,
    MonitorLike,
    RunTracker,
    ToolOutput,
    TrackedRun,
    bad_input,
    guarded,
    readable_tool_output,
    suppressed,
)
from groundwatch.telemetry import semconv

_F = TypeVar("_F", bound=Callable[..., Any])

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


class _Root(TrackedRun[str]):
    """Everything captured for one top-level query or chat turn, keyed by its span id.

    The tracker's fields (``retrieving``: a retrieval or a tool call started, even if it found
    nothing; ``decision``: taken then, a query that will not be scored keeps no nodes;
    ``dropped``, ``tool_outputs``, ``tool_errors``, ``unreadable``, ``conversation_id``) come
    from :class:`~groundwatch.integration.TrackedRun`.
    """

    __slots__ = (
        "agent",
        "answer",
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


def _report(handler: Any, where: str, exc: Exception) -> None:
    handler._capture.internal_error(where, exc)


def _guarded(where: str) -> Callable[[_F], _F]:
    """Never let an exception out of a handler method into LlamaIndex: log, count, go on."""
    return guarded(where, _report)


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


def _select_nodes(root: _Root) -> list[NodeWithScore]:
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


def _earlier_turns(messages: Any) -> list[Any]:
    """The messages before the current turn's (the last user message) that people wrote or
    read: user messages and answers, not system prompts, tool calls or tool results."""
    if not isinstance(messages, list):
        return []
    last = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        if getattr(messages[i], "role", None) == MessageRole.USER:
            last = i
            break
    return [
        m
        for m in messages[:last]
        if isinstance(m, ChatMessage)
        and m.role in (MessageRole.USER, MessageRole.ASSISTANT)
        and not any(isinstance(b, ToolCallBlock) for b in m.blocks)
        and not m.additional_kwargs.get("tool_calls")
    ]


def _turn_passage(message: Any) -> dict[str, Any] | None:
    """An earlier turn's message as a ``conversation`` context (None without text)."""
    text = message.content
    if not isinstance(text, str) or not text.strip():
        return None
    role = "user" if message.role == MessageRole.USER else "assistant"
    return {"text": text, "kind": "conversation", "metadata": {"role": role}}


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


class Capture:
    """The state shared by the span and event handlers: bindings and per-query roots."""

    def __init__(
        self,
        *,
        max_open_roots: int = DEFAULT_MAX_OPEN_ROOTS,
        pending_timeout_s: float = DEFAULT_PENDING_TIMEOUT_S,
    ) -> None:
        # Re-entrant lock: a stream wrapper may be finalised by the garbage collector while
        # this thread holds the lock, and its end calls back in here.
        self._tracker: RunTracker[str, _Root] = RunTracker(
            max_active_runs=max_open_roots, component="llama_index ", reentrant=True
        )
        # Every tracked span id -> its root (the tracker's map, read on every span).
        self._spans = self._tracker.links
        self._bindings: tuple[_Binding, ...] = ()
        self._pending_timeout_s = pending_timeout_s
        # A chat engine whose memory names no conversation is one: an id per engine object.
        self._engine_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        # (The tracker starts afresh in a forked child: the parent's queries do not continue
        # there, and another thread may have held the lock at the moment of the fork.)

    @property
    def _lock(self) -> threading.Lock | threading.RLock:
        """The tracker's lock (replaced in a forked child)."""
        return self._tracker.lock

    @property
    def counts(self) -> dict[str, int]:
        """A snapshot of the tracker's counters (``groundwatch.integration.COUNTERS``)."""
        return self._tracker.counts

    @property
    def errors(self) -> int:
        """Internal failures caught by the guards (tests assert it stays 0)."""
        return self._tracker.counter("internal_errors")

    @property
    def evicted(self) -> int:
        """Queries given up unfinished (reported ``evicted``)."""
        return self._tracker.counter("evicted")

    @property
    def no_retrieval(self) -> int:
        """Top-level turns that never retrieved (a plain chat engine): not recorded."""
        return self._tracker.counter("no_retrieval")

    @property
    def not_sampled(self) -> int:
        """Queries the sampler declined when their retrieval started: no nodes kept, counted
        with ``monitor.record_decision``."""
        return self._tracker.counter("not_sampled")

    # --- bindings ---------------------------------------------------------------------------

    def bind(
        self,
        monitor: MonitorLike,
        route: str | None,
        engine: Any | None,
        tools: Callable[[str | None], bool] | None = None,
        conversation_context: bool = False,
    ) -> None:
        ref = weakref.ref(engine) if engine is not None else None
        with self._lock:
            kept = []
            for b in self._bindings:
                target = b.engine() if b.engine is not None else None
                if b.engine is not None and target is None:
                    continue  # its engine is gone
                if target is engine:
                    continue  # replaced by this call (the global binding when engine is None)
                kept.append(b)
            kept.append(_Binding(monitor, route, ref, tools, conversation_context))
            # Engine-scoped bindings win over a global one.
            kept.sort(key=lambda b: b.engine is None)
            old, self._bindings = self._bindings, tuple(kept)
            _replace_bindings(old, self._bindings)

    def unbind(self, engine: Any | None) -> None:
        with self._lock:
            old, self._bindings = (
                self._bindings,
                tuple(
                    b
                    for b in self._bindings
                    if (b.engine() if b.engine is not None else None) is not engine
                ),
            )
            _replace_bindings(old, self._bindings)

    def forget_all(self) -> None:
        """Drop every query in flight (dispatcher shutdown): none of them reports."""
        self._tracker.forget_all()

    def unbind_all(self) -> None:
        with self._lock:
            _replace_bindings(self._bindings, ())
            self._bindings = ()
        self.forget_all()

    @property
    def open_roots(self) -> int:
        """Queries being tracked right now."""
        return self._tracker.active_runs

    @property
    def tracked_spans(self) -> int:
        return self._tracker.tracked_ids

    def _match(self, instance: Any) -> _Binding | None:
        for binding in self._bindings:
            if binding.engine is None or binding.engine() is instance:
                return binding
        return None

    def internal_error(self, where: str, exc: BaseException) -> None:
        # Counted in groundwatch.errors and logged at most once a minute by the core's guard;
        # never re-raised: the caller is LlamaIndex (or the application iterating a stream).
        self._tracker.internal_error(where, exc, reraise=False)

    # --- spans ------------------------------------------------------------------------------

    def enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any,
        parent_span_id: str | None,
    ) -> None:
        if not self._bindings:
            return
        if parent_span_id is not None:
            parent_root = self._spans.get(parent_span_id)
            if parent_root is not None:
                tracker = self._tracker
                with tracker.lock:
                    # None when the root finished meanwhile, or has MAX_SPANS_PER_ROOT spans.
                    if tracker.link_locked(id_, parent_span_id, MAX_SPANS_PER_ROOT) is not None:
                        kind = _kinds.get(type(instance))  # _kind() without a call, mostly
                        if kind is None:
                            kind = _kind(instance)
                        if kind == _CHAT_STREAM and _method(id_) in _WRITER_METHODS:
                            # Counted at the root's exit already when it exited first.
                            if not (parent_root.exited and not parent_root.writer_seen):
                                parent_root.pending += 1
                            parent_root.writer_seen = True
                        elif (
                            parent_root.agent
                            and parent_span_id == parent_root.key
                            and _method(id_) == TOOL_STEP_METHOD
                        ):
                            # A tool call of the agent itself (not of an agent inside a tool:
                            # that one's answer is this tool's output).
                            self._tool_started_locked(parent_root, id_)
                return
        kind = _kind(instance)
        method = _method(id_)
        if kind == _ENGINE:
            if method not in ROOT_METHODS:
                return
        elif kind != _AGENT or method != AGENT_ROOT_METHOD:
            return
        binding = self._match(instance)
        if binding is None or suppressed():
            return
        span_context = trace_api.get_current_span().get_span_context()
        agent = kind == _AGENT
        root = _Root(
            id_,
            binding,
            type(instance).__name__,
            _agent_question(bound_args) if agent else _question(bound_args),
            span_context if span_context.is_valid else None,
        )
        root.agent = agent
        root.handoffs = agent and isinstance(instance, AgentWorkflow)
        root.chat = not agent and _is_chat_engine(instance)
        root.conversation_id = self._conversation_id(instance, bound_args, root)
        if root.chat and binding.conversation_context:
            root.turns = self._chat_history(instance, bound_args)
        # Gives up (and reports) the oldest queries past the limits first.
        self._tracker.start(root)

    def _tool_started_locked(self, root: _Root, span_id: str) -> None:
        root.tool_called = True
        # Taken when the first tool (or retrieval) starts, as for a query's retrieval: a run
        # that will not be scored keeps no outputs.
        if self._tracker.decide(root) is not Decision.SAMPLED:
            return
        if len(root.tool_slots) >= MAX_NODES_PER_ROOT:
            root.dropped += 1
            self._tracker.count_locked("documents_dropped")
            return
        root.tool_steps[span_id] = len(root.tool_slots)
        root.tool_slots.append(None)

    def _tool_result(self, root: _Root, span_id: str, result: Any) -> None:
        """Keeps a reference to what a tool call returned, in its call's slot."""
        with self._lock:
            slot = root.tool_steps.pop(span_id, None)
        if slot is None or not isinstance(result, ToolCallResult):
            return
        name = result.tool_name
        output = result.tool_output
        if output.is_error:
            # What the model was told about the failure is not evidence for the answer.
            with self._lock:
                root.tool_errors += 1
                self._tracker.count_locked("tool_errors")
            return
        if name == HANDOFF_TOOL and root.handoffs:
            return
        accepts = root.binding.tools
        if accepts is not None and not accepts(name):
            return
        value: Any
        nodes = _source_nodes(output.raw_output)
        if nodes is not None:
            value = (name, nodes)
        else:
            data, readable = _tool_value(output)
            if not readable:
                with self._lock:
                    root.unreadable += 1
                    self._tracker.count_locked("tool_outputs_unreadable")
                return
            value = ToolOutput(data, name)
        with self._lock:
            root.tool_slots[slot] = value

    def _conversation_id(
        self, instance: Any, bound_args: inspect.BoundArguments, root: _Root
    ) -> str | None:
        """The id of the conversation a turn belongs to, or ``None`` when none is known.

        An agent's run: the ``memory=`` it was given (``Memory(session_id=...)``, or a
        chat-store memory's own key). A chat engine's turn: its memory's, or else an id of the
        engine object (a chat engine holds one conversation), unless the call passed its own
        ``chat_history``.
        """
        try:
            if root.agent:
                start = bound_args.arguments.get("start_event")
                return _memory_id(start.get("memory", None)) if start is not None else None
            if not root.chat:
                return None
            found = _memory_id(getattr(instance, "_memory", None))
            if found is not None or bound_args.arguments.get("chat_history") is not None:
                return found
            with self._lock:
                engine_id = self._engine_ids.get(instance)
                if engine_id is None:
                    engine_id = self._engine_ids[instance] = uuid.uuid4().hex
            return engine_id
        except BaseException as exc:  # the application's objects (a property, an odd engine)
            bad_input("llama_index conversation", exc)
            return None

    @staticmethod
    def _chat_history(instance: Any, bound_args: inspect.BoundArguments) -> list[Any]:
        """A chat engine's conversation before this turn (opt-in): the ``chat_history`` the
        call passed, or else the engine's own (its memory's messages, read before the turn's
        message joins them)."""
        try:
            history = bound_args.arguments.get("chat_history")
            if history is None:
                history = instance.chat_history
            if not isinstance(history, list):
                return []
            # The history ends before this turn's message: all of it is earlier.
            return _earlier_turns([*history, _USER_MARK])
        except BaseException as exc:  # the application's engine (a property)
            bad_input("llama_index chat history", exc)
            return []

    def chat_start(self, event: Any) -> None:
        """An agent's first model call (opt-in): the messages before the user's are the
        conversation so far, whichever memory (or context) the run was given."""
        span_id = event.span_id
        root = self._spans.get(span_id) if span_id is not None else None
        if root is None or not root.agent or root.turns is not None:
            return
        if not root.binding.conversation_context:
            return
        with self._lock:
            if root.turns is None:
                root.turns = _earlier_turns(event.messages)

    def exit(self, id_: str, instance: Any, result: Any) -> None:
        root = self._spans.get(id_)
        if root is None:
            return
        if id_ == root.key:
            self._root_exit(root, result)
            return
        if root.tool_steps and id_ in root.tool_steps:
            self._tool_result(root, id_, result)
            return
        kind = _kinds.get(type(instance))  # _kind() without a call, mostly
        if kind is None:
            kind = _kind(instance)
        if kind == _CHAT_STREAM and _method(id_) in _WRITER_METHODS:
            # The chat writer has consumed the whole LLM stream; .response is the full text.
            try:
                answer = instance.response
            except BaseException as exc:  # the application's object; see _read_result
                bad_input("llama_index response", exc)
                answer = None
            with self._lock:
                root.answer = answer
                root.stream = "complete"
                root.pending -= 1
            self._maybe_finish(root)

    def drop(self, id_: str, instance: Any, err: BaseException | None) -> None:
        root = self._spans.get(id_)
        if root is None:
            return
        error_type = type(err).__name__ if err is not None else "dropped"
        if id_ == root.key:
            with self._lock:
                root.error = error_type
                root.exited = True
                root.expire_in(self._pending_timeout_s)
            self._maybe_finish(root)
        elif _kind(instance) == _CHAT_STREAM and _method(id_) in _WRITER_METHODS:
            with self._lock:
                root.error = error_type
                root.pending -= 1
            self._maybe_finish(root)

    def _root_exit(self, root: _Root, result: Any) -> None:
        # Whatever reading the result does, the query ends below in one counted decision.
        # _read_result catches what the application's objects raise; what is left is ours.
        # BaseException too: the dispatcher swallows whatever a handler raises anyway, and a
        # root left unfinished here would never be counted.
        try:
            streamed = self._read_result(root, result)
        except BaseException as exc:
            streamed = False
            root.error = semconv.ERROR_INTERNAL
            self.internal_error("span exit", exc)
        with self._lock:
            root.exited = True
            # A chat stream's writer may still hold the query: given up after this long.
            root.expire_in(self._pending_timeout_s)
            if streamed:
                # Nothing below the root can start any more; the wrapped stream alone holds the
                # query from here, so a stream nobody consumes leaves nothing behind.
                root.pending += 1
                self._tracker.forget_locked(root)
        self._maybe_finish(root)

    def _read_result(self, root: _Root, result: Any) -> bool:
        """Take the answer and the source nodes from a root's result; whether it streams.

        The result is the application's object: reading it runs the application's code (a
        ``__str__``, a property), which may raise anything, ``BaseException`` included. Such a
        failure is the caller's bad input, not an error of ours: unreadable source nodes leave
        the retrieved nodes to score against, an unreadable answer leaves none (``no_answer``).
        """
        try:
            source_nodes = getattr(result, "source_nodes", None)
        except BaseException as exc:
            bad_input("llama_index response", exc)
            source_nodes = None
        if isinstance(source_nodes, list):
            root.source_nodes = source_nodes
        try:
            return self._read_answer(root, result)
        except BaseException as exc:
            bad_input("llama_index response", exc)
            root.answer = None
            return False

    def _read_answer(self, root: _Root, result: Any) -> bool:
        streamed = False
        if isinstance(result, StreamingResponse) and result.response_txt is None:
            streamed = True
            result.response_gen = _sync_stream(self, root, result.response_gen)
            weakref.finalize(result.response_gen, self.stream_abandoned, root)
        elif isinstance(result, AsyncStreamingResponse) and result.response_txt is None:
            streamed = True
            result.response_gen = _async_stream(self, root, result.response_gen)
            weakref.finalize(result.response_gen, self.stream_abandoned, root)
        elif isinstance(result, StreamingAgentChatResponse):
            # The answer arrives when the writer span (a thread or a task the chat engine
            # started) exits; it may already have, or not have started yet.
            with self._lock:
                if not root.writer_seen:
                    root.pending += 1
        elif isinstance(result, (Response, AgentChatResponse)):
            root.answer = result.response
        elif isinstance(result, StopEvent):
            # An agent's run: the final response (the last message without tool calls).
            output = result.result
            if isinstance(output, AgentOutput):
                root.answer = output.response.content
            elif output is not None:
                root.answer = str(output)
        elif isinstance(result, (StreamingResponse, AsyncStreamingResponse)):
            root.answer = result.response_txt
        elif result is not None:
            root.answer = str(result)  # PydanticResponse and the like
        return streamed

    def stream_end(self, root: _Root, parts: list[str], outcome: BaseException | bool) -> None:
        """A wrapped stream ended: exhausted (True), closed early (False) or failed."""
        try:
            with self._lock:
                root.stream_ended = True
                if isinstance(outcome, BaseException):
                    root.error = type(outcome).__name__
                else:
                    root.answer = "".join(parts)
                    root.stream = "complete" if outcome else "closed"
                root.pending -= 1
            self._maybe_finish(root)
        except BaseException as exc:
            self.internal_error("stream end", exc)

    def stream_abandoned(self, root: _Root) -> None:
        """A wrapped stream was garbage collected: if nobody ever read it (a generator that
        never started runs no ``finally``), the query ends ``cancelled``, as the LangChain
        integration counts a run abandoned mid-stream, instead of ending with no decision."""
        try:
            with self._lock:
                if root.stream_ended:
                    return
                root.stream_ended = True
                root.error = semconv.ERROR_CANCELLED
                root.pending -= 1
            self._maybe_finish(root)
        except BaseException as exc:
            self.internal_error("stream abandoned", exc)

    def _maybe_finish(self, root: _Root) -> None:
        with self._lock:
            # ``reported``: given up (evicted) or forgotten (dispatcher shut down) meanwhile.
            if root.finished or root.reported or not root.exited or root.pending > 0:
                return
            root.finished = True
            self._tracker.forget_locked(root)
        try:
            self._finish(root)
        except BaseException as exc:
            # A bug of ours while building the record (or a node whose text raised): the
            # query still gets its one terminal call, unless it was made.
            self.internal_error("finish", exc)
            self._tracker.fail_internal(root)

    def _finish(self, root: _Root) -> None:
        if not root.binding.active:
            return  # uninstrumented meanwhile
        tracker = self._tracker
        if not root.retrieving and not root.source_nodes and not root.tool_called:
            # Nothing was retrieved (a plain chat turn): there is nothing to ground the answer
            # in, and scoring it would report a retrieval failure that did not happen. Ignored,
            # as the LangChain integration ignores runs that never ran a retriever.
            tracker.ignore(root)
            return
        if root.error is not None:
            tracker.fail(root, root.error)
            return
        if root.answer is None:
            tracker.count("no_answer")
            tracker.fail(root, semconv.ERROR_NO_ANSWER)
            return
        if not root.sampled:
            tracker.decline(root)
            return
        attributes: dict[str, Any] = {semconv.LLAMA_INDEX_ENGINE: root.engine}
        if root.agent:
            contexts = self._agent_contexts(root)
        else:
            if len(root.retrieved) > MAX_NODES_PER_ROOT:
                del root.retrieved[MAX_NODES_PER_ROOT:]
            selected = _select_nodes(root)
            # Retrieved nodes past the cap, and chosen ones past it: not recorded.
            root.dropped += root.overflow
            if len(selected) > MAX_NODES_PER_ROOT:
                root.dropped += len(selected) - MAX_NODES_PER_ROOT
                del selected[MAX_NODES_PER_ROOT:]
            if root.dropped:
                tracker.count("documents_dropped", root.dropped)
            contexts = [_passage(n) for n in selected]
        if root.turns:
            # Last in the list, so that the passage cap cuts them first.
            contexts.extend(t for t in map(_turn_passage, root.turns) if t is not None)
        if root.stream is not None:
            attributes[semconv.LLAMA_INDEX_STREAM] = root.stream
        # The tracker adds contexts.dropped, the tool counts and the conversation's id.
        tracker.record(
            root,
            question=root.condensed if root.chat and root.condensed else root.question,
            contexts=contexts,
            answer=root.answer,
            attributes=attributes,
            tools=root.agent,
        )

    def _agent_contexts(self, root: _Root) -> list[Any]:
        """An agent run's passages: each tool call's output in call order (a retrieving tool's
        documents, each once), with the counts of what was left out."""
        contexts: list[Any] = []
        seen: set[str] = set()
        tools = 0
        for slot in root.tool_slots:
            if slot is None:
                continue
            if isinstance(slot, ToolOutput):
                contexts.append(slot)
                tools += 1
                continue
            name, nodes = slot
            for node in nodes:
                with_score = node if isinstance(node, NodeWithScore) else NodeWithScore(node=node)
                key = _node_key(with_score)
                if key in seen:
                    continue
                seen.add(key)
                passage = _passage(with_score)
                passage["kind"] = "retrieved"
                passage["tool"] = name
                contexts.append(passage)
        root.tool_outputs = tools
        self._tracker.count("tool_outputs", tools)
        return contexts

    # --- events -----------------------------------------------------------------------------

    def retrieval(self, event: Any, end: bool = True) -> None:
        """Notes that the query retrieves; keeps the nodes of a ``RetrievalEndEvent``."""
        span_id = event.span_id
        root = self._spans.get(span_id) if span_id is not None else None
        if root is None:
            return  # a retriever used on its own, or a query not tracked
        tracker = self._tracker
        with tracker.lock:
            if root.chat and root.condensed is None:
                # A chat turn retrieves with the standalone question its engine condensed from
                # the conversation: that is the question the passages and the answer are for.
                root.condensed = _query_text(event.str_or_query_bundle)
            decision = tracker.decide(root)  # asks the sampler at the first retrieval only
            if not end or decision is not Decision.SAMPLED or root.agent:
                # An agent's passages are its tools' outputs (a retrieving tool's documents
                # among them), not every retrieval inside them.
                return
            nodes = event.nodes
            room = MAX_NODES_PER_ROOT - len(root.retrieved)
            if room >= len(nodes):
                root.retrieved.extend(nodes)
            else:
                room = max(room, 0)
                root.retrieved.extend(nodes[:room])
                root.overflow += len(nodes) - room


def _sync_stream(capture: Capture, root: _Root, inner: Iterator[str]) -> Generator[str, None, None]:
    """Wraps a query engine's token generator; records once it is exhausted or closed.

    A consumer that stops early closes the generator (explicitly, or when it is garbage
    collected): the text shown so far is recorded, marked ``llama_index.stream = closed``.
    """
    parts: list[str] = []
    outcome: BaseException | bool = False  # True: exhausted; an exception: failed
    try:
        for token in inner:
            parts.append(token)
            yield token
        outcome = True
    except GeneratorExit:
        raise
    except BaseException as exc:
        outcome = exc
        raise
    finally:
        capture.stream_end(root, parts, outcome)


async def _async_stream(
    capture: Capture, root: _Root, inner: AsyncIterator[str]
) -> AsyncGenerator[str, None]:
    """Async twin of :func:`_sync_stream`."""
    parts: list[str] = []
    outcome: BaseException | bool = False
    try:
        async for token in inner:
            parts.append(token)
            yield token
        outcome = True
    except GeneratorExit:
        raise
    except BaseException as exc:
        outcome = exc
        raise
    finally:
        capture.stream_end(root, parts, outcome)


def _set_capture(handler: Any, capture: Capture) -> None:
    # A plain instance attribute, not a pydantic PrivateAttr: private attributes are read through
    # BaseModel.__getattr__, which costs microseconds on every span and event.
    object.__setattr__(handler, "_capture", capture)


class GroundwatchSpanHandler(BaseSpanHandler[BaseSpan]):
    """Dispatcher span handler: finds top-level queries and follows their spans.

    It keeps no span objects, only the id map in :class:`Capture`, so LlamaIndex's
    ``open_spans`` bookkeeping stays empty. The dispatcher calls ``span_enter``/``span_exit``/
    ``span_drop`` for every span of every query; they are overridden directly (rather than the
    ``new_span``/``prepare_to_*`` hooks the base class calls from them) to keep that path short.
    """

    _capture: Capture

    def __init__(self, capture: Capture) -> None:
        super().__init__()
        _set_capture(self, capture)

    @classmethod
    def class_name(cls) -> str:
        return "GroundwatchSpanHandler"

    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # The guard is written out (not a decorator): this runs for every span of every query.
        try:
            self._capture.enter(id_, bound_args, instance, parent_id)
        except Exception as exc:
            self._capture.internal_error("span start", exc)

    def span_exit(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> None:
        # The guard is written out (not a decorator): this runs for every span of every query.
        try:
            self._capture.exit(id_, instance, result)
        except Exception as exc:
            self._capture.internal_error("span exit", exc)

    def span_drop(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        # The guard is written out (not a decorator): this runs for every span of every query.
        try:
            self._capture.drop(id_, instance, err)
        except Exception as exc:
            self._capture.internal_error("span drop", exc)

    def new_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        self.span_enter(id_, bound_args, instance, parent_span_id, tags)
        return None

    def prepare_to_exit_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        self.span_exit(id_, bound_args, instance, result)
        return None

    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        self.span_drop(id_, bound_args, instance, err)
        return None

    @_guarded("handler close")
    def close(self) -> None:
        # Dispatcher.shutdown(): forget every query in flight.
        self._capture.forget_all()


class GroundwatchEventHandler(BaseEventHandler):
    """Dispatcher event handler: collects the nodes of every retrieval inside a query (and, with
    ``conversation_context``, an agent's conversation from its first model call)."""

    _capture: Capture

    def __init__(self, capture: Capture) -> None:
        super().__init__()
        _set_capture(self, capture)

    @classmethod
    def class_name(cls) -> str:
        return "GroundwatchEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> Any:
        # Only retrievals matter; every other event of every query returns here at once.
        # (isinstance goes through pydantic's ABCMeta-based metaclass: a cached type check is
        # several times cheaper.)
        cls = type(event)
        kind = _retrieval_kinds.get(cls)
        if kind is None:
            if issubclass(cls, RetrievalEndEvent):
                kind = _RETRIEVAL_END
            elif issubclass(cls, RetrievalStartEvent):
                kind = _RETRIEVAL_START
            elif issubclass(cls, LLMChatStartEvent):
                kind = _CHAT_START
            else:
                kind = _NOT_RETRIEVAL
            if len(_retrieval_kinds) < 4096:
                _retrieval_kinds[cls] = kind
        if kind:
            try:
                if kind == _CHAT_START:
                    self._capture.chat_start(event)
                else:
                    self._capture.retrieval(event, end=kind == _RETRIEVAL_END)
            except Exception as exc:
                self._capture.internal_error("event", exc)
        return None
