"""The background worker: bounded queue, a daemon thread with an asyncio loop, flush, shutdown,
fork safety. Modelled on OpenTelemetry's ``BatchProcessor``.

Request path (any host thread): :meth:`Worker.submit` appends to a ``deque`` and, only when the
worker is idle, wakes it with one ``call_soon_threadsafe``. Nothing else: no lock held, no I/O
beyond that wake-up, no scoring.

Worker thread (``groundwatch-worker``): an asyncio loop takes records off the queue as the
concurrency limit allows (what waits stays in the bounded queue, so overload shows up as
``queue_full`` on the request path, not as unbounded memory), runs each evaluation under a
deadline with OpenTelemetry instrumentation suppressed, then emits telemetry and calls the
``on_result`` callbacks. A runner with ``aevaluate_batch`` (the worker process) gets records in
batches instead (``_start_batch``): fewer hops through this loop and the pipe per record.

Accounting: every record handed to :meth:`submit` ends in exactly one of
``groundwatch.evaluations`` (label != error: evaluated; label == error: failed) or
``groundwatch.evaluations.dropped`` (never scored: shutdown deadline, fork, internal error).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from opentelemetry import context as otel_context

from .. import _guard, scoring
from .._evaluate import aevaluate, evaluate, judge_name
from .._inputs import prepare
from .._weakhooks import reinit_after_fork
from ..integration import suppressed_context
from ..telemetry import Stats
from ..telemetry import semconv as sc
from ..types import Evaluation, Judgement, Passage, RagRecord

T = TypeVar("T")

_logger = logging.getLogger(__name__)

MAX_STUCK_JUDGE_THREADS = 4
"""Sync judge calls that timed out but never returned: past this many, fail fast instead of
starting yet another thread that may hang too."""

BATCH_DELAY_S = 0.02
"""With a batching runner (the worker process), how long the worker lets records gather before
sending a batch smaller than the runner asks for (OpenTelemetry's BatchSpanProcessor has the
same schedule delay); a flush or shutdown cuts it short."""

Finished = tuple[RagRecord, "Evaluation | Any", int, int]
"""``(record, evaluation, start_ns, end_ns)``; the evaluation may be a ``LazyEvaluation``."""
Finish = Callable[[list[Finished]], None]


def _error_evaluation(
    error_type: str, message: str, answer: str, passages: Sequence[Passage], judge: str
) -> Evaluation:
    return scoring.score(
        Judgement(error=message, error_type=error_type), answer, passages, judge_name=judge
    )


async def run_in_daemon_thread(call: Callable[[], T], *, name: str) -> T:
    """Run a blocking call on a fresh daemon thread and await its result.

    Not ``asyncio.to_thread``: its pool threads are joined at interpreter exit, so a judge call
    that never returns would hang the host's exit. A daemon thread is simply abandoned when the
    awaiting task is cancelled (timeout, shutdown); the caller counts such threads.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(value: Any, exc: BaseException | None) -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(value)

    def target() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = call()
        except BaseException as exc:
            error = exc
        # RuntimeError: the loop closed meanwhile (shutdown); nobody waits for the result.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(deliver, value, error)

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future


class _ThreadJudge:
    """Runs a sync judge on a daemon thread of its own, awaitable from the worker's loop.

    Not ``asyncio.to_thread``: its executor's threads are joined at interpreter exit, so a
    hanging judge would hang the host's exit. A daemon thread per call costs ~0.1 ms, nothing
    next to a judge call, and a stuck one is abandoned (and counted) instead.
    """

    def __init__(self, judge: Any) -> None:
        self.inner = judge
        self.name = judge_name(judge)
        self._lock = threading.Lock()
        self.alive = 0
        self._speed_ns: float | None = None

    async def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None
    ) -> Judgement:
        if self.alive >= MAX_STUCK_JUDGE_THREADS:
            return Judgement(
                error=f"{self.alive} earlier judge calls never returned",
                error_type="judge_unresponsive",
            )
        ctx = contextvars.copy_context()

        def call() -> Any:
            try:
                return ctx.run(self.inner.judge, answer, contexts, question)
            finally:
                with self._lock:
                    self.alive -= 1

        with self._lock:
            self.alive += 1
        result = await run_in_daemon_thread(call, name="groundwatch-judge")
        if inspect.isawaitable(result):
            result = await result
        return result  # type: ignore[no-any-return]

    # --- batches (the worker's path for sync judges; see Worker._start_batch) ---------------

    def batch_size(self) -> int:
        """Records for the next batch: ~``BATCH_TARGET_S`` of judge time, 1..``MAX_BATCH``."""
        return batch_size_for(self._speed_ns)

    async def astart(self) -> None:
        """Nothing to start (the process runner's counterpart starts its process)."""

    async def aevaluate_batch(
        self, items: Sequence[BatchItem], policy: scoring.LabelPolicy, timeout_s: float
    ) -> list[tuple[Evaluation, int, int]]:
        """Evaluate prepared records one after another on one daemon thread (not one thread
        and one loop task per record). Each evaluation has its own ``timeout_s``: a call past
        it is abandoned (its thread counted as stuck), its record fails with ``timeout`` and
        the records after it go to a fresh thread."""
        results: list[tuple[Evaluation, int, int] | None] = [None] * len(items)
        todo = list(range(len(items)))
        loop = asyncio.get_running_loop()
        while todo:
            if self.alive >= MAX_STUCK_JUDGE_THREADS:
                judgement = Judgement(
                    error=f"{self.alive} earlier judge calls never returned",
                    error_type="judge_unresponsive",
                )
                for i in todo:
                    now = time.time_ns()
                    results[i] = (self._scored(judgement, items[i]), now, now)
                break
            todo = await self._run_batch_thread(loop, items, todo, results, policy, timeout_s)
        return [r for r in results if r is not None]

    async def _run_batch_thread(
        self,
        loop: asyncio.AbstractEventLoop,
        items: Sequence[BatchItem],
        todo: list[int],
        results: list[tuple[Evaluation, int, int] | None],
        policy: scoring.LabelPolicy,
        timeout_s: float,
    ) -> list[int]:
        """One thread over ``todo``; returns what is left to do after a timeout."""
        future: asyncio.Future[None] = loop.create_future()
        ctx = contextvars.copy_context()
        done: dict[int, tuple[Evaluation, int, int]] = {}
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
                    answer, passages, question, truncated = items[i]
                    start = time.time_ns()
                    try:
                        evaluation = ctx.run(
                            evaluate, answer, passages, question, self.inner, policy=policy
                        )
                    except Exception as exc:
                        evaluation = self._scored(
                            Judgement(error=str(exc)[:500], error_type=type(exc).__qualname__),
                            items[i],
                        )
                    if truncated and not evaluation.truncated:
                        evaluation = evaluation.model_copy(update={"truncated": True})
                    if state["abandoned"]:
                        return
                    done[i] = (evaluation, start, time.time_ns())
                    self._speed_ns = _ewma(self._speed_ns, done[i][2] - start)
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
                judgement = Judgement(
                    error=f"no result within {timeout_s * 1000:.0f} ms",
                    error_type=sc.ERROR_TIMEOUT,
                )
                now = time.time_ns()
                results[i] = (self._scored(judgement, items[i]), now - int(timeout_s * 1e9), now)
            elif stuck is not None:
                left.append(i)
        return left

    def _scored(self, judgement: Judgement, item: BatchItem) -> Evaluation:
        answer, passages, _question, truncated = item
        return scoring.score(judgement, answer, passages, judge_name=self.name, truncated=truncated)

    def at_fork_reinit(self) -> None:
        self._lock = threading.Lock()
        self.alive = 0


MAX_BATCH = 32
"""Records per batch handed to a sync judge's runner (a thread or the worker process)."""
BATCH_TARGET_S = 0.1
"""A batch is cut so that it should take about this long (from the judge's recent speed): a
slow judge gets small batches, so shutdown deadlines still bite per record."""

BatchItem = tuple[str, Sequence[Passage], "str | None", bool]
"""``(answer, passages, question, truncated)``, already prepared."""


def _ewma(old: float | None, new: float) -> float:
    return new if old is None else 0.8 * old + 0.2 * new


def batch_size_for(speed_ns: float | None) -> int:
    if speed_ns is None:
        return 1  # the judge's speed is unknown yet
    return max(1, min(MAX_BATCH, int(BATCH_TARGET_S * 1e9 / max(speed_ns, 1.0))))


class Worker:
    """Queue + thread + loop; see the module docstring."""

    def __init__(
        self,
        *,
        judge: Any,
        finish: Finish,
        stats: Stats,
        max_queue_size: int,
        max_concurrency: int,
        timeout_s: float,
        policy: scoring.LabelPolicy = scoring.DEFAULT_POLICY,
        runner: Any = None,
    ) -> None:
        self.judge = judge
        self.judge_name = judge_name(judge)
        if runner is not None:
            self.runner = runner
        elif inspect.iscoroutinefunction(getattr(judge, "judge", None)):
            self.runner = judge
        else:
            self.runner = _ThreadJudge(judge)
        # Several CPU-bound judge calls at once only fight over the GIL (or the one worker
        # process): concurrency is for async judges, whose calls wait on the network.
        self.concurrency = max_concurrency if self.runner is judge else 1
        self.concurrency = getattr(self.runner, "concurrency", self.concurrency)
        self.finish = finish
        self.stats = stats
        self.max_queue_size = max_queue_size
        self.timeout_s = timeout_s
        self.policy = policy
        self._init_state()
        reinit_after_fork(self._at_fork_reinit)

    def _init_state(self) -> None:
        self.queue: deque[RagRecord] = deque()
        self._pid = os.getpid()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._awake = False
        self._stopped = False
        self._stopping = False  # set on the loop: take nothing more off the queue
        self._stop_sent = False  # shutdown() has asked the loop to stop
        self._wakeup: asyncio.Event | None = None
        self._next_seq = 0
        self._inflight: dict[int, asyncio.Task[None]] = {}
        self._flush_waiters: list[tuple[int, threading.Event]] = []
        self._hurry: asyncio.Event | None = None

    # --- request path --------------------------------------------------------------------------

    def submit(self, record: RagRecord) -> bool:
        """Queue a sampled record; ``False`` when the queue is full (the caller counts it)."""
        if self._pid != os.getpid():
            # A fork the at-fork hook did not see (e.g. os.fork from C code).
            self._at_fork_reinit()
        queue = self.queue
        # Checked without a lock: concurrent callers may overshoot the bound by one record each,
        # which keeps memory bounded and costs no lock on the request path.
        if len(queue) >= self.max_queue_size:
            return False
        queue.append(record)
        if self._stopped:
            # shutdown() ran between the monitor's check and this append: its final count is
            # over, so count this record dropped here (whoever pops a record counts it).
            self._drain_dropped()
        elif not self._awake:
            self._wake()
        return True

    def _wake(self) -> None:
        loop = self._loop
        if loop is None:
            self._start()
            return
        self._awake = True
        # A plain try (not contextlib.suppress): this is on the request path.
        try:  # noqa: SIM105
            loop.call_soon_threadsafe(self._set_wakeup)
        except RuntimeError:
            pass  # loop closed: shut down; shutdown() counts what is left in the queue

    def _set_wakeup(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _start(self) -> None:
        with self._start_lock:
            if self._loop is not None or self._stopped:
                return
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=self._thread_main, args=(loop,), name="groundwatch-worker", daemon=True
            )
            self._awake = True
            self._thread = thread
            self._loop = loop
            thread.start()

    # --- worker thread -------------------------------------------------------------------------

    def _thread_main(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.create_task(self._main())
            loop.run_forever()
        finally:
            try:
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                # A task cancelled before its first step never ran _run's handlers.
                self.stats.count_dropped(sc.ERROR_SHUTDOWN, len(self._inflight))
                self._inflight.clear()
                self._drain_dropped()
            finally:
                loop.close()

    async def _main(self) -> None:
        self._wakeup = asyncio.Event()
        self._hurry = asyncio.Event()
        semaphore = asyncio.Semaphore(self.concurrency)
        while not self._stopping:
            try:
                await self._dispatch(semaphore)
                return
            except Exception as exc:
                # A bug of ours must not leave records queued forever: log, breathe, go on.
                _guard.internal_error("worker", exc, reraise=False)
                await asyncio.sleep(0.1)

    async def _dispatch(self, semaphore: asyncio.Semaphore) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        queue = self.queue
        batch_size = getattr(self.runner, "batch_size", None)
        while True:
            # Order matters (see submit): mark idle and clear the event *before* looking at the
            # queue, so a record appended after the look always finds us idle and wakes us.
            if self._stopping:
                return
            self._awake = False
            self._wakeup.clear()
            if not queue:
                await self._wakeup.wait()
            self._awake = True
            while queue and not self._stopping:
                await semaphore.acquire()
                if self._stopping:
                    semaphore.release()
                    break
                if batch_size is not None:
                    await self._start_batch(loop, batch_size(), semaphore)
                    continue
                try:
                    record = queue.popleft()
                except IndexError:
                    semaphore.release()
                    break
                seq = self._next_seq
                self._next_seq += 1
                self._inflight[seq] = loop.create_task(self._run(record, seq, semaphore))

    async def _start_batch(
        self,
        loop: asyncio.AbstractEventLoop,
        size: int,
        semaphore: asyncio.Semaphore,
    ) -> None:
        """Take up to ``size`` records (waiting up to ``BATCH_DELAY_S`` for more to arrive,
        unless a flush is waiting) and start one task evaluating them together."""
        assert self._hurry is not None
        queue = self.queue
        if len(queue) < size and not self._flush_waiters and not self._stopping:
            # _awake stays True meanwhile: submit() does not wake the loop per record.
            self._hurry.clear()
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(self._hurry.wait(), BATCH_DELAY_S)
        records: list[RagRecord] = []
        while len(records) < size and not self._stopping:
            try:
                records.append(queue.popleft())
            except IndexError:
                break
        if not records:
            semaphore.release()
            return
        seqs = range(self._next_seq, self._next_seq + len(records))
        self._next_seq += len(records)
        task = loop.create_task(self._run_batch(records, seqs, semaphore))
        for seq in seqs:
            self._inflight[seq] = task

    async def _run_batch(
        self, records: list[RagRecord], seqs: range, semaphore: asyncio.Semaphore
    ) -> None:
        finished = False
        try:
            results = await self._evaluate_batch(records)
            finished = True
            # Synchronous from here: a cancellation (shutdown) cannot split the accounting.
            self.finish(
                [(r, ev, start, end) for r, (ev, start, end) in zip(records, results, strict=True)]
            )
        except asyncio.CancelledError:
            if not finished:
                self.stats.count_dropped(sc.ERROR_SHUTDOWN, len(records))
            raise
        except Exception as exc:
            if not finished:
                self.stats.count_dropped(sc.ERROR_INTERNAL, len(records))
            _guard.internal_error("worker", exc, reraise=False)
        finally:
            for seq in seqs:
                self._inflight.pop(seq, None)
            semaphore.release()
            self._check_flush()

    async def _evaluate_batch(self, records: list[RagRecord]) -> list[tuple[Any, int, int]]:
        results: list[tuple[Any, int, int] | None] = [None] * len(records)
        items = []
        where = []
        for i, record in enumerate(records):
            try:
                answer, passages, question, truncated = prepare(
                    record.answer, record.contexts, record.question
                )
            except (TypeError, ValueError) as exc:  # ValueError: pydantic's ValidationError
                record.contexts = []
                now = time.time_ns()
                error = _error_evaluation(sc.ERROR_INVALID_INPUT, str(exc), "", [], self.judge_name)
                results[i] = (error, now, now)
                continue
            record.answer, record.contexts, record.question = answer, passages, question
            record.truncated = truncated
            items.append((answer, passages, question, truncated))
            where.append(i)
        if items:
            token = otel_context.attach(suppressed_context())
            try:
                await self.runner.astart()
                done = await self.runner.aevaluate_batch(items, self.policy, self.timeout_s)
            finally:
                otel_context.detach(token)
            for i, result in zip(where, done, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    async def _run(self, record: RagRecord, seq: int, semaphore: asyncio.Semaphore) -> None:
        finished = False
        try:
            start_ns = time.time_ns()
            evaluation = await self._evaluate(record)
            end_ns = time.time_ns()
            finished = True
            # Synchronous from here: a cancellation (shutdown) cannot split the accounting.
            self.finish([(record, evaluation, start_ns, end_ns)])
        except asyncio.CancelledError:
            if not finished:
                self.stats.count_dropped(sc.ERROR_SHUTDOWN)
            raise
        except Exception as exc:
            if not finished:
                self.stats.count_dropped(sc.ERROR_INTERNAL)
            _guard.internal_error("worker", exc, reraise=False)
        finally:
            self._inflight.pop(seq, None)
            semaphore.release()
            self._check_flush()

    async def _evaluate(self, record: RagRecord) -> Evaluation:
        try:
            answer, passages, question, truncated = prepare(
                record.answer, record.contexts, record.question
            )
        except (TypeError, ValueError) as exc:  # ValueError: pydantic's ValidationError
            record.contexts = []
            return _error_evaluation(sc.ERROR_INVALID_INPUT, str(exc), "", [], self.judge_name)
        record.answer, record.contexts, record.question = answer, passages, question
        record.truncated = truncated
        # The judge's own HTTP / LLM calls must not create spans in the user's traces nor
        # re-enter our callbacks: instrumentations check this key. The worker's task context
        # is its own, so attach/detach here cannot leak into the host.
        token = otel_context.attach(suppressed_context())
        try:
            start = getattr(self.runner, "astart", None)
            if start is not None:
                await start()
            runner_evaluate = getattr(self.runner, "aevaluate", None)
            work: Awaitable[Evaluation]
            if runner_evaluate is not None:  # the process runner: judge and score out there
                work = runner_evaluate(answer, passages, question, self.policy)
            else:
                work = aevaluate(answer, passages, question, self.runner, policy=self.policy)
            evaluation: Evaluation = await asyncio.wait_for(work, self.timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            evaluation = _error_evaluation(
                sc.ERROR_TIMEOUT,
                f"no result within {self.timeout_s * 1000:.0f} ms",
                answer,
                passages,
                self.judge_name,
            )
        except Exception as exc:
            # aevaluate turns judge exceptions into error evaluations; this is for the rest.
            evaluation = _error_evaluation(
                type(exc).__qualname__, str(exc)[:500], answer, passages, self.judge_name
            )
        finally:
            otel_context.detach(token)
        if truncated and not evaluation.truncated:
            evaluation = evaluation.model_copy(update={"truncated": True})
        return evaluation

    # --- flush / shutdown ----------------------------------------------------------------------

    def _check_flush(self) -> None:
        if not self._flush_waiters:
            return
        # The lowest unfinished sequence number: in-flight tasks are in start order.
        low = next(iter(self._inflight), self._next_seq)
        still = []
        for target, event in self._flush_waiters:
            if self._next_seq >= target and low >= target:
                event.set()
            else:
                still.append((target, event))
        self._flush_waiters = still

    def _add_flush_waiter(self, event: threading.Event) -> None:
        # Everything queued or in flight now gets a sequence number below target.
        self._flush_waiters.append((self._next_seq + len(self.queue), event))
        self._set_wakeup()
        if self._hurry is not None:
            self._hurry.set()
        self._check_flush()

    def in_worker_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def flush(self, timeout_s: float) -> bool:
        """Wait until everything queued now is scored and emitted; ``False`` on timeout."""
        loop = self._loop
        if loop is None:
            return not self.queue
        if self.in_worker_thread():
            return False  # an on_result callback flushing would wait for itself
        if self._stop_sent:
            # The loop is stopping (it may still be finishing a batch): a callback posted to
            # it now would never run. What is left ends with the thread, scored or dropped.
            thread = self._thread
            if thread is not None:
                thread.join(max(0.0, timeout_s))
            return not self.queue and not self._inflight
        done = threading.Event()
        try:
            loop.call_soon_threadsafe(self._add_flush_waiter, done)
        except RuntimeError:
            return not self.queue and not self._inflight
        return done.wait(max(0.0, timeout_s))

    def _drain_dropped(self) -> None:
        """Pop what is queued and count it dropped. Popping one by one (atomic) means a record
        appended concurrently is counted exactly once, by whoever pops it."""
        n = 0
        while True:
            try:
                self.queue.popleft()
            except IndexError:
                break
            n += 1
        self.stats.count_dropped(sc.ERROR_SHUTDOWN, n)

    def _stop_on_loop(self) -> None:
        self._stopping = True
        if self._hurry is not None:
            self._hurry.set()
        self._drain_dropped()
        for task in list(self._inflight.values()):
            task.cancel()  # _run counts each as dropped
        asyncio.get_running_loop().stop()

    def shutdown(self, timeout_s: float) -> bool:
        """Score what is queued within the deadline, count the rest as dropped, stop."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._start_lock:
            already = self._stopped
            self._stopped = True
        if already:
            return True
        flushed = self.flush(timeout_s)
        loop, thread = self._loop, self._thread
        joined = True
        if loop is not None and thread is not None:
            self._stop_sent = True
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._stop_on_loop)
            if not self.in_worker_thread():
                thread.join(max(0.05, deadline - time.monotonic()))
                joined = not thread.is_alive()
        # Appended by a record() racing with shutdown after the loop had stopped.
        self._drain_dropped()
        return flushed and joined

    # --- fork ----------------------------------------------------------------------------------

    def _at_fork_reinit(self) -> None:
        # The child has no worker thread: what the parent had queued or in flight is the
        # parent's to score, so the child counts it as dropped and starts afresh (lazily, on
        # its first record), like OpenTelemetry's BatchProcessor.
        if self._pid == os.getpid():
            return
        inherited = len(self.queue) + len(self._inflight)
        stopped = self._stopped
        self._init_state()
        self._stopped = stopped
        self.stats.reinit_after_fork()
        self.stats.count_dropped(sc.ERROR_FORK, inherited)
        at_fork = getattr(self.runner, "at_fork_reinit", None)
        if at_fork is not None:
            at_fork()
