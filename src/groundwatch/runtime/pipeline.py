"""Score one record: the one home of prepare → call the judge → score.

Every place that scores records goes through here: the monitor's worker, ``groundwatch worker`` (the
Redis consumer) and ``groundwatch serve`` (which runs a monitor) hand records to
:func:`evaluate_records`; ``groundwatch check``, which streams a file's rows with its own caps and
reports unreadable rows as bad input, prepares each with :func:`prepare_inputs` and hands batches to
:func:`judge_prepared`, as :func:`evaluate_records` does. Each uses the
:class:`~.runners.contract.Runner` that :func:`~.runners.choice.runner_for` chose, so they judge
with the same adapter (:func:`~groundwatch.judging.judges._base.judge_sync` / ``judge_async``), the
same deadlines and the same error evaluations. The runners judge and score each record with
:func:`~groundwatch.judging.evaluate.judge_and_score`, which is also ``groundwatch.evaluate`` for
one answer without a runner: the same preparing, adapter and scoring.

The steps:

1. :func:`prepare_record` / :func:`prepare_inputs`: validate and cap the caller's inputs once
   (a record that cannot be read fails alone, ``invalid_input``);
2. :func:`judge_prepared`: with instrumentation suppressed, the runner is started (outside
   every deadline) and judges each prepared record under the evaluation deadline: on a thread,
   in a worker process, or on the event loop (:func:`~.runners.choice.runner_for` decides where; a
   cascade's stages each where their kind runs);
3. :func:`evaluation_from`: the judgement becomes an :class:`~groundwatch.Evaluation` (or,
   from a worker process, the :class:`~groundwatch._fields.EvaluationFields` telemetry reads).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context

from .._shared import guard
from .._shared.inputs import prepare
from .._shared.suppression import suppressed_context
from ..judging import scoring
from ..judging.evaluate import judge_and_score, scored_judgement
from ..telemetry import semconv as sc
from ..types import Evaluation, Judgement, RagRecord
from .runners.contract import NO_PACING, Pacer, Prepared, Runner, RunnerResult

if TYPE_CHECKING:
    from ..telemetry import Stats
    from .results import Results


class InvalidRecord(Exception):
    """The caller's record cannot be read: the worker fails it with ``invalid_input``."""


def prepare_inputs(
    answer: Any,
    contexts: Any,
    question: Any,
    *,
    max_answer_chars: int | None = None,
    max_passage_chars: int | None = None,
    max_passages: int | None = None,
) -> Prepared:
    """Validate and cap one answer's inputs (:func:`groundwatch._shared.inputs.prepare`; the caps
    default to the environment's) into what a runner judges.

    Raises:
        TypeError: as :func:`~groundwatch._shared.inputs.prepare` does.
    """
    answer, passages, question, truncated = prepare(
        answer,
        contexts,
        question,
        max_answer_chars=max_answer_chars,
        max_passage_chars=max_passage_chars,
        max_passages=max_passages,
    )
    return Prepared(answer, passages, question, truncated)


def prepare_record(record: RagRecord) -> Prepared:
    """Prepare one record (once: the runners and the worker process take it as it is) and
    keep the prepared inputs on the record, which is what ``on_result`` callbacks see.

    Raises:
        InvalidRecord: anything raised while reading the caller's objects (a wrong type, a
            document property or a mapping's ``.get`` that raises).
    """
    try:
        item = prepare_inputs(record.answer, record.contexts, record.question)
    except Exception as exc:
        record.contexts = []
        raise InvalidRecord(f"{type(exc).__name__}: {exc}"[:500]) from exc
    record.answer, record.contexts, record.question = item.answer, item.passages, item.question
    record.truncated = item.truncated
    item.record = record
    return item


def evaluation_from(
    judgement: Judgement,
    item: Prepared,
    judge: str,
    policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
) -> Evaluation:
    """Score a judge's result for one prepared record. Never raises: whatever goes wrong while
    scoring (a bug of ours) fails this record as ``internal``, not its batch
    (:func:`~groundwatch.judging.evaluate.scored_judgement`)."""
    return scored_judgement(
        judgement, item.answer, item.passages, judge, policy, truncated=item.truncated
    )


def error_evaluation(error_type: str, message: str, item: Prepared, judge: str) -> Evaluation:
    """A failed evaluation of one prepared record."""
    return evaluation_from(Judgement(error=message[:500], error_type=error_type), item, judge)


def timeout_evaluation(timeout_s: float, item: Prepared, judge: str) -> Evaluation:
    """The evaluation of a record its judge did not finish within the deadline."""
    return error_evaluation(
        sc.ERROR_TIMEOUT, f"no result within {timeout_s * 1000:.0f} ms", item, judge
    )


def evaluate_prepared(
    judge: Any, item: Prepared, policy: scoring.LabelPolicy, name: str
) -> Evaluation:
    """Judge and score one prepared record with a sync judge, on the calling thread (a
    runner's thread, or the worker process). Never raises."""
    return judge_and_score(
        judge,
        item.answer,
        item.passages,
        item.question,
        truncated=item.truncated,
        policy=policy,
        name=name,
    )


async def judge_prepared(
    runner: Runner, items: Sequence[Prepared], policy: scoring.LabelPolicy, timeout_s: float
) -> list[RunnerResult]:
    """Judge and score prepared records on ``runner``: one result per item, in order. The one
    way a runner is driven (:func:`evaluate_records`, ``groundwatch check``): with
    instrumentation suppressed, ``runner.start()`` outside every deadline, then
    ``runner.run``. Raises only ``asyncio.CancelledError``, as the runner does."""
    # The judge's own HTTP / LLM calls must not create spans in the user's traces nor
    # re-enter our callbacks: instrumentations check this key. The caller's task context
    # is its own, so attach/detach here cannot leak into the host.
    token = otel_context.attach(suppressed_context())
    try:
        await runner.start()
        return await runner.run(items, policy, timeout_s)
    finally:
        otel_context.detach(token)


async def evaluate_records(
    runner: Runner,
    records: list[RagRecord],
    policy: scoring.LabelPolicy,
    timeout_s: float,
    pacer: Pacer = NO_PACING,
) -> list[RunnerResult]:
    """Prepare each record once and run the batch on ``runner``; one result per record, in
    order (the monitor's worker and ``groundwatch worker`` both score through here; the
    monitor's worker paces the preparing with ``pacer``)."""
    results: list[RunnerResult | None] = [None] * len(records)
    items: list[Prepared] = []
    where: list[int] = []
    pacer.start()
    for i, record in enumerate(records):
        pacer.maybe()
        try:
            items.append(prepare_record(record))
        except InvalidRecord as exc:
            now = time.time_ns()
            empty = Prepared("", [], None, False)
            failed = error_evaluation(sc.ERROR_INVALID_INPUT, str(exc), empty, runner.name)
            results[i] = RunnerResult(failed, now, now)
            continue
        where.append(i)
    if items:
        done = await judge_prepared(runner, items, policy, timeout_s)
        for i, result in zip(where, done, strict=True):
            results[i] = result
    return [r for r in results if r is not None]


class LocalScoring:
    """The worker's :class:`~.worker.Destination` when this process scores: each batch goes
    through :func:`evaluate_records` on ``runner`` and its results to ``results`` (telemetry,
    callbacks). Every record is counted: evaluated or failed in ``groundwatch.evaluations``,
    or dropped (``shutdown``: cancelled before it was scored; ``internal``: a bug of ours)."""

    full = False
    down = False

    def __init__(
        self,
        runner: Runner,
        results: Results,
        stats: Stats,
        *,
        policy: scoring.LabelPolicy,
        timeout_s: float,
    ) -> None:
        self.runner = runner
        self.results = results
        self.stats = stats
        self.policy = policy
        self.timeout_s = timeout_s
        self.concurrency = runner.concurrency

    def batch_size(self) -> int:
        return self.runner.batch_size()

    async def handle(self, records: list[RagRecord], pacer: Pacer) -> None:
        finished = False
        try:
            results = await evaluate_records(
                self.runner, records, self.policy, self.timeout_s, pacer
            )
            finished = True
            # Synchronous from here: a cancellation (shutdown) cannot split the accounting.
            self.results.finish(records, results, pacer)
        except asyncio.CancelledError:
            if not finished:
                self.stats.count_dropped(sc.ERROR_SHUTDOWN, len(records))
            raise
        except BaseException as exc:
            if not finished:
                self.stats.count_dropped(sc.ERROR_INTERNAL, len(records))
            guard.internal_error("worker", exc, reraise=False)

    def close_soon(self, deadline: float) -> None:
        self.runner.close_soon(deadline)

    async def aclose(self) -> None:
        """Nothing lives on the worker's loop."""

    def flush(self, timeout_s: float) -> bool:
        return self.runner.flush(timeout_s)

    def close(self) -> None:
        self.runner.close()

    def at_fork_reinit(self) -> None:
        self.runner.at_fork_reinit()


__all__ = [
    "InvalidRecord",
    "LocalScoring",
    "Prepared",
    "RunnerResult",
    "error_evaluation",
    "evaluate_prepared",
    "evaluate_records",
    "evaluation_from",
    "judge_prepared",
    "prepare_inputs",
    "prepare_record",
    "timeout_evaluation",
]
