"""Where a judge runs: :func:`runner_for`, the one place that chooses a runner."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..._shared import config
from ...judging.judges._base import is_async_judge, judge_name
from ...judging.judges.cascade import CascadeJudge
from ...telemetry.worker_export import WorkerExport, otlp_worker_providers
from .async_runner import AsyncRunner
from .cascade_runner import CascadeRunner
from .contract import Runner
from .process_runner import ProcessRunner
from .thread_runner import ThreadRunner

if TYPE_CHECKING:
    from ..._shared.record import RagRecord
    from ...telemetry import Telemetry
    from ...telemetry.worker_export import WorkerProviders

__all__ = ["runner_for", "worker_export_for"]

_logger = logging.getLogger(__name__)


def worker_export_for(
    judge: Any,
    executor: str,
    wanted: bool | WorkerProviders,
    telemetry: Telemetry,
    sampling_rate: Callable[[RagRecord], float | None],
) -> WorkerExport | None:
    """Whether the worker processes export what they score themselves
    (``export_from_worker``): only a sync judge in a worker process can; any other says why
    once and exports here."""
    if wanted is False:
        return None
    providers = otlp_worker_providers if wanted is True else wanted
    if executor == "thread" or is_async_judge(judge):
        _logger.warning(
            "export_from_worker needs a sync judge in a worker process (executor "
            "'process' or 'auto'); %s runs in this process (executor %r), which exports "
            "the evaluations",
            judge_name(judge),
            executor,
        )
        return None
    return WorkerExport(providers, telemetry, sampling_rate)


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
