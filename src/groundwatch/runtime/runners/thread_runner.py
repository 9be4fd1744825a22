"""A sync judge on a daemon thread of this interpreter (``Monitor(executor="thread")``)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Sequence
from typing import Any

from ...judging import scoring
from ...judging.judges._base import judge_name
from ...telemetry import semconv as sc
from ..pipeline import (
    Prepared,
    RunnerResult,
    error_evaluation,
    evaluate_prepared,
    timeout_evaluation,
)
from .contract import MAX_STUCK_JUDGE_THREADS, JudgeSpeed


class ThreadRunner:
    """A :class:`~.contract.Runner` that judges a batch one record after another on one daemon
    thread (not one thread and one loop task per record).

    Not ``asyncio.to_thread``: its executor's threads are joined at interpreter exit, so a
    hanging judge would hang the host's exit. Each record keeps its own deadline: a call past
    it is abandoned (its thread counted as stuck), its record fails with ``timeout`` and the
    records after it go to a fresh thread. Past :data:`~.contract.MAX_STUCK_JUDGE_THREADS` stuck
    threads, records fail fast with ``judge_unresponsive``.
    """

    def __init__(self, judge: Any, *, concurrency: int = 1) -> None:
        self.inner = judge
        self.name = judge_name(judge)
        # 1 for a sync judge: several CPU-bound calls at once only fight over the GIL. An async
        # judge moved off the worker's loop (see AsyncRunner) keeps its concurrency.
        self.concurrency = concurrency
        self._lock = threading.Lock()
        self.alive = 0
        self.speed = JudgeSpeed()

    def batch_size(self) -> int:
        return self.speed.batch_size()

    async def start(self) -> None:
        """Nothing to start."""

    def close_soon(self, deadline: float) -> None:
        """Nothing is waited for but the judge, whose deadline bounds shutdown."""

    def close(self) -> None:
        """Nothing to stop: a stuck thread is a daemon and ends with the interpreter."""

    async def run(
        self, items: Sequence[Prepared], policy: scoring.LabelPolicy, timeout_s: float
    ) -> list[RunnerResult]:
        results: list[RunnerResult | None] = [None] * len(items)
        todo = list(range(len(items)))
        loop = asyncio.get_running_loop()
        while todo:
            if self.alive >= MAX_STUCK_JUDGE_THREADS:
                message = f"{self.alive} earlier judge calls never returned"
                for i in todo:
                    now = time.time_ns()
                    failed = error_evaluation("judge_unresponsive", message, items[i], self.name)
                    results[i] = RunnerResult(failed, now, now)
                break
            todo = await self._one_thread(loop, items, todo, results, policy, timeout_s)
        return [r for r in results if r is not None]

    async def _one_thread(
        self,
        loop: asyncio.AbstractEventLoop,
        items: Sequence[Prepared],
        todo: list[int],
        results: list[RunnerResult | None],
        policy: scoring.LabelPolicy,
        timeout_s: float,
    ) -> list[int]:
        """One thread over ``todo``; returns what is left to do after a timeout."""
        future: asyncio.Future[None] = loop.create_future()
        ctx = contextvars.copy_context()
        done: dict[int, RunnerResult] = {}
        state: dict[str, Any] = {"now": (todo[0], time.monotonic()), "abandoned": False}

        def deliver() -> None:
            if not future.done():
                future.set_result(None)

        def target() -> None:
            try:
                for i in todo:
                    if state["abandoned"]:
                        return
                    state["now"] = (i, time.monotonic())
                    start = time.time_ns()
                    evaluation = ctx.run(evaluate_prepared, self.inner, items[i], policy, self.name)
                    if state["abandoned"]:
                        return
                    end = time.time_ns()
                    done[i] = RunnerResult(evaluation, start, end)
                    self.speed.observe(end - start)
            finally:
                with self._lock:
                    self.alive -= 1
                # RuntimeError: the loop closed meanwhile (shutdown); nobody waits.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(deliver)

        with self._lock:
            self.alive += 1
        threading.Thread(target=target, name="groundwatch-judge", daemon=True).start()
        stuck: int | None = None
        try:
            while not future.done():
                current, started = state["now"]
                remaining = started + timeout_s - time.monotonic()
                if remaining <= 0:
                    state["abandoned"] = True
                    stuck = current
                    break
                await asyncio.wait({future}, timeout=remaining)
        except asyncio.CancelledError:
            state["abandoned"] = True  # shut down: the thread stops after its current call
            raise
        left: list[int] = []
        for i in todo:
            if i in done:
                results[i] = done[i]
            elif i == stuck:
                now = time.time_ns()
                failed = timeout_evaluation(timeout_s, items[i], self.name)
                results[i] = RunnerResult(failed, now - int(timeout_s * 1e9), now)
            elif stuck is not None:
                left.append(i)
            else:
                # The thread ended without this record's result (a bug of ours past the guards
                # of evaluate_prepared): the record fails alone, it is not lost.
                now = time.time_ns()
                message = "the judge thread ended before this record was scored"
                failed = error_evaluation(sc.ERROR_INTERNAL, message, items[i], self.name)
                results[i] = RunnerResult(failed, now, now)
        return left

    def flush(self, timeout_s: float) -> bool:
        return True  # it exports nothing itself: the host's telemetry does

    def at_fork_reinit(self) -> None:
        self._lock = threading.Lock()
        self.alive = 0
