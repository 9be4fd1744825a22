"""A :class:`~groundwatch.CascadeJudge` in the runtime: :class:`CascadeRunner`.

A cascade's stages are judges of different kinds: a CPU-bound first stage (``LocalJudge``) and
an LLM second stage that waits on the network. Called as one async judge, the first stage would
run on a thread of the host's interpreter, holding its GIL, whatever the monitor's executor
says. Here each stage runs on the runner its kind gets (:func:`~.choice.runner_for`): the first
in the worker process (``executor="process"``, the default) or on a thread, the second on the
worker's loop; the escalation rule (:meth:`~groundwatch.CascadeJudge.should_escalate`) is
applied to the first stage's evaluation between them, and the escalation counters stay on the
monitor's cascade (``groundwatch.judge.escalations``).

Deadline: one evaluation deadline covers both stages, as it covers one judge: the second stage
gets what the first left of it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from ..._fields import as_evaluation
from ...judging import scoring
from ...judging.judges.cascade import CascadeJudge
from ...types import Evaluation
from ..pipeline import Prepared, RunnerResult, timeout_evaluation
from .contract import Runner

MIN_SECOND_STAGE_S = 0.001
"""The least time a second stage is given (a first stage that used the whole deadline leaves
its answer to time out in the second rather than to skip it)."""


class CascadeRunner:
    """A :class:`~.contract.Runner` for a :class:`~groundwatch.CascadeJudge`: ``first`` judges the
    batch on its runner; the answers it is unsure of go to ``then`` on its runner, concurrently
    up to ``then``'s concurrency."""

    def __init__(self, cascade: CascadeJudge, first: Runner, then: Runner) -> None:
        self.cascade = cascade
        self.first = first
        self.then = then
        self.name = cascade.name
        self.concurrency = max(first.concurrency, then.concurrency)
        # The first stage's runner takes one batch at a time (a worker process per batch,
        # not one per batch in flight).
        self._first_slot = asyncio.Semaphore(first.concurrency)

    def batch_size(self) -> int:
        return self.first.batch_size()

    async def start(self) -> None:
        await self.first.start()
        await self.then.start()

    def close_soon(self, deadline: float) -> None:
        self.first.close_soon(deadline)
        self.then.close_soon(deadline)

    async def run(
        self, items: Sequence[Prepared], policy: scoring.LabelPolicy, timeout_s: float
    ) -> list[RunnerResult]:
        async with self._first_slot:
            firsts = await self.first.run(items, policy, timeout_s)
        cascade = self.cascade
        results: list[RunnerResult | None] = [None] * len(items)
        escalated: list[tuple[int, Evaluation]] = []
        for i, result in enumerate(firsts):
            evaluation = as_evaluation(result.evaluation)
            if cascade.should_escalate(evaluation):
                cascade.count(True)
                escalated.append((i, evaluation))
            else:
                cascade.count(False)
                kept = evaluation.model_copy(update={"judge": self.name})
                results[i] = RunnerResult(kept, result.start_ns, result.end_ns)
        if escalated:
            seconds = await asyncio.gather(
                *(
                    self._second(items[i], first, firsts[i], policy, timeout_s)
                    for i, first in escalated
                )
            )
            for (i, _), result in zip(escalated, seconds, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    async def _second(
        self,
        item: Prepared,
        first: Evaluation,
        first_result: RunnerResult,
        policy: scoring.LabelPolicy,
        timeout_s: float,
    ) -> RunnerResult:
        left_s = timeout_s - (time.time_ns() - first_result.start_ns) / 1e9
        if left_s <= 0:
            end = time.time_ns()
            return RunnerResult(
                timeout_evaluation(timeout_s, item, self.name), first_result.start_ns, end
            )
        [second] = await self.then.run([item], policy, max(MIN_SECOND_STAGE_S, left_s))
        combined = self.cascade.combine(first, as_evaluation(second.evaluation))
        named = combined.model_copy(update={"judge": self.name})
        return RunnerResult(named, first_result.start_ns, second.end_ns)

    def flush(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        done = self.first.flush(timeout_s)
        return self.then.flush(max(0.0, deadline - time.monotonic())) and done

    def at_fork_reinit(self) -> None:
        self.first.at_fork_reinit()
        self.then.at_fork_reinit()
        self._first_slot = asyncio.Semaphore(self.first.concurrency)

    def close(self) -> None:
        self.first.close()
        self.then.close()
