"""The background worker: bounded queue, a daemon thread with an asyncio loop, flush, shutdown,
fork safety. Modelled on OpenTelemetry's ``BatchProcessor``.

Request path (any host thread): :meth:`Worker.submit` appends to a ``deque`` and, only when the
worker is asleep (no record for ``STAY_AWAKE_S``), wakes it with one ``call_soon_threadsafe``.
Nothing else: no lock held, no I/O beyond that wake-up, no scoring.

Worker thread (``groundwatch-worker``), one path for every record: the loop takes a batch off the
queue (:meth:`Worker._take_batch`, as many as its :class:`Destination` asks for, waiting up to
``BATCH_DELAY_S`` for more) and hands it to the destination: the scoring pipeline
(:class:`~.pipeline.LocalScoring`: prepare, judge on the chosen runner, score, then
:meth:`Results.finish <.results.Results.finish>`: telemetry, then the ``on_result`` callbacks), or a
queue that remote workers score from. Preparing and finishing are paced
(:class:`~.runners.contract.Pacer`): short slices of work with rests between, so a batch does not
hold the host's GIL through a request; the rests stop while a flush waits or the queue fills. Up to
``destination.concurrency`` batches are in flight; what waits stays in the bounded queue, so
overload shows up as ``queue_full`` on the request path, not as unbounded memory.

Accounting: every record handed to :meth:`submit` ends in exactly one of
``groundwatch.evaluations`` (label != error: evaluated; label == error: failed) or
``groundwatch.evaluations.dropped`` (never scored: shutdown deadline, fork, internal error).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from .._shared import guard
from .._shared.weakhooks import reinit_after_fork
from ..telemetry import Stats
from ..telemetry import semconv as sc
from ..types import RagRecord
from .runners.contract import Pacer

BATCH_DELAY_S = 0.2
"""How long the worker lets records gather before sending a batch smaller than its destination
asks for (OpenTelemetry's BatchSpanProcessor has the same schedule delay); a flush or shutdown
cuts it short. Async judges ask for batches of one, which never wait."""


STAY_AWAKE_S = 1.0
"""After its last record the worker looks at the queue every ``BATCH_DELAY_S`` for this long
before it sleeps until :meth:`Worker.submit` wakes it. A wake-up is a system call on the
request thread, and while the request thread is in it the GIL goes to the woken worker, so the
request then waits for the worker's turn: under steady traffic, looking on a timer means no
request pays for a wake-up (OpenTelemetry's batch processor, too, exports on its schedule rather
than per span). An idle worker sleeps: no timer runs."""


class Destination(Protocol):
    """Where the worker hands each batch it takes off its queue: the scoring pipeline
    (:class:`~.pipeline.LocalScoring`, a judge in this process or its worker processes), or a
    queue that remote workers score from (:class:`groundwatch.RedisQueue`). The worker itself
    only queues, batches, paces, flushes and shuts down; it asks its destination nothing else.
    """

    concurrency: int
    """Batches the worker may have in flight at once."""
    full: bool
    """Read by :meth:`Worker.submit`: ``True`` turns records away as ``queue_full``."""
    down: bool
    """The destination is unreachable: records the worker drops at shutdown are counted
    ``transport`` (the destination was the reason), not ``shutdown``."""

    def batch_size(self) -> int:
        """Records for the next batch."""
        ...

    async def handle(self, records: list[RagRecord], pacer: Pacer) -> None:
        """Score (and emit) or deliver the batch, counting every record: scored, or dropped
        with its reason. Raises only ``asyncio.CancelledError`` (shutdown), after counting
        what it had not finished."""
        ...

    def close_soon(self, deadline: float) -> None:
        """Shutdown began (called on the worker's loop), to end by ``deadline`` (a
        ``time.monotonic()`` time): stop retrying a failing destination, so that shutdown's
        deadline is not spent waiting for it."""
        ...

    async def aclose(self) -> None:
        """Release what lives on the worker's loop (called there, as the loop ends)."""
        ...

    def flush(self, timeout_s: float) -> bool:
        """Export what the destination exported itself and still holds (worker processes'
        spans with ``export_from_worker``); ``True`` when there is nothing of the kind."""
        ...

    def close(self) -> None:
        """Release the rest (worker processes) once the worker stopped."""
        ...

    def at_fork_reinit(self) -> None:
        """In a forked child: forget the parent's threads, processes and connections."""
        ...


class RecordQueue(Destination, Protocol):
    """A destination that remote workers score from (``Monitor(queue=...)``, e.g.
    :class:`groundwatch.RedisQueue`): records go there instead of to a judge."""

    def attach(self, stats: Stats, sampling_rate: Callable[[RagRecord], float | None]) -> None:
        """Called once by the owning monitor: where to count, and each record's rate."""
        ...


class Worker:
    """Queue + thread + loop; see the module docstring."""

    def __init__(self, *, destination: Destination, stats: Stats, max_queue_size: int) -> None:
        self.destination = destination
        self.concurrency = destination.concurrency
        self.stats = stats
        self.max_queue_size = max_queue_size
        self.pacer = Pacer(self._behind)
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
        self.exiting = False
        """Set by the monitor's at-exit hook: a shutdown that drops records says "at exit"."""
        self._full_said = False

    # --- request path --------------------------------------------------------------------------

    def submit(self, record: RagRecord) -> bool:
        """Queue a sampled record; ``False`` when the queue is full (the caller counts it)."""
        if self._pid != os.getpid():
            # A fork the at-fork hook did not see (e.g. os.fork from C code).
            self._at_fork_reinit()
        queue = self.queue
        # Checked without a lock: concurrent callers may overshoot the bound by one record each,
        # which keeps memory bounded and costs no lock on the request path.
        if len(queue) >= self.max_queue_size or self.destination.full:
            if not self._full_said:  # one bool on the overloaded path, not a message
                self._say_full()
            return False
        queue.append(record)
        if self._stopped:
            # shutdown() ran between the monitor's check and this append: its final count is
            # over, so count this record dropped here (whoever pops a record counts it).
            self._drain_dropped()
        elif not self._awake:
            self._wake()
        return True

    def _say_full(self) -> None:
        """The first record turned away, said once per process (the counter has them all)."""
        self._full_said = True
        if self.destination.full:
            guard.say_once(
                "queue_full:destination",
                f"groundwatch: {self.destination!r} is full: sampled records are dropped and "
                "counted as groundwatch.records{groundwatch.decision=queue_full}; start more "
                "workers (groundwatch worker) or lower the sample rate (GROUNDWATCH_SAMPLE_RATE)",
            )
        else:
            guard.say_once(
                "queue_full",
                f"groundwatch: the monitor's queue is full ({self.max_queue_size} records "
                "waiting for the judge): sampled records are dropped and counted as "
                "groundwatch.records{groundwatch.decision=queue_full}; lower the sample rate "
                "(GROUNDWATCH_SAMPLE_RATE), cap it (GROUNDWATCH_RATE_LIMIT_PER_MINUTE) or raise "
                "max_queue_size (GROUNDWATCH_MAX_QUEUE_SIZE)",
            )

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
                loop.run_until_complete(self.destination.aclose())
                # A task cancelled before its first step never ran _run_batch's handlers.
                self.stats.count_dropped(self._lost_as(), len(self._inflight))
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
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                # A bug of ours must not leave records queued forever: log, breathe, go on.
                guard.internal_error("worker", exc, reraise=False)
                await asyncio.sleep(0.1)

    async def _dispatch(self, semaphore: asyncio.Semaphore) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        queue = self.queue
        wakeup = self._wakeup
        last_record = -STAY_AWAKE_S
        gathered = False
        while True:
            if self._stopping:
                return
            if not queue and loop.time() - last_record < STAY_AWAKE_S:
                # Traffic was here a moment ago: look again in BATCH_DELAY_S, still "awake",
                # so that submit() does not wake us (a flush or shutdown does).
                wakeup.clear()
                timer = loop.call_later(BATCH_DELAY_S, wakeup.set)
                try:
                    await wakeup.wait()
                finally:
                    timer.cancel()
                gathered = True
                continue
            # Order matters (see submit): mark idle and clear the event *before* looking at the
            # queue, so a record appended after the look always finds us idle and wakes us.
            self._awake = False
            wakeup.clear()
            if not queue:
                await wakeup.wait()
                gathered = False
            self._awake = True
            while queue and not self._stopping:
                await semaphore.acquire()
                if self._stopping:
                    semaphore.release()
                    break
                last_record = loop.time()
                size = self.destination.batch_size()
                # Records found by a look on the timer had BATCH_DELAY_S to gather already.
                records = await self._take_batch(size, wait=not gathered)
                gathered = False
                if not records:
                    semaphore.release()
                    break
                seqs = range(self._next_seq, self._next_seq + len(records))
                self._next_seq += len(records)
                task = loop.create_task(self._run_batch(records, seqs, semaphore))
                for seq in seqs:
                    self._inflight[seq] = task

    def _behind(self) -> bool:
        """The worker must not rest (:class:`~.runners.contract.Pacer`): a flush waits, the monitor
        shuts down, or the queue holds an eighth of its bound (filling faster than a resting
        worker empties it)."""
        return (
            bool(self._flush_waiters)
            or self._stopping
            or len(self.queue) >= max(1, self.max_queue_size // 8)
        )

    async def _take_batch(self, size: int, wait: bool = True) -> list[RagRecord]:
        """Up to ``size`` records, waiting (``wait``) up to ``BATCH_DELAY_S`` for more to
        arrive (unless a flush is waiting or the worker is stopping)."""
        assert self._hurry is not None
        queue = self.queue
        if wait and len(queue) < size and not self._flush_waiters and not self._stopping:
            # _awake stays True meanwhile: submit() does not wake the loop per record.
            hurry = self._hurry
            hurry.clear()
            # A timer that sets the event, not asyncio.wait_for: that costs a task and a
            # cancellation per batch, about 0.08 ms of the host's CPU each time.
            timer = asyncio.get_running_loop().call_later(BATCH_DELAY_S, hurry.set)
            try:
                await hurry.wait()
            finally:
                timer.cancel()
        records: list[RagRecord] = []
        while len(records) < size and not self._stopping:
            try:
                records.append(queue.popleft())
            except IndexError:
                break
        return records

    async def _run_batch(
        self, records: list[RagRecord], seqs: range, semaphore: asyncio.Semaphore
    ) -> None:
        try:
            # The destination counts every record, shutdown's cancellation included.
            await self.destination.handle(records, self.pacer)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a broken contract: log it, keep the worker
            guard.internal_error("worker", exc, reraise=False)
        finally:
            for seq in seqs:
                self._inflight.pop(seq, None)
            semaphore.release()
            self._check_flush()

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
            if not self.queue:
                return True
            # A record is queued but its submit() has not started the worker yet (it runs on
            # another thread, between its append and _start): start it here and wait for it.
            self._start()
            loop = self._loop
            if loop is None:  # shut down meanwhile: shutdown() counted what is queued
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
        self.stats.count_dropped(self._lost_as(), n)

    def _lost_as(self) -> str:
        """Why queued records are dropped at shutdown: the lost destination, if it is down,
        else the deadline."""
        return sc.ERROR_TRANSPORT if self.destination.down else sc.ERROR_SHUTDOWN

    def _stop_on_loop(self) -> None:
        self._stopping = True
        if self._hurry is not None:
            self._hurry.set()
        self._drain_dropped()
        for task in list(self._inflight.values()):
            task.cancel()  # _run counts each as dropped
        asyncio.get_running_loop().stop()

    def shutdown(self, timeout_s: float) -> bool:
        """Score what is queued within the deadline, count the rest as dropped, stop.

        Returns ``False`` when a record was dropped meanwhile (the deadline, an unreachable
        destination) or the thread did not stop in time; the first such shutdown of the process
        says what was dropped and why (a :class:`~groundwatch.LossWarning`)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._start_lock:
            already = self._stopped
            self._stopped = True
        if already:
            return True
        started = time.monotonic()
        _, before = self.stats.snapshot()
        done = self._shutdown(timeout_s, deadline)
        _, after = self.stats.snapshot()
        lost = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
        if lost:
            self._say_dropped(lost, timeout_s, time.monotonic() - started)
        return done and not lost

    def _say_dropped(self, lost: dict[str, int], timeout_s: float, waited_s: float) -> None:
        reasons = []
        for error_type, n in sorted(lost.items(), key=lambda kv: -kv[1]):
            if error_type == sc.ERROR_SHUTDOWN:
                reasons.append(
                    f"{n} still queued or being scored when the {timeout_s:g} s deadline passed "
                    "(error.type=shutdown)"
                )
            elif error_type == sc.ERROR_TRANSPORT:
                reasons.append(
                    f"{n} not handed over: {self.destination!r} could not be reached "
                    "(error.type=transport)"
                )
            else:
                reasons.append(f"{n} with error.type={error_type}")
        what = "at exit" if self.exiting else "at shutdown"
        hint = (
            "; call monitor.shutdown(timeout_millis=...) before the app exits to wait longer, "
            "or lower the sample rate (GROUNDWATCH_SAMPLE_RATE)"
            if sc.ERROR_SHUTDOWN in lost
            else ""
        )
        guard.say_once(
            "dropped at shutdown",
            f"groundwatch: {what}, after {waited_s:.1f} s, {sum(lost.values())} sampled records "
            f"were dropped unscored: {'; '.join(reasons)} (counted in "
            f"groundwatch.evaluations.dropped){hint}",
        )

    def _shutdown(self, timeout_s: float, deadline: float) -> bool:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # loop closed
                self._loop.call_soon_threadsafe(self.destination.close_soon, deadline)
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
        self.destination.at_fork_reinit()
