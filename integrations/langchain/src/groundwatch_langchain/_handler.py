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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.callbacks import BaseCallbackHandler

from groundwatch.integration import (
    ContextTools,
    MonitorLike,
    RunTracker,
    ToolOutput,
    guarded,
    raise_internal_errors,
    tool_filter,
)

from ._capture import Capture
from ._extract import (
    SCORE_KEYS,
    AnswerExtractor,
    QuestionExtractor,
    _readable,
    _tool_result,
    default_answer,
    default_question,
)
from ._root import (
    CANCELLED,
    CHAIN_ERROR,
    DEFAULT_MAX_ACTIVE_RUNS,
    DEFAULT_MAX_DOCUMENTS,
    DEFAULT_MAX_RUN_AGE_SECONDS,
    LLM_ERROR,
    RETRIEVER_ERROR,
    RootRun,
    _Tagged,
)

if TYPE_CHECKING:
    from uuid import UUID

    from langchain_core.documents import Document

_F = TypeVar("_F", bound=Callable[..., None])


def _report(handler: GroundwatchCallbackHandler, where: str, exc: Exception) -> None:
    handler._internal_error(where, exc)


def _guarded(method: _F) -> _F:
    """Run a callback so that no exception of ours ever reaches LangChain or the host."""
    return guarded(method.__name__, _report)(method)


class GroundwatchCallbackHandler(Capture, BaseCallbackHandler):
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
        self._tracker: RunTracker[int, RootRun] = RunTracker(
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
    def _owner(self) -> dict[int, RootRun]:
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
