"""The run state machine every framework integration shares (``groundwatch.integration``).

A framework reports one interaction (a query, a chain run, an agent's turn) as a tree of
callbacks or spans keyed by ids. An integration keeps one :class:`TrackedRun` per top-level run
and maps every live id under it to that run; :class:`RunTracker` owns that map and the rules
around it, so that each integration only translates its framework's callbacks:

- the run map: :meth:`RunTracker.start` adds a top-level run, :meth:`~RunTracker.link_locked` a
  nested id, :meth:`~RunTracker.pop_locked` forgets a finished id, :meth:`~RunTracker.end` too
  and returns the run when it was the top-level one;
- eviction: a run that never ends (a stream abandoned unread) is given up when too many runs are
  open or when it has been open too long, counted ``evicted`` and reported as a failure;
- sampling at the first retrieval: :meth:`~RunTracker.decide` asks the monitor once per run, so a
  run that will not be scored keeps no documents;
- exactly one terminal call per run: :meth:`~RunTracker.record`, :meth:`~RunTracker.fail`,
  :meth:`~RunTracker.decline` (the sampler's "no") or :meth:`~RunTracker.ignore` (nothing was
  retrieved: no interaction to score); a second one is a bug of the integration and is dropped;
- the counters (:attr:`~RunTracker.counts`), the error types and the record attribute names
  (``groundwatch.contexts.dropped`` and the agents' tool counts, added by ``record``).

Everything here runs on the host's request path: no allocation per callback beyond the maps'
entries, one lock, and the monitor is only asked (``decide``) or handed references.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .._shared.guard import internal_error
from ..runtime.sampling import Decision
from ..telemetry import semconv

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

__all__ = ["COUNTERS", "MonitorLike", "RunTracker", "TrackedRun"]


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


COUNTERS: tuple[str, ...] = (
    "records",
    "not_sampled",
    "failures",
    "no_retrieval",
    "no_answer",
    "evicted",
    "documents_dropped",
    "tool_outputs",
    "tool_errors",
    "tool_outputs_unreadable",
    "internal_errors",
)
"""Every tracker's counters (:attr:`RunTracker.counts`): ``records`` (``monitor.record``
calls), ``not_sampled`` (runs the sampler declined at their first retrieval, reported with
``record_decision``), ``failures`` (``record_failure`` calls), ``no_retrieval`` (runs that never
retrieved: ignored), ``no_answer`` (runs whose output held no answer), ``evicted`` (runs given up
unfinished), ``documents_dropped`` (passages past the cap), ``tool_outputs`` (kept as passages),
``tool_errors`` (tool calls that failed: never passages), ``tool_outputs_unreadable`` (outputs
with no text, left out) and ``internal_errors`` (bugs of ours, logged and swallowed)."""

K = TypeVar("K", bound=Hashable)
R = TypeVar("R", bound="TrackedRun[Any]")


class TrackedRun(Generic[K]):
    """The state of one top-level run, from its start to its one terminal call.

    An integration derives its own run class from this one (with ``__slots__``) to hold what it
    captures (inputs, documents, the answer). The fields here are the tracker's: set
    ``retrieving`` (via :meth:`RunTracker.decide`), ``dropped``, ``tool_outputs``,
    ``tool_errors``, ``unreadable`` and ``conversation_id``; read the rest.

    Args:
        key: The run's id in the framework (a run id, a span id).
        monitor: Where the run's one terminal call goes.
        route: The run's route label.
        span_context: The span current when the run started (the record joins its trace).
        max_age: Seconds the run may stay open before it is given up (``None``: no limit
            until :meth:`expire_in` sets one).
    """

    __slots__ = (
        "children",
        "closed",
        "conversation_id",
        "decision",
        "dropped",
        "expires",
        "key",
        "monitor",
        "reported",
        "retrieving",
        "route",
        "span_context",
        "started",
        "tool_errors",
        "tool_outputs",
        "unfinished",
        "unreadable",
    )

    #: Whether an evicted run that never retrieved is still reported as ``evicted``: False for
    #: runs that may be anything (a LangChain chain), True for runs that are retrievals by
    #: nature (a LlamaIndex query engine's query).
    report_unretrieved_eviction = False

    def __init__(
        self,
        key: K,
        monitor: MonitorLike,
        route: str | None,
        span_context: SpanContext | None,
        max_age: float | None = None,
    ) -> None:
        self.key = key
        self.monitor = monitor
        self.route = route
        self.span_context = span_context
        self.started = time.monotonic()
        self.expires = self.started + max_age if max_age is not None else float("inf")
        self.children: set[K] = set()  # live nested ids mapped to this run
        self.unfinished = 0  # nested ids still linked when the run was forgotten
        self.retrieving = False  # a retrieval (or a tool whose output is context) started
        # The sampler's decision, taken at the first retrieval (None before).
        self.decision: Decision | None = None
        self.closed = False  # out of the map: ended, evicted or forgotten
        self.reported = False  # its terminal call was made
        self.dropped = 0  # passages past the cap (groundwatch.contexts.dropped)
        self.tool_outputs = 0  # tool outputs among the passages (groundwatch.contexts.tools)
        self.tool_errors = 0  # tool calls that failed (groundwatch.tool.errors)
        self.unreadable = 0  # tool outputs with no text (groundwatch.contexts.unreadable)
        self.conversation_id: str | None = None  # gen_ai.conversation.id

    @property
    def sampled(self) -> bool:
        """False once the sampler declined the run: keep nothing more for it."""
        decision = self.decision
        return decision is None or decision is Decision.SAMPLED

    def expire_in(self, seconds: float) -> None:
        """Give the run ``seconds`` more before eviction (a stream waiting for its reader)."""
        self.expires = time.monotonic() + seconds

    def target(self) -> MonitorLike | None:
        """The monitor the terminal call goes to; ``None`` drops it (an integration whose
        binding was removed while the run was open overrides this)."""
        return self.monitor


class RunTracker(Generic[K, R]):
    """Owns the runs of one integration: the map, eviction, sampling, the terminal calls and
    the counters. See the module's docstring, and docs/integrations.md for a whole integration.

    Args:
        max_active_runs: Top-level runs tracked at once; starting one more gives up the oldest.
        component: Prefix of the ``where`` of :meth:`internal_error` (``"langchain."``).
        reentrant: Use a re-entrant lock (an integration whose callbacks may run from a
            garbage collector's finaliser while the lock is held).
        counters: The integration's own counters, beyond :data:`COUNTERS`.
    """

    def __init__(
        self,
        *,
        max_active_runs: int = 4096,
        component: str = "",
        reentrant: bool = False,
        counters: Iterable[str] = (),
    ) -> None:
        if max_active_runs < 1:
            raise ValueError("max_active_runs must be >= 1")
        self.max_active_runs = max_active_runs
        self.component = component
        self._reentrant = reentrant
        self.lock: threading.Lock | threading.RLock = (
            threading.RLock() if reentrant else threading.Lock()
        )
        """Guards the maps and the runs' fields: take it (``with tracker.lock``) around the
        ``*_locked`` methods and an integration's own changes to a run."""
        # Top-level key -> run, oldest first (eviction).
        self._runs: OrderedDict[K, R] = OrderedDict()
        self.links: dict[K, R] = {}
        """Every live id (top-level and nested) -> its run. Read it without the lock on the hot
        path (``tracker.links.get(key)``); change it only through the tracker."""
        self._counts: dict[str, int] = dict.fromkeys((*COUNTERS, *counters), 0)
        # Every tracker starts afresh in a forked child (one hook for all of them: handlers
        # may be built per request, and a fork hook cannot be removed).
        _trackers.add(self)

    # -- the map ----------------------------------------------------------------------------------

    def start(self, run: R) -> None:
        """Track a new top-level run; give up the oldest runs over the limits first."""
        runs = self._runs
        evicted: Sequence[R] = ()
        with self.lock:
            # The oldest run tells whether any must go (asked here: this runs per request).
            if runs and (
                len(runs) >= self.max_active_runs or next(iter(runs.values())).expires < run.started
            ):
                evicted = self._evict_locked(run.started)
            runs[run.key] = run
            self.links[run.key] = run
        for old in evicted:
            self.count("evicted")
            if old.retrieving or old.report_unretrieved_eviction:
                self.fail(old, semconv.ERROR_EVICTED)

    def _evict_locked(self, now: float) -> list[R]:
        runs = self._runs
        evicted: list[R] = []
        while runs:
            oldest = next(iter(runs.values()))
            if len(runs) < self.max_active_runs and oldest.expires >= now:
                break
            self.forget_locked(oldest)
            evicted.append(oldest)
        return evicted

    def link_locked(self, key: K, parent: K, limit: int | None = None) -> R | None:
        """Map a nested ``key`` to the run of ``parent``; ``None`` when the parent is not
        tracked (a run started below where the integration was attached) or, with ``limit``,
        when the run has that many nested ids already."""
        run = self.links.get(parent)
        if run is None or (limit is not None and len(run.children) >= limit):
            return None
        self.links[key] = run
        run.children.add(key)
        return run

    def pop_locked(self, key: K) -> R | None:
        """Forget ``key``, which finished; returns its run (``None`` when not tracked). When
        ``key`` is the run's own (``run.key == key``), the whole run is forgotten (its terminal
        call is the caller's to make); otherwise only the nested id is unlinked."""
        run = self.links.pop(key, None)
        if run is None:
            return None
        if run.key == key:
            self.forget_locked(run)
        else:
            run.children.discard(key)
        return run

    def end(self, key: K) -> R | None:
        """A run ``key`` finished: the run when ``key`` was a top-level run's own (forgotten
        now), ``None`` when it was a nested id (unlinked) or unknown."""
        with self.lock:
            run = self.pop_locked(key)
        return run if run is not None and run.key == key else None

    def forget_locked(self, run: R) -> bool:
        """Take ``run`` and every id linked to it out of the map; ``run.unfinished`` is the
        number of nested ids still linked. False when it was out already."""
        if run.closed:
            return False
        run.closed = True
        self._runs.pop(run.key, None)
        links = self.links
        links.pop(run.key, None)
        run.unfinished = len(run.children)
        for child in run.children:
            links.pop(child, None)
        run.children.clear()
        return True

    def forget_all(self) -> None:
        """Drop every run in flight without a terminal call (the framework shut down)."""
        with self.lock:
            for run in list(self._runs.values()):
                self.forget_locked(run)
                run.reported = True

    def after_fork(self) -> None:
        """Start afresh in a forked child (called there for every tracker): the parent's runs
        do not continue in the child, and another thread may have held the lock at the fork."""
        self.lock = threading.RLock() if self._reentrant else threading.Lock()
        self._runs.clear()
        self.links.clear()

    def runs(self) -> list[R]:
        """The top-level runs tracked now, oldest first."""
        with self.lock:
            return list(self._runs.values())

    @property
    def active_runs(self) -> int:
        """Top-level runs tracked now."""
        return len(self._runs)

    @property
    def tracked_ids(self) -> int:
        """Ids (top-level and nested) mapped now."""
        return len(self.links)

    # -- sampling ---------------------------------------------------------------------------------

    def decide(self, run: R) -> Decision:
        """The run retrieves: the sampler's decision, asked of the monitor at the first
        retrieval only (call with the lock held, so that parallel retrievals ask once)."""
        run.retrieving = True
        decision = run.decision
        if decision is None:
            decision = run.decision = run.monitor.decide(
                span_context=run.span_context, route=run.route
            )
        return decision

    def keep_locked(self, run: R, kept: list[Any], items: Sequence[Any], limit: int) -> None:
        """Append ``items`` to ``kept`` up to ``limit`` in all; the rest are counted dropped
        (on the run, for ``groundwatch.contexts.dropped``, and in ``documents_dropped``)."""
        room = limit - len(kept)
        if len(items) <= room:
            kept.extend(items)
            return
        room = max(room, 0)
        kept.extend(items[:room])
        dropped = len(items) - room
        run.dropped += dropped
        self._counts["documents_dropped"] += dropped

    # -- the terminal calls -----------------------------------------------------------------------

    def _terminal(self, run: R, counter: str) -> MonitorLike | None:
        """Claim the run's one terminal call and count it under ``counter``, in one taking of
        the lock: the run's monitor, or ``None`` when the call was made already (or the run's
        monitor is gone: nothing is counted)."""
        with self.lock:
            if run.reported:
                return None
            run.reported = True
            monitor = run.target()
            if monitor is not None:
                self._counts[counter] += 1
        return monitor

    def record(
        self,
        run: R,
        *,
        question: str | None,
        contexts: Sequence[Any],
        answer: str,
        attributes: dict[str, Any],
        span_context: SpanContext | None = None,
        tools: bool = False,
    ) -> None:
        """Hand the run to the monitor as a record, with the tracker's attributes added to
        ``attributes``: ``groundwatch.contexts.dropped``, the conversation's id and, with
        ``tools`` (the run called tools), ``groundwatch.contexts.tools``,
        ``groundwatch.tool.errors`` and ``groundwatch.contexts.unreadable``.

        When the monitor raises, the run is reported as an ``internal`` failure and the
        exception re-raised for the integration's guard."""
        monitor = self._terminal(run, "records")
        if monitor is None:
            return
        if run.dropped:
            attributes[semconv.GROUNDWATCH_CONTEXTS_DROPPED] = run.dropped
        if tools:
            attributes[semconv.GROUNDWATCH_CONTEXTS_TOOLS] = run.tool_outputs
        if run.tool_errors:
            attributes[semconv.GROUNDWATCH_TOOL_ERRORS] = run.tool_errors
        if run.unreadable:
            attributes[semconv.GROUNDWATCH_CONTEXTS_UNREADABLE] = run.unreadable
        if run.conversation_id is not None:
            attributes[semconv.GEN_AI_CONVERSATION_ID] = run.conversation_id
        try:
            monitor.record(
                question=question,
                contexts=contexts,
                answer=answer,
                span_context=span_context if span_context is not None else run.span_context,
                route=run.route,
                attributes=attributes,
                decision=run.decision,
            )
        except Exception:
            # The run still gets its one terminal call, a failure; the monitor's exception goes
            # to the caller's guard (a second one, from record_failure, would only hide it).
            with self.lock:
                self._counts["records"] -= 1
                self._counts["failures"] += 1
            with contextlib.suppress(Exception):
                monitor.record_failure(semconv.ERROR_INTERNAL, route=run.route)
            raise

    def fail(self, run: R, error_type: str) -> None:
        """Report the run as failed (``record_failure``) with ``error_type``: one of the
        ``semconv.ERROR_*`` names, or the class name of the framework's exception."""
        monitor = self._terminal(run, "failures")
        if monitor is not None:
            monitor.record_failure(error_type, route=run.route)

    def fail_internal(self, run: R) -> None:
        """After a bug of ours while finishing the run: an ``internal`` failure, unless its
        terminal call was made already."""
        self.fail(run, semconv.ERROR_INTERNAL)

    def decline(self, run: R) -> None:
        """The sampler declined the run at its first retrieval: ``record_decision``."""
        decision = run.decision
        if decision is None:
            return  # never decided: nothing was declined
        monitor = self._terminal(run, "not_sampled")
        if monitor is not None:
            monitor.record_decision(decision, route=run.route)

    def ignore(self, run: R, counter: str = "no_retrieval") -> None:
        """The run is no interaction to score (it never retrieved, or it only retrieved): no
        call to the monitor, counted under ``counter``."""
        with self.lock:
            if run.reported:
                return
            run.reported = True
            self._counts[counter] += 1

    # -- counters and errors ----------------------------------------------------------------------

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``name``."""
        with self.lock:
            self._counts[name] += n

    def count_locked(self, name: str, n: int = 1) -> None:
        """:meth:`count` with the lock held."""
        self._counts[name] += n

    @property
    def counts(self) -> dict[str, int]:
        """A snapshot of the counters (:data:`COUNTERS` and the integration's own)."""
        with self.lock:
            return dict(self._counts)

    def counter(self, name: str) -> int:
        """One counter's value."""
        return self._counts[name]

    def internal_error(self, where: str, exc: BaseException, *, reraise: bool = True) -> None:
        """A bug of ours at ``where``: counted in ``internal_errors`` and reported to the core's
        guard as ``component + where`` (logged rate-limited, ``groundwatch.errors``; re-raised
        only under ``GROUNDWATCH_RAISE_INTERNAL_ERRORS`` and ``reraise``)."""
        with self.lock:
            self._counts["internal_errors"] += 1
        internal_error(self.component + where, exc, reraise=reraise)


_trackers: weakref.WeakSet[RunTracker[Any, Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for tracker in list(_trackers):
        tracker.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
