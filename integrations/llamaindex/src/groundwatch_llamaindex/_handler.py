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
from collections.abc import (
    Callable,
)
from typing import Any, TypeVar

from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import LLMChatStartEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

from groundwatch.integration import (
    guarded,
)

from ._capture import Capture
from ._root import _CHAT_START, _NOT_RETRIEVAL, _RETRIEVAL_END, _RETRIEVAL_START, _retrieval_kinds

_F = TypeVar("_F", bound=Callable[..., Any])


def _report(handler: Any, where: str, exc: Exception) -> None:
    handler._capture.internal_error(where, exc)


def _guarded(where: str) -> Callable[[_F], _F]:
    """Never let an exception out of a handler method into LlamaIndex: log, count, go on."""
    return guarded(where, _report)


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

    @_guarded("span start")
    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._capture.enter(id_, bound_args, instance, parent_id)

    @_guarded("span exit")
    def span_exit(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> None:
        self._capture.exit(id_, instance, result)

    @_guarded("span drop")
    def span_drop(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        self._capture.drop(id_, instance, err)

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
            self._collect(kind, event)
        return None

    @_guarded("event")
    def _collect(self, kind: int, event: BaseEvent) -> None:
        if kind == _CHAT_START:
            self._capture.chat_start(event)
        else:
            self._capture.retrieval(event, end=kind == _RETRIEVAL_END)
