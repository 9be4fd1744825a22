"""The run of one top-level LangChain chain or agent run: :class:`RootRun`, what its tools and
documents are while it runs, and the span its evaluation hangs under.

The tracker's fields (the run map, the sampler's decision, tool outputs) are the core's
:class:`~groundwatch.integration.TrackedRun`'s; a :class:`RootRun` adds what LangChain's callbacks
tell about the run (as LlamaIndex's ``RootRun`` does for a query).
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from groundwatch.integration import (
    MAX_PASSAGES,
    MonitorLike,
    TrackedRun,
)
from groundwatch.telemetry import semconv

if TYPE_CHECKING:
    from uuid import UUID


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


class RootRun(TrackedRun[int]):
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


def _parent_span_context(root: RootRun) -> SpanContext:
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
