"""The LangChain callback handler: capture (question, documents, answer) per top-level run.

LangChain reports a run as a tree of callbacks keyed by ``run_id`` / ``parent_run_id``. The
handler keeps one small state object per top-level ("root") run in the core's
:class:`~groundwatch.integration.RunTracker`, which maps every live run id under it to that
state under one lock (callbacks of one run may arrive from several threads: ``batch``,
``RunnableParallel``; callbacks of many runs interleave on one event loop), gives up runs that
never end, takes the sampler's decision at the first retrieval and makes the run's one terminal
call. The handler maps LangChain's callbacks onto it.

Nothing here attaches an OpenTelemetry context: in a system of callbacks there is no guarantee the
matching detach would ever run. The span context current when the root run starts is stored in the
root's state and handed to the monitor with the record instead.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from langchain_core.callbacks import BaseCallbackHandler
from opentelemetry import trace
from opentelemetry.trace import SpanContext

from groundwatch.integration import (
    MAX_PASSAGES,
    ContextTools,
    Decision,
    MonitorLike,
    RunTracker,
    ToolOutput,
    TrackedRun,
    bad_input,
    guarded,
    raise_internal_errors,
    readable_tool_output,
    tool_filter,
    user_error,
)
from groundwatch.telemetry import semconv

from ._extract import (
    MESSAGES_KEY,
    SCORE_KEYS,
    AnswerExtractor,
    QuestionExtractor,
    default_answer,
    default_question,
    earlier_turns,
    odd_question,
    passage_of,
    plain,
    turn_in_progress,
    turn_passage,
    turn_tool_messages,
)

if TYPE_CHECKING:
    from uuid import UUID

    from langchain_core.documents import Document

#: Root runs tracked at once; when a new root would exceed it, the oldest is dropped and counted.
#: A root that never ends (a stream abandoned without being closed) would otherwise stay forever.
DEFAULT_MAX_ACTIVE_RUNS = 4096
#: A root still open after this long is dropped (and counted) the next time a root starts.
DEFAULT_MAX_RUN_AGE_SECONDS = 3600.0
#: Documents kept per root run; more are counted as dropped and the record is marked truncated.
DEFAULT_MAX_DOCUMENTS = MAX_PASSAGES

#: ``Monitor.record_failure`` error types used by this integration.
RETRIEVER_ERROR = semconv.ERROR_RETRIEVER
LLM_ERROR = semconv.ERROR_LLM
CHAIN_ERROR = semconv.ERROR_CHAIN
CANCELLED = semconv.ERROR_CANCELLED
NO_ANSWER = semconv.ERROR_NO_ANSWER
EXTRACTOR_ERROR = semconv.ERROR_EXTRACTOR
EVICTED = semconv.ERROR_EVICTED

#: Run metadata key that overrides the handler's route for one run:
#: ``chain.invoke(q, config={"metadata": {"groundwatch_route": "faq"}})``.
ROUTE_METADATA_KEY = "groundwatch_route"
#: Run metadata keys holding the conversation's id, looked up in order: ours, then LangGraph's
#: ``thread_id`` (it copies ``config["configurable"]["thread_id"]`` into every run's metadata),
#: then the names other stacks use (Langfuse's handler reads ``langfuse_session_id``).
CONVERSATION_METADATA_KEYS: tuple[str, ...] = (
    "groundwatch_conversation_id",
    "thread_id",
    "conversation_id",
    "session_id",
    "langfuse_session_id",
)

# What LangChain sends the model for a tool result it cannot serialise: ``str(obj)``, Python's
# default repr, which says nothing an answer could rest on.
_DEFAULT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


class _Tool:
    """A tool run under a root: its name, whether its output is context, and whether a
    retriever ran directly inside it (a retriever wrapped as a tool: its documents are the
    passages, not its joined text)."""

    __slots__ = ("context", "name", "retrieved")

    def __init__(self, name: str | None, context: bool) -> None:
        self.name = name
        # False inside another tool (a subagent's tool fed the subagent, not this run's
        # answer) or when ``context_tools`` leaves the tool out.
        self.context = context
        self.retrieved = False


class _Tagged:
    """A document retrieved inside a tool, with the (outermost) tool's name."""

    __slots__ = ("document", "tool")

    def __init__(self, document: Any, tool: str | None) -> None:
        self.document = document
        self.tool = tool


class _RootRun(TrackedRun[int]):
    """State of one top-level run, alive from its start callback to its end or error.

    Keyed by ``run_id.int``: hashing a UUID runs Python code, an int does not, and the
    tracker's map is touched several times per callback. The tracker's fields (``retrieving``,
    ``decision``: taken when the first retriever starts, a run that will not be scored keeps no
    documents; ``dropped``, ``tool_outputs``, ``tool_errors``, ``unreadable``, ``unfinished``:
    nested runs still open when the root ended) come from
    :class:`~groundwatch.integration.TrackedRun`.
    """

    __slots__ = (
        "documents",
        "error_type",
        "generated",
        "inputs",
        "is_chain",
        "retrieved",
        "run_id",
        "tool_ended",
        "tool_of",
        "tools",
    )

    def __init__(
        self,
        run_id: UUID,
        inputs: Any,
        monitor: MonitorLike,
        span_context: SpanContext | None,
        route: str | None,
        is_chain: bool,
        max_age: float,
    ) -> None:
        super().__init__(run_id.int, monitor, route, span_context, max_age)
        self.run_id = run_id
        self.inputs = inputs
        self.is_chain = is_chain
        # Documents (``_Tagged`` when retrieved inside a tool) and ``ToolOutput``s, in the order
        # they arrived.
        self.documents: list[Any] = []
        self.retrieved = False  # a retriever ended under this root (possibly with no documents)
        self.error_type: str | None = None  # first error seen under this root
        self.generated = False  # a language model finished under this root
        # Agents: live tool runs, and every live run inside a tool -> its outermost tool run
        # (both empty for chains without tools: one truth test per link).
        self.tools: dict[int, _Tool] = {}
        self.tool_of: dict[int, int] = {}
        self.tool_ended = False  # a tool whose output is context ended or failed


_F = TypeVar("_F", bound=Callable[..., None])


def _report(handler: GroundwatchCallbackHandler, where: str, exc: Exception) -> None:
    handler._internal_error(where, exc)


def _guarded(method: _F) -> _F:
    """Run a callback so that no exception of ours ever reaches LangChain or the host."""
    return guarded(method.__name__, _report)(method)


class GroundwatchCallbackHandler(BaseCallbackHandler):
    """Capture what a LangChain RAG chain or agent retrieved and answered, and hand it to a
    monitor.

    Pass it to a run (``chain.invoke(q, config={"callbacks": [handler]})``) or attach it to every
    run with :func:`groundwatch_langchain.instrument`. For each top-level run that both ran a
    retriever or a tool and produced an answer, the handler calls ``monitor.record`` once with:

    - the question: the run's input when it is a string, a message or a list of messages (the
      last human message), a mapping with a string under ``"question"``, ``"input"``,
      ``"query"`` or ``"q"`` (first found), or agent state ``{"messages": [...]}``;
      ``question_extractor`` replaces this;
    - the contexts: every document from every retriever that ran under the run, in the order
      the retrievers finished, each with its ``page_content``, ``id``, ``metadata`` and a score
      when the metadata has one under ``score_keys``; every tool's output, a ``tool`` passage
      named after the tool (only the outermost tool's: a tool inside another tool, such as a
      subagent's, fed that tool, not this run's answer); with ``conversation_context``, the
      thread's earlier turns;
    - the answer: the run's final output when it is a string or a message (an ``AIMessage``, or
      the merged chunks of a stream), a mapping with one of those under ``"answer"``,
      ``"output"`` or ``"result"``, or an agent's final answer in ``{"messages": [...]}`` (the
      last AI message without tool calls); ``answer_extractor`` replaces this;
    - the span context current when the run started, so the evaluation joins the request's trace.

    A run that failed (retriever, LLM or chain error, or cancellation) after starting a retriever
    is reported with ``monitor.record_failure`` instead; runs that never retrieved are ignored.
    Callbacks only capture references: no scoring, no I/O, no serialisation on the request path.

    Args:
        monitor: The ``groundwatch.Monitor`` (anything with its ``record`` / ``record_failure``).
        question_extractor: ``f(inputs) -> str | None`` applied to the root run's input.
        answer_extractor: ``f(outputs) -> str | None`` applied to the root run's output; None
            means "no answer", and the run is counted as ``no_answer`` instead of recorded.
        route: Route label for every record from this handler. A run's metadata key
            ``"groundwatch_route"`` overrides it per run.
        score_keys: Document metadata keys holding a retrieval score, looked up in order.
        max_documents: Documents kept per run; the rest are counted and the record is marked.
        max_active_runs: Top-level runs tracked at once before the oldest is dropped.
        max_run_age_seconds: Top-level runs open longer than this are dropped.
        context_tools: Which tools' outputs are context: ``None`` (every tool), tool names,
            or a predicate on the tool's name. Retrievers inside any tool always count.
        conversation_context: Add the thread's earlier turns (human messages and answers) as
            ``conversation`` passages. Off by default: an answer may rest on what the user
            said, but that is not grounding in sources (docs/agents.md).
    """

    # Called on the event loop itself in async runs instead of in a thread pool: every callback
    # is a few dictionary operations, cheaper than a thread hop, and it runs in the caller's
    # context, so the current span is the caller's.
    run_inline = True

    @property
    def raise_error(self) -> bool:  # type: ignore[override]
        """False in production: LangChain then logs and swallows an error of ours. Our own test
        suite sets GROUNDWATCH_RAISE_INTERNAL_ERRORS so that our bugs fail the tests."""
        return raise_internal_errors()

    def __init__(
        self,
        monitor: MonitorLike,
        *,
        question_extractor: QuestionExtractor | None = None,
        answer_extractor: AnswerExtractor | None = None,
        route: str | None = None,
        score_keys: Sequence[str] = SCORE_KEYS,
        max_documents: int = DEFAULT_MAX_DOCUMENTS,
        max_active_runs: int = DEFAULT_MAX_ACTIVE_RUNS,
        max_run_age_seconds: float = DEFAULT_MAX_RUN_AGE_SECONDS,
        context_tools: ContextTools = None,
        conversation_context: bool = False,
    ) -> None:
        super().__init__()
        if max_documents < 0 or max_active_runs < 1 or max_run_age_seconds <= 0:
            raise ValueError(
                "max_documents must be >= 0, max_active_runs >= 1, max_run_age_seconds > 0"
            )
        self._monitor = monitor
        self._question = question_extractor or default_question
        self._answer = answer_extractor or default_answer
        self._route = route
        self._score_keys = tuple(score_keys)
        self._max_documents = max_documents
        self._max_run_age = max_run_age_seconds
        self._tool_filter = tool_filter(context_tools)
        self._conversation_context = conversation_context
        # Every live run id we track (roots and their chain / retriever / tool descendants) ->
        # the state of its root. LLM runs are not tracked: they have no children, and their
        # errors name their parent.
        self._tracker: RunTracker[int, _RootRun] = RunTracker(
            max_active_runs=max_active_runs,
            component="langchain.",
            counters=("turns_paused", "extractor_errors", "questions_unreadable"),
        )

    # -- introspection ----------------------------------------------------------------------------

    @property
    def counts(self) -> dict[str, int]:
        """A snapshot of what the handler has done, for tests and health checks.

        Keys: ``records`` (``monitor.record`` calls), ``not_sampled`` (runs the sampler
        declined when their first retriever started: no documents kept, counted with
        ``monitor.record_decision``), ``failures`` (``record_failure`` calls),
        ``no_retrieval`` (top-level chain runs that never retrieved: ignored), ``no_answer``
        (retrieved but the output had no recognisable answer; reported as a failure when a
        model ran under the run, ignored for retrieval-only runs), ``evicted`` (runs dropped
        unfinished), ``documents_dropped`` (documents and tool outputs beyond
        ``max_documents``), ``tool_outputs`` (kept as passages), ``tool_errors`` (tool calls
        that raised: never passages), ``tool_outputs_unreadable`` (outputs with no text, left
        out), ``turns_paused`` (agent runs that stopped at an interrupt after calling tools:
        the run that resumes the turn is recorded), ``extractor_errors`` (an extractor
        raised: the run is reported failed, ``error.type=extractor_error``),
        ``questions_unreadable`` (a question that is not a string: recorded without it, with a
        warning), ``internal_errors`` (a bug of ours, logged and swallowed).
        """
        return self._tracker.counts

    @property
    def active_runs(self) -> int:
        """Number of top-level runs currently tracked."""
        return self._tracker.active_runs

    @property
    def _owner(self) -> dict[int, _RootRun]:
        """Every live run id tracked -> its root's state (the tracker's map; for tests)."""
        return self._tracker.links

    # Event families we never use: skipping them saves LangChain a call per event. (Not
    # ``ignore_agent``: it also silences tool runs, and agents retrieve inside tools.)
    @property
    def ignore_chat_model(self) -> bool:
        """Chat model starts carry nothing we need (their errors still arrive)."""
        return True

    @property
    def ignore_retry(self) -> bool:
        """Retries carry nothing we need."""
        return True

    @property
    def ignore_custom_event(self) -> bool:
        """Custom events carry nothing we need."""
        return True

    # -- chains -----------------------------------------------------------------------------------

    @_guarded
    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start tracking a top-level run, or link a nested run to its top-level run."""
        if parent_run_id is not None:
            # The most frequent callback: linked here rather than through _link, one call less.
            tracker = self._tracker
            key, parent_key = run_id.int, parent_run_id.int
            with tracker.lock:
                root = tracker.link_locked(key, parent_key)
                if root is not None:
                    if root.tool_of:  # inside a tool: remember the outermost one
                        outer = root.tool_of.get(parent_key)
                        if outer is not None:
                            root.tool_of[key] = outer
                    return
        self._start_root(run_id, inputs, metadata, is_chain=True)

    @_guarded
    def on_chain_end(
        self,
        outputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Record the top-level run when it ends; forget a nested run."""
        # _end, written out: the second most frequent callback.
        tracker = self._tracker
        key = run_id.int
        with tracker.lock:
            root = tracker.pop_locked(key)
            if root is None:
                return
            if root.key != key:  # a nested run
                if root.tool_of:
                    root.tool_of.pop(key, None)
                return
        if not root.is_chain:
            return
        if not root.retrieving and not self._resumed_turn(root, outputs):
            self._tracker.ignore(root)
            return
        if root.unfinished:
            # The root ended before its steps did: the consumer stopped a stream early (a sync
            # stream reports the partial output as the root's output). Not an answer to score.
            self._fail(root, CANCELLED)
            return
        if not root.retrieved and not root.tool_ended:
            # Every retriever failed and a fallback answered without documents: say so rather
            # than score an answer against nothing. (An agent whose tools raised is recorded:
            # it answered anyway, and the record counts its tools' errors.)
            self._fail(root, root.error_type or RETRIEVER_ERROR)
            return
        if not root.sampled:
            tracker.decline(root)
            return
        # Streaming runs start with a placeholder input and report the merged input at the end.
        inputs = kwargs.get("inputs", root.inputs)
        try:
            self._record(root, inputs, outputs)
        except Exception:
            self._tracker.fail_internal(root)  # the run still gets its one terminal call
            raise

    @_guarded
    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Count a failed top-level run that had started retrieving; forget a nested run."""
        root = self._end(run_id.int)
        if root is None or not root.retrieving:
            return
        if isinstance(error, (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit)):
            error_type = CANCELLED
        else:
            error_type = root.error_type or CHAIN_ERROR
        self._fail(root, error_type)

    # -- retrievers -------------------------------------------------------------------------------

    @_guarded
    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Link a retriever run to its top-level run; a retriever used alone is never recorded."""
        if parent_run_id is not None and self._link(run_id.int, parent_run_id.int, retriever=True):
            return
        self._start_root(run_id, query, metadata, is_chain=False)

    @_guarded
    def on_retriever_end(
        self,
        documents: Sequence[Document],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Keep references to the retrieved documents in the top-level run's state."""
        tracker = self._tracker
        with tracker.lock:
            key = run_id.int
            owner = tracker.links.get(key)
            tool_key = owner.tool_of.get(key) if owner is not None and owner.tool_of else None
            root = self._retriever_finished(key)
            if root is None:
                return
            root.retrieved = True
            if not root.sampled:
                return  # not to be scored: nothing to keep
            kept: Sequence[Any] = documents
            if tool_key is not None:  # retrieved inside a tool: the passages name it
                tool = root.tools.get(tool_key)
                name = tool.name if tool is not None else None
                kept = [_Tagged(d, name) for d in documents]
            tracker.keep_locked(root, root.documents, kept, self._max_documents)

    @_guarded
    def on_retriever_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Note the retriever error on the top-level run; the run's end decides what to report."""
        with self._tracker.lock:
            root = self._retriever_finished(run_id.int)
            if root is not None and root.error_type is None:
                root.error_type = RETRIEVER_ERROR

    # -- language models --------------------------------------------------------------------------

    def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to capture: the answer is taken from the top-level run's output."""

    @_guarded
    def on_llm_end(
        self,
        response: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Note that a model generated under the top-level run (its output is read at the end)."""
        if parent_run_id is None:
            return
        with self._tracker.lock:
            root = self._tracker.links.get(parent_run_id.int)
            if root is not None:
                root.generated = True

    @_guarded
    def on_llm_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Note the LLM error on the top-level run; the run's end decides what to report."""
        if parent_run_id is None:
            return
        with self._tracker.lock:
            root = self._tracker.links.get(parent_run_id.int)
            if root is not None and root.error_type is None:
                root.error_type = LLM_ERROR

    # -- tools (agents may retrieve inside tools) -------------------------------------------------

    @_guarded
    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Link a tool run to its top-level run: its output is context, and retrievers inside
        it count."""
        name = serialized.get("name") if serialized else None
        if not isinstance(name, str):
            name = kwargs.get("name")
        if not isinstance(name, str):
            name = None
        context = self._tool_filter is None or self._tool_filter(name)
        if parent_run_id is None or not self._link(
            run_id.int, parent_run_id.int, tool=name, context=context
        ):
            self._start_root(run_id, input_str, metadata, is_chain=False)

    @_guarded
    def on_tool_end(
        self,
        output: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Keep a reference to the tool's output among the top-level run's contexts."""
        output = _tool_result(output)
        tracker = self._tracker
        with tracker.lock:
            key = run_id.int
            root, tool = self._tool_finished(key)
            if root is None or tool is None or not tool.context or tool.retrieved:
                return  # unknown, not context, or a retriever's (its documents are kept)
            root.tool_ended = True
            if not root.sampled:
                return  # not to be scored: nothing to keep
            if getattr(output, "status", None) == "error":  # a ToolMessage reporting a failure
                root.tool_errors += 1
                tracker.count_locked("tool_errors")
                return
            if not _readable(output):
                root.unreadable += 1
                tracker.count_locked("tool_outputs_unreadable")
                return
            if len(root.documents) >= self._max_documents:
                root.dropped += 1
                tracker.count_locked("documents_dropped")
                return
            root.documents.append(ToolOutput(output, tool.name))
            root.tool_outputs += 1
            tracker.count_locked("tool_outputs")

    @_guarded
    def on_tool_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Count a tool's error (never a passage; an agent may recover from it)."""
        with self._tracker.lock:
            root, tool = self._tool_finished(run_id.int)
            if root is not None and tool is not None and tool.context:
                root.tool_ended = True
                root.tool_errors += 1
                self._tracker.count_locked("tool_errors")

    # -- state ------------------------------------------------------------------------------------

    def _link(
        self,
        key: int,
        parent_key: int,
        retriever: bool = False,
        tool: str | bool | None = False,
        context: bool = True,
    ) -> bool:
        """Map a nested run to its parent's root. False when the parent is unknown to us.

        ``tool``: the run is a tool run (its name, or None when it has none); ``context``:
        ``context_tools`` counts its output. The root's first retriever or context tool takes
        the sampler's decision for the whole run (under the lock: parallel ones must not take
        two)."""
        tracker = self._tracker
        with tracker.lock:
            root = tracker.link_locked(key, parent_key)
            if root is None:
                return False
            if root.tool_of:  # inside a tool: remember the outermost one
                outer = root.tool_of.get(parent_key)
                if outer is not None:
                    root.tool_of[key] = outer
                    if retriever and outer == parent_key:
                        root.tools[outer].retrieved = True  # a retriever wrapped as a tool
            if tool is not False:
                nested = key in root.tool_of
                context = context and not nested
                root.tools[key] = _Tool(tool if isinstance(tool, str) else None, context)
                if not nested:
                    root.tool_of[key] = key
            if retriever or (tool is not False and context):
                if root.is_chain:
                    tracker.decide(root)  # the first one asks the sampler
                else:
                    root.retrieving = True
            return True

    def _resumed_turn(self, root: _RootRun, outputs: Any) -> bool:
        """A run that called no tool but finishes an agent turn whose tools ran in an earlier
        run (resumed after an interrupt): take those tools' results from the thread's state as
        its contexts, and the sampler's decision now. False when there are none."""
        if not isinstance(outputs, Mapping) or MESSAGES_KEY not in outputs:
            return False
        messages = turn_tool_messages(outputs)
        if not messages:
            return False
        kept = 0
        for message in messages:
            name = getattr(message, "name", None)
            name = name if isinstance(name, str) else None
            if self._tool_filter is not None and not self._tool_filter(name):
                continue
            root.tool_ended = True
            if getattr(message, "status", None) == "error":
                root.tool_errors += 1
            elif not _readable(message):
                root.unreadable += 1
            elif kept < self._max_documents:
                root.documents.append(ToolOutput(message, name))
                kept += 1
            else:
                root.dropped += 1
        if not root.tool_ended:
            return False
        root.tool_outputs = kept
        if self._tracker.decide(root) is not Decision.SAMPLED:
            root.documents.clear()
        return True

    def _tool_finished(self, key: int) -> tuple[_RootRun | None, _Tool | None]:
        """Unlink a tool run that ended or failed: its top-level run's state and its own
        (``None``s when unknown, or when it was itself the top-level run). Call with the lock
        held."""
        root = self._tracker.pop_locked(key)
        if root is None or root.key == key:
            return None, None
        root.tool_of.pop(key, None)
        return root, root.tools.pop(key, None)

    def _start_root(
        self, run_id: UUID, inputs: Any, metadata: Mapping[str, Any] | None, *, is_chain: bool
    ) -> None:
        # A run whose parent we never saw (the handler was attached below the top, e.g. with
        # ``with_config(callbacks=...)`` on an inner chain) is a top-level run for us.
        current = trace.get_current_span().get_span_context()
        span_context = current if current.is_valid else _openinference_span_context(run_id)
        route = self._route
        if metadata:
            value = metadata.get(ROUTE_METADATA_KEY)
            if isinstance(value, str):
                route = value
        root = _RootRun(
            run_id, inputs, self._monitor, span_context, route, is_chain, self._max_run_age
        )
        if metadata:
            root.conversation_id = _conversation_id(metadata)
        # Gives up (and reports) the oldest runs past the limits first.
        self._tracker.start(root)

    def _end(self, key: int) -> _RootRun | None:
        """Forget a run. Returns its root state when the run was a top-level run we tracked."""
        with self._tracker.lock:
            root = self._tracker.pop_locked(key)
            if root is None:
                return None
            if root.key != key:
                if root.tool_of:
                    root.tool_of.pop(key, None)
                return None
            return root

    def _retriever_finished(self, key: int) -> _RootRun | None:
        """Unlink a retriever run that ended or failed. Returns its top-level run's state, or
        None when the run is unknown or was itself the top-level run (a retriever used alone:
        forgotten, nothing answered). Call with the lock held."""
        root = self._tracker.pop_locked(key)
        if root is None or root.key == key:
            return None
        if root.tool_of:
            root.tool_of.pop(key, None)
        return root

    # -- output -----------------------------------------------------------------------------------

    def _record(self, root: _RootRun, inputs: Any, outputs: Any) -> None:
        try:
            answer = self._answer(outputs)
            question = self._question(inputs)
            if (
                question is None
                and self._question is default_question
                and isinstance(outputs, Mapping)
                and MESSAGES_KEY in outputs
            ):
                # An agent's input may be a form we do not read (a dict of role and content);
                # its output state holds the turn's human message as a message. (Only agent
                # state: a plain chain's output is its answer, never its question.)
                question = default_question(outputs)
        except Exception as exc:
            # The run retrieved and ended: it is an interaction, so it gets its decision (a
            # failure), not silence; the extractor's exception is said once and logged.
            self._tracker.count("extractor_errors")
            self._tracker.fail(root, EXTRACTOR_ERROR)
            user_error("langchain extractor", exc)
            return
        if not isinstance(answer, str):
            if self._answer is default_answer and turn_in_progress(outputs):
                # Paused at an interrupt (human in the loop) after calling tools: the run that
                # resumes the turn answers, and is recorded with this turn's tool results.
                self._tracker.ignore(root, "turns_paused")
                return
            if root.generated:
                # A model answered but we cannot read the answer from the output: tell the
                # operator (an ``answer_extractor`` fixes it). A run that only retrieved (a
                # search endpoint) is not a failure.
                self._tracker.count("no_answer")
                self._tracker.fail(root, NO_ANSWER)
            else:
                self._tracker.ignore(root, "no_answer")
            return
        if isinstance(question, str):
            question = plain(question)
        else:
            odd = type(question).__name__ if question is not None else odd_question(inputs)
            if odd is not None:
                # Recorded without its question (never coerced): said, not dropped silently.
                self._tracker.count("questions_unreadable")
                bad_input(
                    "GroundwatchCallbackHandler",
                    TypeError(
                        f"the run's question is a {odd}, not a string: recorded without it "
                        "(question_extractor= reads other forms)"
                    ),
                )
            question = None
        answer = plain(answer)
        turns: list[Any] = []
        if self._conversation_context and isinstance(outputs, Mapping):
            # Opt-in, so built here: a few messages' texts, as conversation passages.
            found = map(turn_passage, earlier_turns(outputs.get(MESSAGES_KEY)))
            turns = [t for t in found if t is not None]
        contexts = _Passages(root.documents, self._score_keys, turns)
        # The tracker adds contexts.dropped, the tool counts and the conversation's id.
        self._tracker.record(
            root,
            question=question,
            contexts=contexts,
            answer=answer,
            attributes={semconv.GROUNDWATCH_LANGCHAIN_RUN_ID: str(root.run_id)},
            span_context=_parent_span_context(root),
            tools=bool(root.tools or root.tool_outputs or root.tool_errors or root.unreadable),
        )

    def _fail(self, root: _RootRun, error_type: str) -> None:
        self._tracker.fail(root, error_type)

    def _internal_error(self, where: str, exc: Exception) -> None:
        # The core guard logs rate-limited, feeds the ``groundwatch.errors`` metric, and re-raises
        # only when GROUNDWATCH_RAISE_INTERNAL_ERRORS is set (our tests), then LangChain passes
        # it on because ``raise_error`` follows the same switch.
        self._tracker.internal_error(where, exc)


class _Passages(Sequence[Any]):
    """The documents and tool outputs of a run (then earlier turns, with
    ``conversation_context``), turned into passages only when read.

    The monitor reads the contexts only for records its sampler keeps, so at a low sampling
    rate the request path never pays for the conversion.
    """

    __slots__ = ("_items", "_score_keys")

    def __init__(
        self, documents: list[Any], score_keys: tuple[str, ...], turns: Sequence[Any] = ()
    ) -> None:
        # Earlier turns come last: the passage cap cuts them first.
        self._items = [*documents, *turns] if turns else documents
        self._score_keys = score_keys

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._convert(d) for d in self._items[index]]
        return self._convert(self._items[index])

    def __iter__(self) -> Iterator[Any]:
        for item in self._items:
            yield self._convert(item)

    def _convert(self, item: Any) -> Any:
        kind = type(item)
        if kind is ToolOutput:
            return item  # the core reads it (groundwatch.integration.ToolOutput)
        if kind is _Tagged:
            passage = passage_of(item.document, self._score_keys)
            if passage is None:
                return item.document
            passage["tool"] = item.tool
            return passage
        # Anything that is not document-shaped goes as is: the monitor validates its inputs.
        return passage_of(item, self._score_keys) or item


def _tool_result(output: Any) -> Any:
    """What the model is sent for a tool's output: the output, or the tool message of a
    LangGraph ``Command(update={"messages": [ToolMessage(...)]})`` (None when the command
    carries none: a state update is no text)."""
    update = getattr(output, "update", None)
    if update is None or type(output).__name__ != "Command":
        return output
    messages = update.get("messages") if isinstance(update, Mapping) else None
    if isinstance(messages, Sequence):
        for message in messages:
            if getattr(message, "type", None) == "tool":
                return message
    return None


def _readable(output: Any) -> bool:
    """Whether a tool's output has text a passage can hold (asked on the request path)."""
    content = getattr(output, "content", None)  # a ToolMessage: what the model was sent
    if content is None or isinstance(output, Mapping):
        return readable_tool_output(output)
    if isinstance(content, str):
        # A default repr is at most a few dozen characters: longer content is never one.
        # "null" is what LangChain sends the model for a tool that returned None.
        return (
            bool(content)
            and content != "null"
            and not (len(content) < 200 and _DEFAULT_REPR.fullmatch(content) is not None)
        )
    return bool(content)


def _conversation_id(metadata: Mapping[str, Any]) -> str | None:
    for key in CONVERSATION_METADATA_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def _parent_span_context(root: _RootRun) -> SpanContext:
    """The span the evaluation should hang under.

    The span current when the root run started when there was one (an HTTP server span, the
    app's own span). Without one, the span a LangChain instrumentation opened for this very run:
    OpenInference's (kept by run id, never made current), or the one current now, at the end of
    the run, which callback-based instrumentations that do make their spans current (OpenLLMetry)
    leave in place until their own end callback. INVALID_SPAN_CONTEXT, not None, when there is
    none: None would let the monitor pick whatever is current later.
    """
    if root.span_context is not None:
        return root.span_context
    theirs = _openinference_span_context(root.run_id)
    if theirs is not None:
        return theirs
    current = trace.get_current_span().get_span_context()
    return current if current.is_valid else trace.INVALID_SPAN_CONTEXT


def _openinference_span_context(run_id: UUID) -> SpanContext | None:
    """The span OpenInference's LangChain tracer opened for ``run_id``, if it is active.

    Its tracer does not make its spans current (no context attach in callbacks), but keeps them
    by run id. Depending on handler order its span exists already when our start callback runs,
    or only until after our end callback, so this is asked at both ends of the root run.
    Nothing is imported: without OpenInference loaded this is one dictionary lookup.
    """
    module = sys.modules.get("openinference.instrumentation.langchain")
    if module is None:
        return None
    try:
        instrumentor = module.LangChainInstrumentor()
        if not instrumentor.is_instrumented_by_opentelemetry:
            return None
        span = instrumentor.get_span(run_id)
    except Exception:
        return None
    if span is None:
        return None
    context: SpanContext = span.get_span_context()
    return context if context.is_valid else None
