"""Scoring a file's rows for ``groundwatch check``, as a stream, through the runtime's pipeline.

A bounded window of rows is in flight at a time, results are handed to the summary and the
report writers in input order, and nothing per row is kept once written, so memory stays flat
however long the file.

The scoring is the runtime's pipeline (:mod:`groundwatch.runtime.pipeline`), as for a monitor: each
row is prepared with the check's caps (:func:`~groundwatch.runtime.pipeline.prepare_inputs`; a row
it rejects is bad input, exit 2) and each batch judged by
:func:`~groundwatch.runtime.pipeline.judge_prepared` on the runner that
:func:`~groundwatch.runtime.runners.choice.runner_for` chose: a sync judge (the local judge:
CPU-bound) in ``--concurrency`` worker processes, so N processes use N cores; an async judge (an LLM
over the network) with ``--concurrency`` calls in flight on this process's loop. A small file, or
``--concurrency 1``, judges in this process: starting an interpreter costs more than judging a
hundred short answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections import deque
from collections.abc import Iterable

from .._fields import as_evaluation
from .._shared import config
from .._shared.config import usable_cores
from .._shared.errors import UsageError
from ..judging import scoring
from ..judging.judges import Judge
from ..judging.judges._base import is_async_judge
from ..runtime.pipeline import judge_prepared
from ..runtime.runners.async_runner import AsyncRunner
from ..runtime.runners.choice import runner_for
from ..runtime.runners.contract import Prepared, Runner, RunnerResult
from ..types import Evaluation
from .outputs import Sink
from .progress import Progress
from .rows import Caps, InvalidRow, Row
from .summary import CheckSummary

DEFAULT_CONCURRENCY = 4
WINDOW_PER_WORKER = 4
"""Rows read ahead per concurrent evaluation: keeps workers busy while bounding memory."""

BATCH_ROWS = 8
"""Rows handed to a worker process in one message at most: fewer messages for short answers,
few rows held per process for long ones."""

ROWS_PER_PROCESS = 100
"""A worker process is started for every this many rows of the file at most (up to
``--concurrency``): starting an interpreter that imports groundwatch costs about as much as the
local judge spends on a hundred short answers, so a small file is judged in this process."""

JUDGE_TIMEOUT_S = 600.0
"""An answer the judge has not scored within this long is a judge error (``timeout``)."""


def default_concurrency(judge: Judge) -> int:
    """``--concurrency`` when not given: :data:`DEFAULT_CONCURRENCY` calls in flight for an
    async judge; for a sync (CPU-bound) judge as many worker processes as there are usable
    cores, at most :data:`DEFAULT_CONCURRENCY` (more processes than cores only cost memory)."""
    if is_async_judge(judge):
        return DEFAULT_CONCURRENCY
    return min(DEFAULT_CONCURRENCY, usable_cores())


def process_count(concurrency: int, rows: int | None) -> int:
    """Worker processes for a sync judge: ``concurrency``, at most one per
    :data:`ROWS_PER_PROCESS` rows (``rows`` unknown: ``concurrency``); 1 means this process."""
    if rows is None:
        return concurrency
    return max(1, min(concurrency, math.ceil(rows / ROWS_PER_PROCESS)))


def check_runner(judge: Judge, concurrency: int, processes: int) -> Runner:
    """Where the judge runs, chosen as for a Monitor (:func:`runner_for`) with the ``auto``
    executor: an async judge on this loop with ``concurrency`` calls in flight; a sync judge
    in ``processes`` worker processes, or on a thread of this process when ``processes`` is 1
    (or the judge cannot be pickled, or no worker process can start); a cascade's stages each
    so. Unlike a Monitor's, these worker processes keep this process's priority: the judging
    is the work here, not background work beside an app's requests."""
    executor = config.EXECUTOR_AUTO if processes > 1 else "thread"
    return runner_for(judge, executor, processes, concurrency, nice=False)


def _as_evaluation(result: RunnerResult) -> tuple[Evaluation, float]:
    return as_evaluation(result.evaluation), max(0, result.end_ns - result.start_ns) / 1e9


class _Batch:
    """Rows sent to the runner in one call, and the call's task once sent."""

    __slots__ = ("items", "task")

    def __init__(self) -> None:
        self.items: list[Prepared] = []
        self.task: asyncio.Task[list[RunnerResult]] | None = None


async def check_rows(
    rows: Iterable[Row | InvalidRow],
    judge: Judge,
    summary: CheckSummary,
    sinks: list[Sink],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Progress | None = None,
    caps: Caps | None = None,
    processes: int = 1,
) -> None:
    """Score ``rows``, ``concurrency`` batches in flight at most, in a bounded window.

    ``processes`` > 1 judges a sync judge in that many worker processes (:func:`check_runner`).
    Results reach ``summary`` and every sink in input order. Only the window (a few rows per
    batch in flight) is held in memory at any time.
    """
    caps = caps if caps is not None else Caps()
    runner = check_runner(judge, concurrency, processes)
    try:
        await _check_rows(rows, runner, summary, sinks, concurrency, progress, caps)
    finally:
        runner.close()


async def _check_rows(
    rows: Iterable[Row | InvalidRow],
    runner: Runner,
    summary: CheckSummary,
    sinks: list[Sink],
    concurrency: int,
    progress: Progress | None,
    caps: Caps,
) -> None:
    in_flight = max(1, min(concurrency, runner.concurrency))
    # An async judge takes one row per call (its calls wait on the network side by side); a
    # sync judge a few per message, as many as its recent speed fills about 0.1 s with.
    batch_rows = 1 if isinstance(runner, AsyncRunner) else BATCH_ROWS
    sem = asyncio.Semaphore(in_flight)
    policy = scoring.DEFAULT_POLICY
    window: deque[tuple[Row, _Batch, int] | InvalidRow] = deque()
    limit = in_flight * max(WINDOW_PER_WORKER, 2 * batch_rows)
    filling: _Batch | None = None
    done = 0
    reached = False  # the judge's endpoint answered once: later failures are the rows'

    async def judged(items: list[Prepared]) -> list[RunnerResult]:
        async with sem:
            return await judge_prepared(runner, items, policy, JUDGE_TIMEOUT_S)

    def send(batch: _Batch) -> None:
        nonlocal filling
        batch.task = asyncio.ensure_future(judged(batch.items))
        if batch is filling:
            filling = None

    async def emit() -> None:
        nonlocal done, reached
        head = window.popleft()
        if isinstance(head, InvalidRow):
            summary.add_invalid(head)
            for sink in sinks:
                sink.add_invalid(head)
        else:
            row, batch, index = head
            if batch.task is None:
                send(batch)
            assert batch.task is not None
            ev, seconds = _as_evaluation((await batch.task)[index])
            if not reached:
                reached = _check_reached(ev)
            summary.add(row, ev)
            for sink in sinks:
                sink.add(row, ev, seconds)
        done += 1
        if progress is not None:
            progress.update(done)

    try:
        for item in rows:
            if isinstance(item, InvalidRow):
                window.append(item)
            else:
                try:
                    prepared = caps.prepare(item)
                except TypeError as exc:
                    # prepare() rejected the inputs: the row is bad, not the judge.
                    window.append(InvalidRow(item.number, None, str(exc), item.id))
                else:
                    read = len(prepared.answer)
                    row = dataclasses.replace(
                        item,
                        cuts=caps.cuts(item),
                        answer_read=read if read < len(item.answer) else None,
                    )
                    if filling is None:
                        filling = _Batch()
                    filling.items.append(prepared)
                    window.append((row, filling, len(filling.items) - 1))
                    if len(filling.items) >= min(batch_rows, runner.batch_size()):
                        send(filling)
            while len(window) >= limit:
                await emit()
        while window:
            await emit()
    finally:
        # A failure (an output that cannot be written) leaves batches in flight: cancel them.
        for entry in window:
            if not isinstance(entry, InvalidRow) and entry[1].task is not None:
                entry[1].task.cancel()


_UNREACHABLE = frozenset({"connection", "circuit_open"})


def _check_reached(ev: Evaluation) -> bool:
    """Whether the judge reached its endpoint for this row (whatever it then said).

    Raises:
        UsageError: it could not, and no row before it was judged either: the endpoint is
            wrong or down (exit 2 with the cause and address, not a gate full of errors).
    """
    if ev.label == "error" and ev.error_type in _UNREACHABLE:
        raise UsageError(
            f"the judge cannot reach its endpoint, so no row was judged: {ev.error}; check "
            "--base-url and that the server is running"
        )
    return True
