"""The public surface the framework integrations build on, and nothing else of the core.

An integration (``groundwatch_langchain``, ``groundwatch_llamaindex``, or one of your own)
needs these things from the core, all here (docs/integrations.md builds one):

- :class:`RunTracker` and :class:`TrackedRun`: the run state machine (the map from the
  framework's ids to top-level runs, eviction, the sampler's decision at the first retrieval,
  exactly one terminal call per run, the counters in :data:`COUNTERS`, the error types and the
  record attributes), so that an integration only maps its framework's callbacks onto it;
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
  records into (``opentelemetry-instrument`` passes none, so one is built from the environment),
  and :func:`lazy_names`, with which the package hands the instrumentor on without importing it
  (OpenTelemetry's ``BaseInstrumentor`` brings wrapt, packaging and ``importlib.metadata``,
  more than an integration costs at start-up: ``benchmarks/import_cost.py``);
- agents (docs/agents.md): :class:`ToolOutput`, a tool call's output held by reference among a
  record's contexts and read as a ``tool`` passage on the worker; :func:`readable_tool_output`,
  asked on the request path to leave out (and count) outputs with no text;
  :func:`tool_filter` for the integrations' ``context_tools=`` option; a mapping context with
  ``"kind": "conversation"`` for an earlier turn; the conversation's id goes in the record's
  ``attributes`` under :data:`~groundwatch.telemetry.semconv.GEN_AI_CONVERSATION_ID`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._shared.capture import MAX_PASSAGES, ToolOutput, readable_tool_output, tool_output_text
from .._shared.config import raise_internal_errors
from .._shared.guard import bad_input, internal_error, user_error
from .._shared.lazy import lazy_names
from .._shared.suppression import SUPPRESS_INSTRUMENTATION_KEYS, suppressed, suppressed_context
from .._shared.weakhooks import reinit_after_fork, weak_callback
from ..runtime.sampling import Decision
from ._run_tracker import COUNTERS, MonitorLike, RunTracker, TrackedRun
from ._turns import Speaker, earlier_turns, turn_passage

if TYPE_CHECKING:
    from ..runtime.monitor import Monitor

__all__ = [
    "COUNTERS",
    "MAX_PASSAGES",
    "SUPPRESS_INSTRUMENTATION_KEYS",
    "ContextTools",
    "Decision",
    "IntegrationInstrumentor",
    "MonitorLike",
    "MonitorOwner",
    "RunTracker",
    "Speaker",
    "ToolOutput",
    "TrackedRun",
    "bad_input",
    "earlier_turns",
    "guarded",
    "internal_error",
    "lazy_names",
    "raise_internal_errors",
    "readable_tool_output",
    "reinit_after_fork",
    "suppressed",
    "suppressed_context",
    "tool_filter",
    "tool_output_text",
    "turn_passage",
    "user_error",
    "weak_callback",
]

_F = TypeVar("_F", bound=Callable[..., Any])

ContextTools = Collection[str] | Callable[[str], bool] | None
"""Which tools' outputs are context (an integration's ``context_tools=``): ``None`` for every
tool, a collection of tool names, or a predicate on the tool's name."""


def tool_filter(context_tools: ContextTools) -> Callable[[str | None], bool] | None:
    """``context_tools`` as one test on a tool's name (``None``: every tool counts, no test).

    A tool without a name counts only when every tool does. A predicate that raises counts as
    "no" (and is reported with :func:`user_error`): a filter never fails the host's run.

    Raises:
        TypeError: ``context_tools`` is a string (a collection of its letters is a mistake).
    """
    if context_tools is None:
        return None
    if isinstance(context_tools, str):
        raise TypeError("context_tools takes a collection of tool names, not one string")
    if callable(context_tools):
        predicate = context_tools

        def accepts(name: str | None) -> bool:
            if name is None:
                return False
            try:
                return bool(predicate(name))
            except Exception as exc:
                user_error("context_tools", exc)
                return False

        return accepts
    names = frozenset(context_tools)
    return lambda name: name in names


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


if TYPE_CHECKING:

    def _monitor_is_monitor_like(monitor: Monitor) -> MonitorLike:
        return monitor  # mypy checks that the real Monitor fits the integrations' protocol


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
            from ..runtime.monitor import Monitor

            monitor = owned = Monitor(**providers)
        self._monitor, self._owned = monitor, owned
        return monitor

    def _release_monitor(self) -> None:
        """Forget the monitor; shut it down if it was built by :meth:`_take_monitor`."""
        owned, self._monitor, self._owned = self._owned, None, None
        if owned is not None:
            owned.shutdown()


class IntegrationInstrumentor(MonitorOwner):
    """The body every integration's OpenTelemetry instrumentor shares.

    The integration's class derives from this and ``BaseInstrumentor`` (in that order) and says
    only what differs: the framework versions it supports (:attr:`instruments`) and how it
    attaches to the framework and detaches from it (:meth:`_attach_to_framework`,
    :meth:`_detach_from_framework`). ``instrument(monitor=None, **options)`` then records into
    the monitor given, or one it builds and owns (:class:`MonitorOwner`), and returns it.
    """

    instruments: tuple[str, ...] = ()
    """The framework versions the integration supports (``instrumentation_dependencies``)."""

    def _attach_to_framework(self, monitor: MonitorLike, **options: Any) -> None:
        """Start recording the framework's calls into ``monitor``; ``options`` are the
        integration's own arguments of ``instrument()``."""
        raise NotImplementedError

    def _detach_from_framework(self) -> None:
        """Stop recording."""
        raise NotImplementedError

    def instrumentation_dependencies(self) -> Collection[str]:
        return self.instruments

    def _instrument(self, **kwargs: Any) -> MonitorLike:
        monitor = self._take_monitor(kwargs)
        self._attach_to_framework(monitor, **kwargs)
        return monitor

    def _uninstrument(self, **kwargs: Any) -> None:
        self._detach_from_framework()
        self._release_monitor()
