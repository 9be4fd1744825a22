"""Delivery of a sink's writes to its server: one bounded queue, one batch worker thread.

Shaped after OpenTelemetry's ``BatchProcessor`` (``opentelemetry.sdk._shared_internal``): the
worker thread (or a feedback call) offers a :class:`Write` and never waits; a full queue refuses
it and counts it; one named daemon thread wakes when a batch is full, a scheduled delay passed or
a retry is due, and hands batches of at most ``max_batch_size`` writes to the sink's
:class:`Exporter` with a deadline; :meth:`Delivery.force_flush` and :meth:`Delivery.shutdown`
keep theirs and say whether they made it; a forked child starts with an empty queue and no
thread.

What OpenTelemetry's processor does not need and a dashboard does:

- **Retries.** A server that is down, overloaded or restarting (``connection``, ``timeout``,
  ``rate_limited``, HTTP 408/429/5xx) is tried again after an exponential backoff with full
  jitter (``RETRY_BASE_S`` doubling up to ``RETRY_MAX_S``, a random share of it, so that many
  processes coming back together do not hit the server in step), for ``retry_window_millis``
  after the write's first try (default 60 s, about what an OTLP exporter's own retries cover).
- **Spans not ingested yet.** An annotation can reach the server before the span it annotates
  (the app's span exporter batches every 5 s by default, a collector batches again): a write
  the exporter answers :attr:`Outcome.NOT_INGESTED` is retried on the same backoff for
  ``span_wait_millis`` after its first try (default 60 s), then counted ``span_not_found``.
- **Idempotent writes.** Each write carries a ``key``, the identifier the server upserts on, so
  a write the server accepted but whose reply was lost (a timeout) updates itself when it is
  sent again instead of adding a duplicate. The exporter puts the key where its server reads it.
- **Nothing lost without a word.** Every write that is given up is counted in
  ``groundwatch.errors`` under the sink's component with its error type (the last failure's,
  or ``queue_full``, ``span_not_found``, ``shutdown``: docs/dashboards.md) and warned about
  (rate-limited; the first of each kind once on stderr). Nothing is raised into the app.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import os
import random
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from .._shared import guard
from .._shared.error_types import (
    ERROR_INTERNAL,
    ERROR_QUEUE_FULL,
    ERROR_SHUTDOWN,
    ERROR_SPAN_NOT_FOUND,
)
from .._shared.weakhooks import reinit_after_fork

DEFAULT_MAX_QUEUE_SIZE = 2048
"""Writes waiting to be sent, retries included; more are refused and counted ``queue_full``."""
DEFAULT_MAX_BATCH_SIZE = 100
"""Writes per request (Phoenix and MLflow take a list per call)."""
DEFAULT_SCHEDULE_DELAY_MILLIS = 1000
"""How long a write may wait for its batch to fill before the batch is sent anyway."""
DEFAULT_EXPORT_TIMEOUT_MILLIS = 10_000
"""The deadline of one request to the server."""
DEFAULT_RETRY_WINDOW_MILLIS = 60_000
"""How long after its first try a write that failed for a transient cause is tried again."""
DEFAULT_SPAN_WAIT_MILLIS = 60_000
"""How long after its first try a write whose span the server does not have yet is tried again."""
RETRY_BASE_S = 0.5
"""The first retry's backoff ceiling; it doubles with every attempt."""
RETRY_MAX_S = 15.0
"""The backoff's ceiling."""


class Outcome(enum.Enum):
    """What became of one write in one attempt."""

    DONE = "done"
    """The server took it."""
    RETRY = "retry"
    """A transient failure (the server down, overloaded, timing out): try again later."""
    NOT_INGESTED = "not_ingested"
    """The server does not have the span (or trace) the write is about yet: try again later."""
    FAILED = "failed"
    """The server refused it for good (a 4xx other than 408/429): counted, not retried."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One write's outcome, with the error type of a failure (``connection``, ``http_503``)."""

    outcome: Outcome
    error_type: str | None = None


DONE = Reply(Outcome.DONE)


@dataclass(slots=True)
class Write:
    """One write to a dashboard: an annotation, an assessment.

    Attributes:
        key: the identifier the server upserts on (a retried write updates, never duplicates).
        body: what the exporter sends (a JSON-ready value of the sink's own shape).
        kind: which of the sink's endpoints it goes to (``span``, ``document``); a batch
            handed to the exporter may mix kinds.
    """

    key: str
    body: Any
    kind: str = ""
    attempts: int = 0
    first_try: float = 0.0
    """``time.monotonic()`` of the first attempt (0 before it)."""
    last_error: str | None = field(default=None, repr=False)


class Exporter(Protocol):
    """What a sink gives its :class:`Delivery`: how a batch of writes reaches its server.

    ``export`` runs on the delivery thread only, one batch at a time; it must return one
    :class:`Reply` per write, in order, and keep ``timeout_s``. An exception it raises fails
    the whole batch as ``internal`` (counted, never retried: a bug would repeat).
    """

    component: str
    """The sink's name in ``groundwatch.errors{groundwatch.component}``: ``phoenix``."""

    def export(self, writes: Sequence[Write], timeout_s: float) -> Sequence[Reply]: ...


class DeliverySettings(TypedDict, total=False):
    """A delivery's bounds as keyword arguments: what every sink takes and hands to
    :class:`Delivery`, which owns their defaults and checks."""

    max_queue_size: int
    max_batch_size: int
    schedule_delay_millis: int
    export_timeout_millis: int
    retry_window_millis: int
    span_wait_millis: int


class Delivery:
    """A bounded queue of writes drained by one daemon thread that sends them in batches.

    Args:
        exporter: sends one batch (see :class:`Exporter`).
        max_queue_size: writes waiting, retries included; a full queue refuses (``queue_full``).
        max_batch_size: writes per :meth:`Exporter.export` call.
        schedule_delay_millis: the longest a write waits for its batch to fill.
        export_timeout_millis: the deadline of one export call.
        retry_window_millis: how long after its first try a transient failure is retried.
        span_wait_millis: how long after its first try a write whose span the server does not
            have yet is retried.
    """

    def __init__(
        self,
        exporter: Exporter,
        *,
        max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        schedule_delay_millis: int = DEFAULT_SCHEDULE_DELAY_MILLIS,
        export_timeout_millis: int = DEFAULT_EXPORT_TIMEOUT_MILLIS,
        retry_window_millis: int = DEFAULT_RETRY_WINDOW_MILLIS,
        span_wait_millis: int = DEFAULT_SPAN_WAIT_MILLIS,
    ) -> None:
        for name, value in (
            ("max_queue_size", max_queue_size),
            ("max_batch_size", max_batch_size),
            ("schedule_delay_millis", schedule_delay_millis),
            ("export_timeout_millis", export_timeout_millis),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if retry_window_millis < 0 or span_wait_millis < 0:
            raise ValueError("retry_window_millis and span_wait_millis must be >= 0")
        self.exporter = exporter
        self.component = exporter.component
        self.max_queue_size = max_queue_size
        self.max_batch_size = min(max_batch_size, max_queue_size)
        self.schedule_delay_s = schedule_delay_millis / 1000
        self.export_timeout_s = export_timeout_millis / 1000
        self.retry_window_s = retry_window_millis / 1000
        self.span_wait_s = span_wait_millis / 1000
        self.delivered = 0
        """Writes the server took (read by tests and the docs' figures)."""
        self.lost = 0
        """Writes given up (each counted in ``groundwatch.errors``)."""
        self._reset()
        reinit_after_fork(self._reset)

    def _reset(self) -> None:
        """An empty, open queue and no thread: the state at construction and in a forked child
        (the parent's thread did not survive the fork; its writes are the parent's to send)."""
        self._pid = os.getpid()
        self._lock = threading.Condition(threading.Lock())
        self._ready: deque[Write] = deque()
        self._waiting: list[tuple[float, int, Write]] = []
        """Writes in backoff: a heap of ``(due, sequence, write)``."""
        self._sequence = itertools.count()
        self._busy = 0
        """Writes taken by the thread and not yet settled."""
        self._wake = threading.Event()
        self._closed = False
        self._deadline: float | None = None
        """When closing: the moment what is still queued is given up."""
        self._thread: threading.Thread | None = None

    # --- the offering thread (the monitor's worker, a feedback call) ---------------------------

    def offer(self, write: Write) -> bool:
        """Queue ``write`` for sending; never waits, never raises. ``False`` when the queue is
        full or closed (counted ``queue_full`` / ``shutdown`` and warned about)."""
        if self._pid != os.getpid():
            self._reset()
        with self._lock:
            if self._closed:
                refused = ERROR_SHUTDOWN
            elif len(self._ready) + len(self._waiting) + self._busy >= self.max_queue_size:
                refused = ERROR_QUEUE_FULL
            else:
                self._ready.append(write)
                full = len(self._ready) >= self.max_batch_size
                if self._thread is None:
                    self._start()
                elif full:
                    self._wake.set()
                return True
        self.give_up([write], refused)
        return False

    def _start(self) -> None:
        # Under self._lock: the first offer starts the thread (not construction: a sink made in
        # a parent that forks before using it never starts a thread there).
        thread = threading.Thread(
            target=self._run, name=f"groundwatch-{self.component}", daemon=True
        )
        self._thread = thread
        thread.start()

    # --- the delivery thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                ready = len(self._ready)
                hurry = ready and (self._closed or ready >= self.max_batch_size)
                wait = 0.0 if hurry else self._wait_s()
            if wait > 0:
                self._wake.wait(wait)
                self._wake.clear()
            try:
                if self._send_due():
                    return
            except Exception as exc:  # a bug of ours: say it, keep the thread alive
                guard.internal_error(self.component, exc, reraise=False)

    def _wait_s(self) -> float:
        """How long the thread may sleep: the schedule delay, or less when a retry is due
        sooner (under the lock)."""
        wait = self.schedule_delay_s
        if self._waiting:
            wait = min(wait, self._waiting[0][0] - time.monotonic())
        if self._closed and self._deadline is not None:
            wait = min(wait, self._deadline - time.monotonic())
        return max(0.0, wait)

    def _send_due(self) -> bool:
        """Send every write that is ready or due, in batches; ``True`` once closed and empty
        (or past the closing deadline, when what is left is given up)."""
        while True:
            with self._lock:
                now = time.monotonic()
                if self._closed and self._deadline is not None and now >= self._deadline:
                    left = [*self._ready, *(w for _, _, w in self._waiting)]
                    self._ready.clear()
                    self._waiting.clear()
                    self._lock.notify_all()
                    break
                while self._waiting and self._waiting[0][0] <= now:
                    self._ready.append(heapq.heappop(self._waiting)[2])
                if not self._ready:
                    done = self._closed and not self._waiting
                    self._lock.notify_all()
                    return done
                batch = [
                    self._ready.popleft() for _ in range(min(len(self._ready), self.max_batch_size))
                ]
                self._busy = len(batch)
                timeout = self.export_timeout_s
                if self._closed and self._deadline is not None:
                    timeout = max(0.001, min(timeout, self._deadline - now))
            try:
                self._settle(batch, self._export(batch, timeout))
            finally:
                with self._lock:
                    self._busy = 0
                    self._lock.notify_all()
        by_cause: dict[str, list[Write]] = {}
        for write in left:
            by_cause.setdefault(write.last_error or ERROR_SHUTDOWN, []).append(write)
        for error_type, given_up in by_cause.items():
            self.give_up(given_up, error_type)
        return True

    def _export(self, batch: list[Write], timeout_s: float) -> Sequence[Reply]:
        now = time.monotonic()
        for write in batch:
            write.attempts += 1
            if not write.first_try:
                write.first_try = now
        try:
            replies = self.exporter.export(batch, timeout_s)
            if len(replies) != len(batch):
                raise ValueError(f"{len(replies)} replies to {len(batch)} writes")
            return replies
        except Exception as exc:  # a bug in the exporter: the batch is lost, never retried
            guard.internal_error(self.component, exc, reraise=False)
            return [Reply(Outcome.FAILED, ERROR_INTERNAL)] * len(batch)

    def _settle(self, batch: list[Write], replies: Sequence[Reply]) -> None:
        now = time.monotonic()
        again: list[tuple[float, Write]] = []
        for write, reply in zip(batch, replies, strict=True):
            if reply.outcome is Outcome.DONE:
                self.delivered += 1
                continue
            if reply.outcome is Outcome.FAILED:
                self.give_up([write], reply.error_type or ERROR_INTERNAL)
                continue
            waiting = reply.outcome is Outcome.NOT_INGESTED
            write.last_error = ERROR_SPAN_NOT_FOUND if waiting else reply.error_type
            window = self.span_wait_s if waiting else self.retry_window_s
            due = now + backoff_s(write.attempts)
            if due - write.first_try > window:
                self.give_up([write], write.last_error or ERROR_INTERNAL)
            else:
                again.append((due, write))
        if again:
            with self._lock:
                for due, write in again:
                    heapq.heappush(self._waiting, (due, next(self._sequence), write))

    def give_up(self, writes: list[Write], error_type: str) -> None:
        """Count ``writes`` as lost for ``error_type`` and warn (rate-limited); a sink calls
        it for a write it cannot even build (a record with no span to annotate)."""
        self.lost += len(writes)
        guard.lost(
            self.component,
            error_type,
            len(writes),
            "groundwatch: %d %s writes lost (%s; counted in groundwatch.errors, "
            "logged at most once a minute)",
            len(writes),
            self.component,
            error_type,
        )

    # --- lifecycle -----------------------------------------------------------------------------

    def pending(self) -> int:
        """Writes queued, in backoff or being sent."""
        with self._lock:
            return len(self._ready) + len(self._waiting) + self._busy

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Send what is queued now; ``True`` when every write is settled (sent or given up)
        within the deadline. Writes in backoff keep their backoff: a server that is down makes
        this return ``False`` at the deadline, with the writes still queued."""
        if self._pid != os.getpid() or self._thread is None:
            return self.pending() == 0
        if threading.current_thread() is self._thread:
            return False
        deadline = time.monotonic() + timeout_millis / 1000
        self._wake.set()
        with self._lock:
            while self._ready or self._waiting or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.05))
                if self._ready:
                    self._wake.set()
        return True

    def shutdown(self, timeout_millis: int = 30_000) -> bool:
        """Refuse new writes, send what is queued within the deadline (writes in backoff get
        one more try each), give up the rest (counted with their last error, or ``shutdown``),
        stop the thread. ``True`` when nothing was given up at the deadline. A second call
        returns ``True`` at once."""
        with self._lock:
            if self._closed:
                return True
            self._closed = True
            deadline = time.monotonic() + timeout_millis / 1000
            self._deadline = deadline
            # One last try each, now: a backoff would outlast most shutdown deadlines.
            for _, _, write in self._waiting:
                self._ready.append(write)
            self._waiting.clear()
            thread = self._thread
            lost_before = self.lost
        if thread is None or self._pid != os.getpid():
            with self._lock:
                left = list(self._ready)
                self._ready.clear()
            if left:
                self.give_up(left, ERROR_SHUTDOWN)
            return not left
        self._wake.set()
        if thread is not threading.current_thread():
            # The thread gives up what is left at the deadline itself; a little grace to see it.
            thread.join(max(0.0, deadline - time.monotonic()) + 0.5)
        return self.lost == lost_before and not thread.is_alive()


def backoff_s(attempts: int) -> float:
    """The wait before try ``attempts + 1``: a random point in the upper half of an exponential
    ceiling ("equal jitter" in AWS's "Exponential Backoff and Jitter"): the retries of many
    processes spread out, and none comes back at once."""
    # The exponent capped: a long window of quick retries must not overflow a float.
    ceiling = min(RETRY_MAX_S, RETRY_BASE_S * 2 ** min(max(0, attempts - 1), 60))
    return random.uniform(ceiling / 2, ceiling)
