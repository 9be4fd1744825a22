"""Registering groundwatch's span and event handlers on LlamaIndex's root dispatcher."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from groundwatch.integration import ContextTools, MonitorLike

    from ._capture import Capture

_lock = threading.Lock()
_capture: Capture | None = None


def instrument(
    monitor: MonitorLike,
    *,
    engine: Any | None = None,
    route: str | None = None,
    context_tools: ContextTools = None,
    conversation_context: bool = False,
) -> None:
    """Send LlamaIndex queries, chat turns and agent runs to ``monitor``.

    Registers groundwatch's span and event handlers on the root instrumentation dispatcher
    (``llama_index.core.instrumentation.get_dispatcher()``), once: calling again adds or replaces
    a binding instead of registering twice.

    Args:
        monitor: a :class:`groundwatch.Monitor` (anything with its ``record`` and
            ``record_failure`` methods).
        engine: only record queries made on this query or chat engine (matched by identity; the
            engine is held weakly). Engine bindings take precedence over a global one, so
            different engines can feed different monitors or routes. ``None`` binds every engine
            (replacing an earlier global binding).
        route: the route name for these records (defaults to the monitor's own).
        context_tools: which tools' outputs are an agent run's context: tool names, or a
            predicate on the name; ``None`` (the default): every tool.
        conversation_context: add the conversation's earlier turns (the user's messages and
            the answers) as ``conversation`` passages. Off by default: what the user said is
            not a source the answer is grounded in (docs/agents.md).

    Raises:
        TypeError: ``context_tools`` is one string rather than a collection of names.
    """
    global _capture
    from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]

    from groundwatch.integration import tool_filter

    from ._capture import Capture
    from ._handler import GroundwatchEventHandler, GroundwatchSpanHandler

    accepts = tool_filter(context_tools)  # raises for a string, before anything is registered
    with _lock:
        dispatcher = get_dispatcher()
        if _capture is None:
            _capture = Capture()
        span_handler = next(
            (h for h in dispatcher.span_handlers if isinstance(h, GroundwatchSpanHandler)), None
        )
        if span_handler is None:
            dispatcher.add_span_handler(GroundwatchSpanHandler(_capture))
        if not any(isinstance(h, GroundwatchEventHandler) for h in dispatcher.event_handlers):
            dispatcher.add_event_handler(GroundwatchEventHandler(_capture))
        _capture.bind(monitor, route, engine, accepts, conversation_context)


def uninstrument(*, engine: Any | None = None) -> None:
    """Stop recording.

    Args:
        engine: remove only the binding made for this engine; with ``None`` every binding goes and
            the handlers are removed from the dispatcher. Queries in flight are not recorded.
    """
    global _capture
    from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]

    from ._handler import GroundwatchEventHandler, GroundwatchSpanHandler

    with _lock:
        if _capture is None:
            return
        if engine is not None:
            _capture.unbind(engine)
            return
        _capture.unbind_all()
        _capture = None
        dispatcher = get_dispatcher()
        dispatcher.span_handlers[:] = [
            h for h in dispatcher.span_handlers if not isinstance(h, GroundwatchSpanHandler)
        ]
        dispatcher.event_handlers[:] = [
            h for h in dispatcher.event_handlers if not isinstance(h, GroundwatchEventHandler)
        ]


def is_instrumented() -> bool:
    """Whether groundwatch's handlers are registered on the dispatcher."""
    return _capture is not None
