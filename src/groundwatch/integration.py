"""The public surface the framework integrations build on, and nothing else of the core.

An integration (``groundwatch_langchain``, ``groundwatch_llamaindex``, or one of your own)
needs these things from the core, all here:

- :class:`MonitorLike`: what it hands records to (``decide``, ``record``, ``record_decision``,
  ``record_failure``) and :class:`Decision`;
- :func:`guarded`: the one guard around every entry point the host or the framework calls, so
  that an exception of ours is logged (rate-limited), counted in ``groundwatch.errors`` and never
  reaches the host; :func:`internal_error` / :func:`user_error` report one directly, and
  :func:`bad_input` warns (rate-limited) about the application's input it cannot read;
- :func:`suppressed` / :func:`suppressed_context`: OpenTelemetry's instrumentation suppression,
  which groundwatch's worker sets while a judge runs, so a judge that calls the framework itself
  does not feed records back into the monitor;
- :func:`reinit_after_fork` / :func:`weak_callback`: fork and exit hooks that do not keep the
  integration's objects alive;
- the limits a capture should respect (:data:`MAX_PASSAGES`) and :func:`raise_internal_errors`
  (the switch our own test suites set to turn logged errors into failures);
- :class:`MonitorOwner`: the monitor an OpenTelemetry instrumentor's ``instrument(**kwargs)``
  records into (``opentelemetry-instrument`` passes none, so one is built from the environment).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from opentelemetry import context as otel_context

from ._config import raise_internal_errors
from ._guard import bad_input, internal_error, user_error
from ._inputs import MAX_PASSAGES
from ._weakhooks import reinit_after_fork, weak_callback
from .runtime.sampling import Decision

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

    from .runtime.monitor import Monitor

__all__ = [
    "MAX_PASSAGES",
    "SUPPRESS_INSTRUMENTATION_KEYS",
    "Decision",
    "MonitorLike",
    "MonitorOwner",
    "bad_input",
    "guarded",
    "internal_error",
    "raise_internal_errors",
    "reinit_after_fork",
    "suppressed",
    "suppressed_context",
    "user_error",
    "weak_callback",
]

SUPPRESS_INSTRUMENTATION_KEYS: tuple[str, ...] = (
    getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", "suppress_instrumentation"),
    "suppress_instrumentation",
)
"""The context keys OpenTelemetry instrumentations check: ``opentelemetry.context`` defines the
first; ``opentelemetry-instrumentation``'s ``suppress_instrumentation`` also sets the plain
string, which older instrumentations read. Setting both needs no extra dependency."""


def suppressed_context() -> otel_context.Context:
    """The current context with instrumentation suppressed (both keys set)."""
    ctx = otel_context.get_current()
    for key in SUPPRESS_INSTRUMENTATION_KEYS:
        ctx = otel_context.set_value(key, True, ctx)
    return ctx


def suppressed() -> bool:
    """Whether instrumentation is suppressed in the current context."""
    # One context lookup: integrations ask this when an interaction starts.
    ctx = otel_context.get_current()
    return any(ctx.get(key) for key in SUPPRESS_INSTRUMENTATION_KEYS)


_F = TypeVar("_F", bound=Callable[..., Any])


def guarded(where: str, report: Callable[[Any, str, Exception], object]) -> Callable[[_F], _F]:
    r"""Decorate a method that the host or its framework calls: an ``Exception`` it raises is
    passed to ``report(self, where, exc)`` (which counts it and calls :func:`internal_error`)
    and the method returns ``None``.

    ``BaseException``\ s that are not ``Exception``\ s (``KeyboardInterrupt``, ``SystemExit``)
    pass through: they are the host's to handle.
    """

    def decorate(method: _F) -> _F:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                report(self, where, exc)
                return None

        return cast("_F", wrapper)

    return decorate


class MonitorLike(Protocol):
    """The capture side of :class:`groundwatch.Monitor`.

    Integrations accept anything with these methods (the real monitor, or a test double such
    as :class:`groundwatch.testing.RecordingMonitor`). Every interaction an integration sees
    ends in exactly one ``record``, ``record_decision`` or ``record_failure`` call; ``decide``,
    taken when its retrieval starts, tells whether to keep its documents at all.
    """

    def decide(
        self, *, span_context: SpanContext | None = None, route: str | None = None
    ) -> Decision: ...

    def record(
        self,
        *,
        question: str | None,
        contexts: Sequence[Any],
        answer: str,
        span_context: SpanContext | None = None,
        route: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        always_score: bool = False,
        decision: Decision | None = None,
    ) -> None: ...

    def record_decision(self, decision: Decision, *, route: str | None = None) -> None: ...

    def record_failure(self, error_type: str, *, route: str | None = None) -> None: ...


INSTRUMENT_PROVIDER_KWARGS = ("tracer_provider", "meter_provider", "logger_provider")


class MonitorOwner:
    """The monitor side of an OpenTelemetry instrumentor, for integrations to mix in.

    ``instrument(**kwargs)`` records into ``kwargs["monitor"]``; ``opentelemetry-instrument``
    passes none, so one is built from the ``GROUNDWATCH_*`` variables on the given providers
    (the global ones by default), owned by the instrumentor and shut down in ``uninstrument``.
    Kept free of ``opentelemetry-instrumentation`` (the core does not depend on it): the
    integration's class derives from both this and ``BaseInstrumentor``.
    """

    _monitor: MonitorLike | None = None
    _owned: Monitor | None = None

    @property
    def monitor(self) -> MonitorLike | None:
        """The monitor records go to while instrumented."""
        return self._monitor

    def _take_monitor(self, kwargs: dict[str, Any]) -> MonitorLike:
        """Pop ``monitor`` and the provider arguments from ``kwargs``; the rest is the
        integration's own. Returns the monitor to record into."""
        monitor: MonitorLike | None = kwargs.pop("monitor", None)
        providers = {name: kwargs.pop(name, None) for name in INSTRUMENT_PROVIDER_KWARGS}
        owned = None
        if monitor is None:
            from .runtime.monitor import Monitor

            monitor = owned = Monitor(**providers)
        self._monitor, self._owned = monitor, owned
        return monitor

    def _release_monitor(self) -> None:
        """Forget the monitor; shut it down if it was built by :meth:`_take_monitor`."""
        owned, self._monitor, self._owned = self._owned, None, None
        if owned is not None:
            owned.shutdown()
