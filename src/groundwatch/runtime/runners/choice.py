"""Where a judge runs: :func:`runner_for`, the one place that chooses a runner."""

from __future__ import annotations

from typing import Any

from ..._shared import config
from ...judging.judges._base import is_async_judge
from ...judging.judges.cascade import CascadeJudge
from ...telemetry.worker_export import WorkerExport
from .async_runner import AsyncRunner
from .cascade_runner import CascadeRunner
from .contract import Runner
from .process_runner import ProcessRunner
from .thread_runner import ThreadRunner

__all__ = ["runner_for"]


def runner_for(
    judge: Any,
    executor: str,
    processes: int,
    max_concurrency: int,
    export: WorkerExport | None = None,
    *,
    nice: bool = True,
) -> Runner:
    """Where ``judge`` runs, chosen here for every caller (the monitor, ``groundwatch check``,
    ``groundwatch worker``):

    - an async judge on the worker's loop (``max_concurrency`` calls at once, or the judge's
      own ``concurrency``);
    - a sync judge on a thread (``executor="thread"``), or in ``processes`` worker processes
      (``process``; ``auto`` falls back to a thread when that cannot work), which export their
      evaluations' spans themselves when ``export`` is given and lower their priority unless
      ``nice`` is false (``check``, whose work the judging is);
    - a :class:`~groundwatch.CascadeJudge` as a :class:`~.cascade_runner.CascadeRunner`: each stage
      where its own kind runs (a sync first stage in the worker process, an LLM stage on the
      loop), the escalation rule applied between them.
    """
    if isinstance(judge, CascadeJudge):
        # ``processes`` may count the LLM stage's calls in flight (``--concurrency`` of check
        # and worker): a CPU-bound first stage gains nothing from more processes than cores.
        first_processes = min(processes, config.usable_cores())
        return CascadeRunner(
            judge,
            runner_for(judge.first, executor, first_processes, max_concurrency, nice=nice),
            runner_for(judge.then, executor, processes, max_concurrency, nice=nice),
        )
    if is_async_judge(judge):
        concurrency = getattr(judge, "concurrency", None)
        if not isinstance(concurrency, int) or concurrency < 1:
            concurrency = max_concurrency
        return AsyncRunner(judge, concurrency=concurrency)
    if executor == "thread":
        return ThreadRunner(judge)
    return ProcessRunner(
        judge,
        processes,
        fallback=executor == config.EXECUTOR_AUTO,
        export=export,
        nice=nice,
    )
