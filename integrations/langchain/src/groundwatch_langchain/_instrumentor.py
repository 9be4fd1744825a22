"""The OpenTelemetry instrumentor: ``opentelemetry-instrument`` switches groundwatch on with it.

``GroundwatchLangChainInstrumentor`` is registered under the ``opentelemetry_instrumentor`` entry
point (see this distribution's ``pyproject.toml``), so ``opentelemetry-instrument python app.py``
attaches groundwatch to every LangChain run with no code change, scoring through a
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

from groundwatch.integration import IntegrationInstrumentor, MonitorLike

from . import _attach


class GroundwatchLangChainInstrumentor(IntegrationInstrumentor, BaseInstrumentor):  # type: ignore[misc]
    """Attach groundwatch to every LangChain run in the process, the OpenTelemetry way.

    ``GroundwatchLangChainInstrumentor().instrument(monitor=None, route=None,
    tracer_provider=None, meter_provider=None, logger_provider=None, **handler_options)``:
    without ``monitor`` it builds a :class:`groundwatch.Monitor` on the given (or global)
    providers, configured from the environment, and shuts it down in ``uninstrument()``.
    ``handler_options`` go to :class:`~groundwatch_langchain.GroundwatchCallbackHandler`.
    ``instrument()`` returns the monitor that receives the records.
    """

    instruments = ("langchain-core >= 1.2.6, < 2",)

    def _attach_to_framework(self, monitor: MonitorLike, **options: Any) -> None:
        _attach.instrument(monitor, **options)

    def _detach_from_framework(self) -> None:
        _attach.uninstrument()


def instrument(
    monitor: MonitorLike | None = None, *, route: str | None = None, **handler_options: Any
) -> MonitorLike:
    """Attach groundwatch to every LangChain run in this process.

    The same as ``GroundwatchLangChainInstrumentor().instrument(monitor=monitor, route=route,
    ...)``. Calling it again while instrumented keeps the first handler and logs a warning (call
    :func:`uninstrument` first to switch monitors), or puts the handler back if another
    instrumentation removed it. A run that already has a groundwatch handler in its callbacks
    keeps that one instead.

    Args:
        monitor: The ``groundwatch.Monitor`` that receives the records; without one, a monitor
            configured from the ``GROUNDWATCH_*`` variables on the global providers (shut down
            by :func:`uninstrument`).
        route: the route of these records (``groundwatch.route``).
        **handler_options: Passed to :class:`GroundwatchCallbackHandler` (extractors, ...), or
            ``tracer_provider=``, ``meter_provider=``, ``logger_provider=`` for the monitor built
            here.

    Returns:
        The monitor that receives the records.
    """
    instrumentor = GroundwatchLangChainInstrumentor()
    current = instrumentor.monitor
    if instrumentor.is_instrumented_by_opentelemetry and current is not None:
        _attach.instrument(current, route=route, **handler_options)
        return current
    # An explicit call in code: the distribution's own requirement already pins langchain-core.
    result: MonitorLike = instrumentor.instrument(
        monitor=monitor, route=route, skip_dep_check=True, **handler_options
    )
    return result


def uninstrument() -> None:
    """Detach the handler attached by :func:`instrument`. Runs already started keep it."""
    instrumentor = GroundwatchLangChainInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    else:
        _attach.uninstrument()
