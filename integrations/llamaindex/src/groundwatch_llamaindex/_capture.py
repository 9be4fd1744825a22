"""The capture of LlamaIndex queries: :class:`Capture`, the state every handler shares.

It binds engines to monitors, opens a :class:`~._root.RootRun` for each top-level call, maps
the spans entered below it, collects retrievals, tool outputs and the answer (streamed or not)
and hands the finished record to ``Monitor.record``. Every method runs on the host's request
path and is guarded by the handlers that call it.
"""

from __future__ import annotations

import inspect
import threading
import uuid
import weakref
from collections.abc import (
    Callable,
)
from typing import Any

from llama_index.core.agent.workflow import AgentWorkflow
from llama_index.core.agent.workflow.workflow_events import AgentOutput
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.chat_engine.types import (
    AgentChatResponse,
    StreamingAgentChatResponse,
)
from llama_index.core.workflow import StopEvent
from opentelemetry import trace as trace_api

from groundwatch.integration import (
    Decision,
    MonitorLike,
    RunTracker,
    bad_input,
    suppressed,
)
from groundwatch.telemetry import semconv

from ._extract import (
    _USER_MARK,
    _agent_question,
    _earlier_turns,
    _is_chat_engine,
    _kind,
    _memory_id,
    _method,
    _passage,
    _query_text,
    _question,
    _select_nodes,
    _turn_passage,
)
from ._root import (
    _AGENT,
    _CHAT_STREAM,
    _ENGINE,
    _WRITER_METHODS,
    AGENT_ROOT_METHOD,
    DEFAULT_MAX_OPEN_ROOTS,
    DEFAULT_PENDING_TIMEOUT_S,
    MAX_NODES_PER_ROOT,
    MAX_SPANS_PER_ROOT,
    ROOT_METHODS,
    TOOL_STEP_METHOD,
    RootRun,
    _Binding,
    _kinds,
    _replace_bindings,
)
from ._stream import _async_stream, _sync_stream
from ._tools import agent_contexts, tool_result, tool_started_locked


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
        self._tracker: RunTracker[str, RootRun] = RunTracker(
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
                            tool_started_locked(self._tracker, parent_root, id_)
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
        root = RootRun(
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

    def _conversation_id(
        self, instance: Any, bound_args: inspect.BoundArguments, root: RootRun
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
            tool_result(self._tracker, root, id_, result)
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

    def _root_exit(self, root: RootRun, result: Any) -> None:
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

    def _read_result(self, root: RootRun, result: Any) -> bool:
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
            root.answer_unreadable = True
            return False

    def _read_answer(self, root: RootRun, result: Any) -> bool:
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

    def stream_end(self, root: RootRun, parts: list[str], outcome: BaseException | bool) -> None:
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

    def stream_abandoned(self, root: RootRun) -> None:
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

    def _maybe_finish(self, root: RootRun) -> None:
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

    def _finish(self, root: RootRun) -> None:
        if not root.binding.active:
            return  # uninstrumented meanwhile
        tracker = self._tracker
        if (
            not root.retrieving
            and not root.source_nodes
            and not root.tool_called
            and not root.answer_unreadable
        ):
            # Nothing was retrieved (a plain chat turn): there is nothing to ground the answer
            # in, and scoring it would report a retrieval failure that did not happen. Ignored,
            # as the LangChain integration ignores runs that never ran a retriever. A response
            # that could not be read is no such turn: a query engine's (a custom one whose
            # retrieval LlamaIndex never saw) answer was lost, and is counted below.
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
            contexts = agent_contexts(self._tracker, root)
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
