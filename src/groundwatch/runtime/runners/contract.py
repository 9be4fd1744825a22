"""The one contract between the worker and the place a judge runs: :class:`Runner`.

The worker (:mod:`..worker`) takes records off its queue and hands a batch to the scoring
pipeline (:mod:`..pipeline`), which prepares each once and hands the prepared records to the
runner that :func:`~.choice.runner_for` chose. The runner
judges and scores each one under its own deadline and returns one result per record, in order.
Three runners implement the contract:

- :class:`~.thread_runner.ThreadRunner`: a sync judge on a daemon thread of this interpreter;
- :class:`~.process_runner.ProcessRunner`: a sync judge in a worker process (the default);
- :class:`~.async_runner.AsyncRunner`: an async judge on the worker's event loop (batches of one,
  several in flight);
- :class:`~.cascade_runner.CascadeRunner`: a cascade's two stages, each on a runner of its own.

A runner never raises out of :meth:`Runner.run` except ``asyncio.CancelledError`` (shutdown):
whatever goes wrong with one record (the judge raises, hangs, returns nonsense, the worker
process dies) is that record's error evaluation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..._fields import EvaluationView
from ...judging import scoring
from ...types import Passage, RagRecord


@dataclass(slots=True)
class Prepared:
    """One record's inputs, validated and capped once
    (:func:`groundwatch._shared.inputs.prepare`)."""

    answer: str
    passages: Sequence[Passage]
    question: str | None
    truncated: bool
    record: RagRecord | None = None
    """The record it came from (the process runner sends its span's fields when the worker
    process exports: :mod:`groundwatch.telemetry.worker_export`)."""


@dataclass(slots=True)
class RunnerResult:
    """One record's result from a runner."""

    evaluation: EvaluationView
    start_ns: int
    end_ns: int
    exported: bool = False
    """The worker process exported the span and the events already (the host records the
    metric points only)."""


MAX_BATCH = 32
"""Records per batch handed to a sync judge's runner (a thread or the worker process)."""
BATCH_TARGET_S = 0.1
"""A batch is cut so that it should take about this long (from the judge's recent speed): a
slow judge gets small batches, so shutdown deadlines still bite per record."""
MAX_STUCK_JUDGE_THREADS = 4
"""Judge calls that timed out but never returned: past this many, fail fast instead of
starting yet another thread that may hang too."""


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
    ) -> list[RunnerResult]:
        """Judge and score each item, each within ``timeout_s``; one result per item, in order.
        Raises only ``asyncio.CancelledError``."""
        ...

    def close_soon(self, deadline: float) -> None:
        """Shutdown began (called on the worker's loop): what is left must be scored by
        ``deadline`` (a ``time.monotonic()`` time), so stop waiting for what may not come in
        time (a worker process still starting)."""
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
