"""The one contract between the worker and the place a judge runs: :class:`Runner`.

The worker (:mod:`.worker`) takes records off its queue, prepares each once
(:func:`prepare_record`), and hands a batch of prepared records to its runner. The runner
judges and scores each one under its own deadline and returns one result per record, in order.
Three runners implement the contract:

- :class:`~.thread.ThreadRunner`: a sync judge on a daemon thread of this interpreter;
- :class:`~.process.ProcessRunner`: a sync judge in a worker process (the default);
- :class:`~.asyncjudge.AsyncRunner`: an async judge on the worker's event loop (batches of one,
  several in flight).

A runner never raises out of :meth:`Runner.run` except ``asyncio.CancelledError`` (shutdown):
whatever goes wrong with one record (the judge raises, hangs, returns nonsense, the worker
process dies) is that record's error evaluation.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from .. import _guard
from .._inputs import prepare
from ..judging import scoring
from ..judging.evaluate import score_judgement
from ..judging.judges._base import judgement_from_error
from ..telemetry import semconv as sc
from ..types import Evaluation, Judgement, Passage, RagRecord

T = TypeVar("T")

MAX_BATCH = 32
"""Records per batch handed to a sync judge's runner (a thread or the worker process)."""
BATCH_TARGET_S = 0.1
"""A batch is cut so that it should take about this long (from the judge's recent speed): a
slow judge gets small batches, so shutdown deadlines still bite per record."""
MAX_STUCK_JUDGE_THREADS = 4
"""Judge calls that timed out but never returned: past this many, fail fast instead of
starting yet another thread that may hang too."""


class Prepared(NamedTuple):
    """One record's inputs, validated and capped once (:func:`groundwatch._inputs.prepare`)."""

    answer: str
    passages: Sequence[Passage]
    question: str | None
    truncated: bool
    record: RagRecord | None = None
    """The record it came from (the process runner reads its span's fields there when the
    worker process exports: :mod:`groundwatch.telemetry.worker_export`)."""


Result = tuple["Evaluation | Any", int, int]
"""``(evaluation, start_ns, end_ns)``; the evaluation may be the process runner's
``LazyEvaluation`` (same scalar fields, claims built on demand)."""


class Runner(Protocol):
    """Where a judge runs; the worker's only view of it."""

    name: str
    """The judge's name, for the error evaluations the worker makes itself."""
    concurrency: int
    """Batches the worker may have in flight at once."""

    def batch_size(self) -> int:
        """Records for the next batch (1 for async judges; sync runners grow it from the
        judge's speed, up to :data:`MAX_BATCH`)."""
        ...

    async def start(self) -> None:
        """Get ready (start a worker process); awaited outside every evaluation deadline."""
        ...

    async def run(
        self, items: Sequence[Prepared], policy: scoring.LabelPolicy, timeout_s: float
    ) -> list[Result]:
        """Judge and score each item, each within ``timeout_s``; one result per item, in order.
        Raises only ``asyncio.CancelledError``."""
        ...

    def flush(self, timeout_s: float) -> bool:
        """Export what the runner exported itself and still holds (the worker processes'
        spans with ``export_from_worker``); ``True`` when there is nothing of the kind."""
        ...

    def at_fork_reinit(self) -> None:
        """In a forked child: forget the parent's threads and processes."""
        ...

    def close(self) -> None:
        """Release what :meth:`start` acquired (``Monitor.shutdown``)."""
        ...


PACE_SLICE_S = 0.001
"""The worker's per-record steps (preparing, telemetry) run on its thread in the host's
interpreter, holding the GIL, and they come in bursts: a batch at a time. A request thread that
wants the GIL meanwhile gets it only between the worker's records, and a request that overlaps
a burst loses it again at each of its own thread hand-offs, so it waits for most of the burst:
that is the host's tail latency. So the worker works in slices of this much and rests
:data:`PACE_REST_S` after each, long enough for a request to run on: a burst becomes a few
slices that each request meets once at most."""

PACE_REST_S = 0.003
"""The rest after each :data:`PACE_SLICE_S` of work (asleep: no CPU, the GIL free). While it
paces the worker takes a quarter of the interpreter at most, over a thousand records a second
at 0.1-0.2 ms of host work each; past that it stops resting (:class:`Pacer`), so pacing delays
scores and never loses records. Shorter slices (0.2 ms, rests of 0.5-2 ms, tried on the
LangChain benchmark's chain) cut the tail about as much but cost the median request more: each
slice is two more hand-offs of the GIL. ``benchmarks/overhead_langchain.py`` shows pacing on
beside off."""


class Pacer:
    """Call :meth:`start` before a batch's loop and :meth:`maybe` between its records: after
    ``slice_s`` of work since the start or the last rest it sleeps ``rest_s``, unless
    ``hurry()`` says the worker must catch up (a flush waits, the monitor shuts down, the queue
    is filling)."""

    __slots__ = ("hurry", "rest_s", "since", "slice_s")

    def __init__(
        self,
        hurry: Callable[[], bool],
        *,
        slice_s: float = PACE_SLICE_S,
        rest_s: float = PACE_REST_S,
    ) -> None:
        self.hurry = hurry
        self.slice_s = slice_s
        self.rest_s = rest_s
        self.since = time.perf_counter()

    def start(self) -> None:
        self.since = time.perf_counter()

    def maybe(self) -> None:
        if time.perf_counter() - self.since >= self.slice_s:
            if not self.hurry():
                time.sleep(self.rest_s)
            self.since = time.perf_counter()


def always_hurry() -> bool:
    """A :class:`Pacer`'s ``hurry`` that never lets it rest."""
    return True


NO_PACING = Pacer(always_hurry)
"""For ``groundwatch worker``, which shares its interpreter with no requests: never rests."""


class InvalidRecord(Exception):
    """The caller's record cannot be read: the worker fails it with ``invalid_input``."""


def prepare_record(record: RagRecord) -> Prepared:
    """Prepare one record (once: the runners and the worker process take it as it is) and
    keep the prepared inputs on the record, which is what ``on_result`` callbacks see.

    Raises:
        InvalidRecord: anything raised while reading the caller's objects (a wrong type, a
            document property or a mapping's ``.get`` that raises).
    """
    try:
        answer, passages, question, truncated = prepare(
            record.answer, record.contexts, record.question
        )
    except Exception as exc:
        record.contexts = []
        raise InvalidRecord(f"{type(exc).__name__}: {exc}"[:500]) from exc
    record.answer, record.contexts, record.question = answer, passages, question
    record.truncated = truncated
    return Prepared(answer, passages, question, truncated, record)


def scored(
    judgement: Any,
    item: Prepared,
    judge: str,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
) -> Evaluation:
    """Score a judge's result for one prepared record. Never raises: whatever goes wrong while
    scoring (a bug of ours) fails this record as ``internal``, not its batch."""
    try:
        return score_judgement(
            judgement, item.answer, item.passages, judge, policy, truncated=item.truncated
        )
    except Exception as exc:
        _guard.internal_error("scoring", exc, reraise=False)
        failed = Judgement(
            error=f"scoring failed: {type(exc).__name__}", error_type=sc.ERROR_INTERNAL
        )
        return score_judgement(
            failed,
            item.answer,
            item.passages,
            judge,
            truncated=item.truncated,
        )


def error_evaluation(error_type: str, message: str, item: Prepared, judge: str) -> Evaluation:
    """A failed evaluation of one prepared record."""
    return scored(Judgement(error=message[:500], error_type=error_type), item, judge)


def timeout_evaluation(timeout_s: float, item: Prepared, judge: str) -> Evaluation:
    return error_evaluation(
        sc.ERROR_TIMEOUT, f"no result within {timeout_s * 1000:.0f} ms", item, judge
    )


def evaluate_prepared(
    judge: Any, item: Prepared, policy: scoring.LabelPolicy, name: str
) -> Evaluation:
    """Judge and score one prepared record with a sync judge, on the calling thread (a
    runner's thread, or the worker process). Never raises."""
    try:
        judgement: Any = judge.judge(item.answer, item.passages, item.question)
        if inspect.isawaitable(judgement):
            # A sync judge returning an awaitable: this thread runs no loop, so run it here.
            judgement = asyncio.run(_awaited(judgement))
    except BaseException as exc:
        judgement = judgement_from_error(exc)
    return scored(judgement, item, name, policy)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


class JudgeSpeed:
    """A judge's recent time per record (an exponential moving average), which sets the size
    of the next batch: about :data:`BATCH_TARGET_S` of judge time, 1..:data:`MAX_BATCH`."""

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns: float | None = None

    def observe(self, ns: float) -> None:
        self.ns = ns if self.ns is None else 0.8 * self.ns + 0.2 * ns

    def batch_size(self) -> int:
        if self.ns is None:
            return 1  # the judge's speed is unknown yet
        return max(1, min(MAX_BATCH, int(BATCH_TARGET_S * 1e9 / max(self.ns, 1.0))))


class DaemonThreads:
    """Daemon threads that run blocking calls for the event loop, kept for reuse.

    Not ``asyncio.to_thread``: its pool threads are joined at interpreter exit, so a call that
    never returns would hang the host's exit. A daemon thread is simply abandoned when the
    awaiting task is cancelled (timeout, shutdown), and a thread whose call has not returned is
    never handed another one. Reuse matters on the host's CPU: starting a thread costs about
    0.1-0.2 ms of it, once per batch (``benchmarks/host_cpu.py``).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._idle: list[_DaemonThread] = []
        self._closed = False

    async def run(self, call: Callable[[], T]) -> T:
        """Run ``call`` on an idle thread (a new one when none is idle); await its result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            thread = self._idle.pop() if self._idle else None
        if thread is None:
            thread = _DaemonThread(self)
        thread.jobs.put((call, loop, future))
        return await future

    def _done(self, thread: _DaemonThread) -> bool:
        """A thread's call returned: whether it stays for the next one."""
        with self._lock:
            if self._closed:
                return False
            self._idle.append(thread)
            return True

    def close(self) -> None:
        """Let the threads end (a running call still finishes and delivers first)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for thread in idle:
            thread.jobs.put(None)

    def at_fork_reinit(self) -> None:
        # The parent's threads do not exist in a forked child.
        self._lock = threading.Lock()
        self._idle = []


_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class _DaemonThread:
    __slots__ = ("jobs", "owner")

    def __init__(self, owner: DaemonThreads) -> None:
        self.owner = owner
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        threading.Thread(target=self._main, name=owner.name, daemon=True).start()

    def _main(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None or not self._run(*job):
                return
            del job  # nothing of a finished batch stays referenced while idle

    def _run(
        self, call: Callable[[], Any], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]
    ) -> bool:
        value: Any = None
        error: BaseException | None = None
        try:
            value = call()
        except BaseException as exc:
            error = exc
        # Idle again before the result is delivered: the next batch then finds this thread.
        stay = self.owner._done(self)
        # RuntimeError: the loop closed meanwhile (shutdown); nobody waits for the result.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_deliver, future, value, error)
        return stay


def _deliver(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)
