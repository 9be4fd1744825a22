"""An async judge on the worker's event loop: :class:`AsyncRunner`, and its loop-lag watchdog.

An async judge's calls wait on the network, so several run at once on the worker's loop, each
under its own deadline. That deadline is an ``asyncio`` timer: it can only fire while the loop
runs. A judge that blocks the loop (``time.sleep`` or a sync HTTP client inside ``async def``)
defeats it, and every other evaluation waits behind the blocked one.

The watchdog times every step of the judge's coroutine, the stretch it runs before its next
``await`` hands the loop back. A step longer than :data:`LOOP_BLOCK_LIMIT_S` means the judge
blocked the loop: it is counted (``groundwatch.errors{groundwatch.component=judge,
error.type=event_loop_blocked}``), logged once with the judge's name, and from then on the
judge's calls run on a :class:`~.thread_runner.ThreadRunner` (each on a daemon thread with a loop of
its own), where the deadline holds again and nothing waits behind a blocked call. An evaluation
that returned after its deadline (the one that blocked) counts as a timeout all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import types
from collections.abc import Coroutine, Generator, Sequence
from typing import Any

from ..._shared import guard
from ...judging import scoring
from ...judging.judges._base import judge_async, judge_name
from ...types import Judgement
from ..pipeline import Prepared, RunnerResult, evaluation_from, timeout_evaluation
from .thread_runner import ThreadRunner

_logger = logging.getLogger(__name__)

LOOP_BLOCK_LIMIT_S = 0.25
"""A judge coroutine step longer than this blocked the worker's loop. Real async judges hand
the loop back within microseconds to milliseconds (they parse a reply, build a prompt); a
quarter second is a sync call or heavy CPU work where an ``await`` should be."""

EVENT_LOOP_BLOCKED = "event_loop_blocked"


class StepWatch:
    """The longest synchronous step seen while driving one coroutine."""

    __slots__ = ("longest_s",)

    def __init__(self) -> None:
        self.longest_s = 0.0

    @types.coroutine
    def drive(self, coro: Coroutine[Any, Any, Any]) -> Generator[Any, Any, Any]:
        """Await ``coro``, timing each step (``send``/``throw`` up to its next yield)."""
        value: Any = None
        thrown: BaseException | None = None
        try:
            while True:
                start = time.perf_counter()
                try:
                    yielded = coro.send(value) if thrown is None else coro.throw(thrown)
                except StopIteration as stop:
                    return stop.value
                finally:
                    self.longest_s = max(self.longest_s, time.perf_counter() - start)
                try:
                    value, thrown = (yield yielded), None
                except BaseException as exc:
                    value, thrown = None, exc
        finally:
            coro.close()


class AsyncRunner:
    """A :class:`~.contract.Runner` for an async judge: batches of one, ``concurrency`` of them
    in flight on the worker's loop (see the module docstring for the watchdog)."""

    def __init__(self, judge: Any, *, concurrency: int) -> None:
        self.inner = judge
        self.name = judge_name(judge)
        self.concurrency = concurrency
        self.off_loop: ThreadRunner | None = None
        """Set once the judge blocked the loop: where its calls run from then on."""

    def batch_size(self) -> int:
        return 1

    async def start(self) -> None:
        """Nothing to start."""

    def close_soon(self, deadline: float) -> None:
        """Nothing is waited for but the judge, whose deadline bounds shutdown."""

    def close(self) -> None:
        """Nothing to stop."""

    def flush(self, timeout_s: float) -> bool:
        return True  # it exports nothing itself: the host's telemetry does

    def at_fork_reinit(self) -> None:
        if self.off_loop is not None:
            self.off_loop.at_fork_reinit()

    async def run(
        self, items: Sequence[Prepared], policy: scoring.LabelPolicy, timeout_s: float
    ) -> list[RunnerResult]:
        if self.off_loop is not None:
            return await self.off_loop.run(items, policy, timeout_s)
        return [await self._one(item, policy, timeout_s) for item in items]

    async def _one(
        self, item: Prepared, policy: scoring.LabelPolicy, timeout_s: float
    ) -> RunnerResult:
        watch = StepWatch()
        start_ns = time.time_ns()
        judgement: Judgement | None = None  # stays None past the deadline
        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
            judgement = await asyncio.wait_for(
                judge_async(
                    self.inner, item.answer, item.passages, item.question, drive=watch.drive
                ),
                timeout_s,
            )
        end_ns = time.time_ns()
        blocked = watch.longest_s > LOOP_BLOCK_LIMIT_S
        if blocked:
            self._blocked(watch.longest_s)
        # A blocked loop cannot fire the deadline's timer: the call that blocked it returns
        # late instead, and still counts as a timeout.
        if judgement is None or (blocked and end_ns - start_ns > timeout_s * 1e9):
            return RunnerResult(timeout_evaluation(timeout_s, item, self.name), start_ns, end_ns)
        return RunnerResult(evaluation_from(judgement, item, self.name, policy), start_ns, end_ns)

    def _blocked(self, seconds: float) -> None:
        if self.off_loop is not None:
            return
        self.off_loop = ThreadRunner(self.inner, concurrency=self.concurrency)
        guard.user_fault(
            "judge",
            EVENT_LOOP_BLOCKED,
            "groundwatch: async judge %s blocked the worker's event loop for %.2f s (a sync call "
            "inside async def?); its calls now run on threads so that the evaluation deadline "
            "holds. Make the judge await its I/O, or give it a sync judge() instead.",
            self.name,
            seconds,
        )
