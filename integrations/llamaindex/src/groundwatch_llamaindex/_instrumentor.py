"""The OpenTelemetry instrumentor: ``opentelemetry-instrument`` switches groundwatch on with it.

``GroundwatchLlamaIndexInstrumentor`` is registered under the ``opentelemetry_instrumentor``
entry point (see this distribution's ``pyproject.toml``), so ``opentelemetry-instrument python
app.py`` records every LlamaIndex query and chat turn with no code change, scoring through a
:class:`groundwatch.Monitor` configured from the ``GROUNDWATCH_*`` environment variables and the
SDK providers that ``opentelemetry-instrument`` set up. In code, ``instrument(monitor=...)``
hands it a monitor of your own.
"""

from __future__ import annotations

from typing import Any

# The module's __all__ does not list the class, and the class is untyped.
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from groundwatch.integration import ContextTools, IntegrationInstrumentor, MonitorLike

from . import _attach


class GroundwatchLlamaIndexInstrumentor(IntegrationInstrumentor, BaseInstrumentor):  # type: ignore[misc]
    """Record every LlamaIndex query and chat turn, the OpenTelemetry way.

    ``GroundwatchLlamaIndexInstrumentor().instrument(monitor=None, route=None, engine=None,
    context_tools=None, conversation_context=False, tracer_provider=None, meter_provider=None,
    logger_provider=None)``:
    without ``monitor`` it builds a :class:`groundwatch.Monitor` on the given (or global)
    providers, configured from the environment, and shuts it down in ``uninstrument()``.
    ``instrument()`` returns the monitor that receives the records.
    """

    instruments = ("llama-index-core >= 0.14.25, < 0.15",)

    def _attach_to_framework(self, monitor: MonitorLike, **options: Any) -> None:
        _attach.instrument(
            monitor,
            engine=options.get("engine"),
            route=options.get("route"),
            context_tools=options.get("context_tools"),
            conversation_context=bool(options.get("conversation_context", False)),
        )

    def _detach_from_framework(self) -> None:
        _attach.uninstrument()


def instrument(
    monitor: MonitorLike | None = None,
    *,
    route: str | None = None,
    engine: Any | None = None,
    context_tools: ContextTools = None,
    conversation_context: bool = False,
    **monitor_options: Any,
) -> MonitorLike:
    """Send LlamaIndex queries, chat turns and agent runs to ``monitor``.

    The same as ``GroundwatchLlamaIndexInstrumentor().instrument(monitor=monitor, route=route,
    engine=engine, context_tools=context_tools, conversation_context=conversation_context)`` the
    first time. Registers groundwatch's span and event handlers on the root instrumentation
    dispatcher (``llama_index.core.instrumentation.get_dispatcher()``) once: calling again adds
    or replaces a binding instead of registering twice.

    Args:
        monitor: a :class:`groundwatch.Monitor` (anything with its ``record`` and
            ``record_failure`` methods); without one, a monitor configured from the
            ``GROUNDWATCH_*`` variables on the global providers (shut down by
            :func:`uninstrument`).
        route: the route name for these records (defaults to the monitor's own).
        engine: only record queries made on this query or chat engine (matched by identity; the
            engine is held weakly). Engine bindings take precedence over a global one, so
            different engines can feed different monitors or routes. ``None`` binds every engine
            (replacing an earlier global binding).
        context_tools: which tools' outputs are an agent run's context (docs/agents.md): tool
            names, or a predicate on the name; ``None`` (the default): every tool. A tool's
            raised error is never context.
        conversation_context: add the conversation's earlier turns (the user's messages and
            the answers) as ``conversation`` passages, after the others. Off by default: what
            the user said is not a source the answer is grounded in.
        **monitor_options: ``tracer_provider=``, ``meter_provider=``, ``logger_provider=`` for
            the monitor built here.

    Returns:
        The monitor that receives the records.
    """
    instrumentor = GroundwatchLlamaIndexInstrumentor()
    current = instrumentor.monitor
    if instrumentor.is_instrumented_by_opentelemetry and current is not None:
        target = monitor if monitor is not None else current
        _attach.instrument(
            target,
            engine=engine,
            route=route,
            context_tools=context_tools,
            conversation_context=conversation_context,
        )
        return target
    # An explicit call in code: the distribution's own requirement already pins llama-index-core.
    result: MonitorLike = instrumentor.instrument(
        monitor=monitor,
        route=route,
        engine=engine,
        context_tools=context_tools,
        conversation_context=conversation_context,
        skip_dep_check=True,
        **monitor_options,
    )
    return result


def uninstrument(*, engine: Any | None = None) -> None:
    """Stop recording.

    Args:
        engine: remove only the binding made for this engine; with ``None`` every binding goes and
            the handlers are removed from the dispatcher. Queries in flight are not recorded.
    """
    instrumentor = GroundwatchLlamaIndexInstrumentor()
    if engine is not None:
        _attach.uninstrument(engine=engine)
    elif instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    else:
        _attach.uninstrument()
