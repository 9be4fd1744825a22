"""The LangChain callback handler: capture (question, documents, answer) per top-level run.

LangChain reports a run as a tree of callbacks keyed by ``run_id`` / ``parent_run_id``. The
handler keeps one small state object per top-level ("root") run and a map from every live run id
under it to that state, both under one lock: callbacks of one run may arrive from several threads
(``batch``, ``RunnableParallel``), and callbacks of many runs interleave on one event loop.

Nothing here attaches an OpenTelemetry context: in a system of callbacks there is no guarantee the
matching detach would ever run. The span context current when the root run starts is stored in the
root's state and handed to the monitor with the record instead.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from langchain_core.callbacks import BaseCallbackHandler
from opentelemetry import trace
from opentelemetry.trace import SpanContext

from groundwatch.integration import (
    MAX_PASSAGES,
    Decision,
    MonitorLike,
    guarded,
    internal_error,
    raise_internal_errors,
    user_error,
)
from groundwatch.telemetry import semconv

from ._extract import (
    SCORE_KEYS,
    AnswerExtractor,
    QuestionExtractor,
    default_answer,
    default_question,
    passage_of,
    plain,
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
RETRIEVER_ERROR = "retriever_error"
LLM_ERROR = "llm_error"
CHAIN_ERROR = "chain_error"
CANCELLED = "cancelled"
NO_ANSWER = "no_answer"
EVICTED = "evicted"

#: Run metadata key that overrides the handler's route for one run:
#: ``chain.invoke(q, config={"metadata": {"groundwatch_route": "faq"}})``.
ROUTE_METADATA_KEY = "groundwatch_route"


class _RootRun:
    """State of one top-level run, alive from its start callback to its end or error."""

    __slots__ = (
        "children",
        "decision",
        "documents",
        "dropped",
        "error_type",
        "generated",
        "inputs",
        "is_chain",
        "key",
        "retrieved",
        "retrieving",
        "route",
        "run_id",
        "span_context",
        "started",
        "unfinished",
    )

    def __init__(
        self,
        run_id: UUID,
        inputs: Any,
        span_context: SpanContext | None,
        route: str | None,
        is_chain: bool,
    ) -> None:
        self.run_id = run_id
        self.key = run_id.int
        self.inputs = inputs
        self.span_context = span_context
        self.route = route
        self.is_chain = is_chain
        self.started = time.monotonic()
        self.children: set[int] = set()
        self.documents: list[Document] = []
        self.dropped = 0
        self.retrieving = False  # a retriever started under this root
        # The sampler's decision, taken when the first retriever starts (None before): a run
        # that will not be scored keeps no documents and builds no record.
        self.decision: Decision | None = None
        self.retrieved = False  # a retriever ended under this root (possibly with no documents)
        self.error_type: str | None = None  # first error seen under this root
        self.generated = False  # a language model finished under this root
        self.unfinished = 0  # nested runs still open when the root ended


_F = TypeVar("_F", bound=Callable[..., None])


def _report(handler: GroundwatchCallbackHandler, where: str, exc: Exception) -> None:
    handler._internal_error(where, exc)


def _guarded(method: _F) -> _F:
    """Run a callback so that no exception of ours ever reaches LangChain or the host."""
    return guarded(method.__name__, _report)(method)


class GroundwatchCallbackHandler(BaseCallbackHandler):
    """Capture what a LangChain RAG chain retrieved and answered, and hand it to a monitor.

    Pass it to a run (``chain.invoke(q, config={"callbacks": [handler]})``) or attach it to every
    run with :func:`groundwatch_langchain.instrument`. For each top-level run that both ran a
    retriever and produced an answer, the handler calls ``monitor.record`` once with:

    - the question: the run's input when it is a string, a message or a list of messages (the
      last human message), a mapping with a string under ``"question"``, ``"input"``,
      ``"query"`` or ``"q"`` (first found), or agent state ``{"messages": [...]}``;
      ``question_extractor`` replaces this;
    - the contexts: every document from every retriever that ran under the run, in the order
      the retrievers finished, each with its ``page_content``, ``id``, ``metadata`` and a score
      when the metadata has one under ``score_keys``;
    - the answer: the run's final output when it is a string or a message (an ``AIMessage``, or
      the merged chunks of a stream), a mapping with one of those under ``"answer"``,
      ``"output"`` or ``"result"``, or the last AI message of ``{"messages": [...]}``;
      ``answer_extractor`` replaces this;
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
        self._max_active_runs = max_active_runs
        self._max_run_age = max_run_age_seconds
        self._lock = threading.Lock()
        # Maps are keyed by ``run_id.int``: hashing a UUID runs Python code, an int does not,
        # and these maps are touched several times per callback.
        # Root run id -> state, oldest first (for eviction).
        self._roots: OrderedDict[int, _RootRun] = OrderedDict()
        # Every live run id we track (roots and their chain / retriever / tool descendants) -> the
        # state of its root. LLM runs are not tracked: they have no children, and their errors
        # name their parent.
        self._owner: dict[int, _RootRun] = {}
        self._counts: dict[str, int] = dict.fromkeys(
            (
                "records",
                "not_sampled",
                "failures",
                "no_retrieval",
                "no_answer",
                "evicted",
                "documents_dropped",
                "extractor_errors",
                "internal_errors",
            ),
            0,
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
        unfinished), ``documents_dropped`` (documents beyond ``max_documents``),
        ``extractor_errors`` (a user extractor raised), ``internal_errors`` (a bug of ours,
        logged and swallowed).
        """
        with self._lock:
            return dict(self._counts)

    @property
    def active_runs(self) -> int:
        """Number of top-level runs currently tracked."""
        with self._lock:
            return len(self._roots)

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
        if parent_run_id is None or not self._link(run_id.int, parent_run_id.int):
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
        root = self._end(run_id.int)
        if root is None or not root.is_chain:
            return
        if not root.retrieving:
            self._count("no_retrieval")
            return
        if root.unfinished:
            # The root ended before its steps did: the consumer stopped a stream early (a sync
            # stream reports the partial output as the root's output). Not an answer to score.
            self._fail(root, CANCELLED)
            return
        if not root.retrieved:
            # Every retriever failed and a fallback answered without documents: say so rather
            # than score an answer against nothing.
            self._fail(root, root.error_type or RETRIEVER_ERROR)
            return
        if root.decision is not None and root.decision is not Decision.SAMPLED:
            self._monitor.record_decision(root.decision, route=root.route)
            self._count("not_sampled")
            return
        # Streaming runs start with a placeholder input and report the merged input at the end.
        inputs = kwargs.get("inputs", root.inputs)
        self._record(root, inputs, outputs)

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
        with self._lock:
            root = self._retriever_finished(run_id.int)
            if root is None:
                return
            root.retrieved = True
            if root.decision is not None and root.decision is not Decision.SAMPLED:
                return  # not to be scored: nothing to keep
            room = self._max_documents - len(root.documents)
            if len(documents) <= room:
                root.documents.extend(documents)
            else:
                root.documents.extend(documents[: max(room, 0)])
                dropped = len(documents) - max(room, 0)
                root.dropped += dropped
                self._counts["documents_dropped"] += dropped

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
        with self._lock:
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
        with self._lock:
            root = self._owner.get(parent_run_id.int)
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
        with self._lock:
            root = self._owner.get(parent_run_id.int)
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
        """Link a tool run to its top-level run so that retrievers inside it count."""
        if parent_run_id is None or not self._link(run_id.int, parent_run_id.int):
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
        """Forget a tool run."""
        self._end(run_id.int)

    @_guarded
    def on_tool_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Forget a tool run (an agent may recover from a tool error)."""
        self._end(run_id.int)

    # -- state ------------------------------------------------------------------------------------

    def _link(self, key: int, parent_key: int, retriever: bool = False) -> bool:
        """Map a nested run to its parent's root. False when the parent is unknown to us.

        The root's first retriever takes the sampler's decision for the whole run (under the
        lock: parallel retrievers must not take two)."""
        with self._lock:
            root = self._owner.get(parent_key)
            if root is None:
                return False
            self._owner[key] = root
            root.children.add(key)
            if retriever:
                root.retrieving = True
                if root.decision is None and root.is_chain:
                    root.decision = self._monitor.decide(
                        span_context=root.span_context, route=root.route
                    )
            return True

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
        root = _RootRun(run_id, inputs, span_context, route, is_chain)
        evicted: list[_RootRun] = []
        with self._lock:
            roots = self._roots
            limit = root.started - self._max_run_age
            while roots and (
                len(roots) >= self._max_active_runs or next(iter(roots.values())).started < limit
            ):
                _, old = roots.popitem(last=False)
                self._forget(old)
                self._counts["evicted"] += 1
                evicted.append(old)
            roots[root.key] = root
            self._owner[root.key] = root
        for old in evicted:
            if old.retrieving:
                self._fail(old, EVICTED)

    def _end(self, key: int) -> _RootRun | None:
        """Forget a run. Returns its root state when the run was a top-level run we tracked."""
        with self._lock:
            root = self._owner.pop(key, None)
            if root is None:
                return None
            if root.key != key:
                root.children.discard(key)
                return None
            self._forget(root)
            return root

    def _retriever_finished(self, key: int) -> _RootRun | None:
        """Unlink a retriever run that ended or failed. Returns its top-level run's state, or
        None when the run is unknown or was itself the top-level run (a retriever used alone:
        forgotten, nothing answered). Call with the lock held."""
        root = self._owner.pop(key, None)
        if root is None:
            return None
        if root.key == key:
            self._forget(root)
            return None
        root.children.discard(key)
        return root

    def _forget(self, root: _RootRun) -> None:
        """Drop a root and every run still linked to it. Call with the lock held."""
        self._roots.pop(root.key, None)
        self._owner.pop(root.key, None)
        root.unfinished = len(root.children)
        for child in root.children:
            self._owner.pop(child, None)
        root.children.clear()

    # -- output -----------------------------------------------------------------------------------

    def _record(self, root: _RootRun, inputs: Any, outputs: Any) -> None:
        try:
            answer = self._answer(outputs)
            question = self._question(inputs)
        except Exception as exc:
            self._count("extractor_errors")
            user_error("langchain extractor", exc)
            return
        if not isinstance(answer, str):
            self._count("no_answer")
            if root.generated:
                # A model answered but we cannot read the answer from the output: tell the
                # operator (an ``answer_extractor`` fixes it). A run that only retrieved (a
                # search endpoint) is not a failure.
                self._fail(root, NO_ANSWER)
            return
        question = plain(question) if isinstance(question, str) else None
        answer = plain(answer)
        contexts = _Passages(root.documents, self._score_keys)
        attributes: dict[str, Any] = {semconv.GROUNDWATCH_LANGCHAIN_RUN_ID: str(root.run_id)}
        if root.dropped:
            attributes[semconv.GROUNDWATCH_CONTEXTS_DROPPED] = root.dropped
        self._monitor.record(
            question=question,
            contexts=contexts,
            answer=answer,
            span_context=_parent_span_context(root),
            route=root.route,
            attributes=attributes,
            decision=root.decision,
        )
        self._count("records")

    def _fail(self, root: _RootRun, error_type: str) -> None:
        self._monitor.record_failure(error_type, route=root.route)
        self._count("failures")

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def _internal_error(self, where: str, exc: Exception) -> None:
        # The core guard logs rate-limited, feeds the ``groundwatch.errors`` metric, and re-raises
        # only when GROUNDWATCH_RAISE_INTERNAL_ERRORS is set (our tests), then LangChain passes
        # it on because ``raise_error`` follows the same switch.
        with self._lock:
            self._counts["internal_errors"] += 1
        internal_error(f"langchain.{where}", exc)


class _Passages(Sequence[Any]):
    """The documents of a run, turned into passages only when read.

    The monitor reads the contexts only for records its sampler keeps, so at a low sampling
    rate the request path never pays for the conversion.
    """

    __slots__ = ("_documents", "_score_keys")

    def __init__(self, documents: list[Document], score_keys: tuple[str, ...]) -> None:
        self._documents = documents
        self._score_keys = score_keys

    def __len__(self) -> int:
        return len(self._documents)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._convert(d) for d in self._documents[index]]
        return self._convert(self._documents[index])

    def __iter__(self) -> Iterator[Any]:
        for document in self._documents:
            yield self._convert(document)

    def _convert(self, document: Any) -> Any:
        # Anything that is not document-shaped goes as is: the monitor validates its inputs.
        return passage_of(document, self._score_keys) or document


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
