"""A sync judge in a worker process (``Monitor(executor="process")``): :class:`ProcessRunner`.

A CPU-bound judge on a thread of the host's interpreter holds the GIL for up to the whole
switch interval at a time, which shows in the host's tail latency (``benchmarks/overhead.py``
measures it). Here the judge runs in a child interpreter instead; the host only pickles the
inputs and waits on a pipe (without the GIL).

The worker processes, their pipes and the protocol over them are
:mod:`~groundwatch.runtime.runners.worker_process`; this module decides when to start, reuse, stop
and fall back from them, and sends each batch (see :data:`REPLY_GATHER_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import pickle
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..._fields import RecordFields
from ..._shared import guard
from ..._shared.config import ConfigWarning
from ..._shared.daemon_threads import DaemonThreads
from ...judging import scoring
from ...judging.judges._base import judge_name
from ...telemetry.worker_export import WorkerExport
from ..pipeline import Prepared, RunnerResult, error_evaluation, timeout_evaluation
from .contract import JudgeSpeed
from .thread_runner import ThreadRunner
from .worker_process import (
    LOST,
    START_FAILED,
    WorkerProcess,
    WorkerProcessError,
    result_from_reply,
)

_logger = logging.getLogger(__name__)

REPLY_GATHER_S = 0.1
"""The worker process answers one record at a time, as each is done; the pipe thread waits for
the replies still due (from the judge's recent speed, at most this long and half the evaluation
timeout) before it looks, so one wake-up usually takes the whole batch. Each wake-up costs the
host's interpreter a few takes of the GIL (after the sleep, the ``select`` and the read), each
of them a hand-off with a request thread that holds it. The batch's results are handed on
together at its end anyway, so waiting for all of them delays nothing; replies carry the
child's own timestamps, so the spans are not moved; a deadline still counts from the previous
reply."""

REPLY_GATHER_MAX = 32
"""Replies the pipe thread lets gather at most before it looks (a batch's worth, which the
pipe's buffer holds without making the child wait)."""

STOP_GRACE_S = 2.0
"""With ``export_from_worker``, a worker process stopped at a deadline gets this long to export
what its batch processors hold before it is killed."""

CLOSE_WAIT_S = 2.0
"""At shutdown, how long the worker processes get to exit after their pipes close."""

START_RETRY_S = 30.0
"""After a failed start, calls fail fast for this long instead of starting (and paying for)
another interpreter per record."""


@dataclass(slots=True)
class _Failed:
    """A batch item the worker process did not answer (``failure`` None: past its deadline)."""

    failure: WorkerProcessError | None
    start_ns: int
    end_ns: int


class _BatchCall:
    """What the pipe thread of one batch shares with the task awaiting it."""

    __slots__ = ("cancelled", "child")

    def __init__(self) -> None:
        self.child: WorkerProcess | None = None
        self.cancelled = False


def _consume_result(future: asyncio.Future[Any]) -> None:
    """Read an abandoned start's outcome, so that asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


class ProcessRunner:
    """A :class:`~.contract.Runner` that judges in a worker process, started on first use; the
    judge must be picklable.

    One batch at a time per process (``processes`` of them). When the process dies (killed,
    out of memory) the record in flight fails with ``error.type=worker_process_lost`` and the
    rest of its batch goes to a new process; a record past its deadline kills its process
    (it is stuck in the judge), so the next one starts clean. With ``fallback`` (the ``auto``
    executor), a judge that cannot be pickled, or a process that cannot start at all, runs on
    a :class:`~.thread_runner.ThreadRunner` instead, with a warning.
    """

    def __init__(
        self,
        judge: Any,
        processes: int = 1,
        *,
        fallback: bool = False,
        export: WorkerExport | None = None,
        nice: bool = True,
    ) -> None:
        self.inner = judge
        self.export = export
        """Set: each worker process exports the spans and events of what it scores."""
        self._export_failure_warned = False
        self.name = judge_name(judge)
        self.concurrency = max(1, processes)
        self.allow_fallback = fallback
        self.nice = nice
        """The worker processes lower their priority (``_child.WORKER_NICE``): scoring is
        background work beside the host's requests. ``groundwatch check``, whose work the
        judging is, keeps them at its own priority."""
        self.fallback: ThreadRunner | None = None
        self._judge_bytes: bytes | None = None
        self._pickle_error: str | None = None
        try:
            self._judge_bytes = pickle.dumps(judge, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            self._pickle_error = f"{type(exc).__name__}: {exc}"
            if fallback:
                self._fall_back(f"it cannot be pickled ({self._pickle_error})")
            else:
                _logger.warning(
                    "executor='process': judge %s cannot be pickled (%s); its evaluations fail "
                    "with error.type=judge_not_picklable",
                    self.name,
                    self._pickle_error,
                )
        self._idle: list[WorkerProcess] = []
        self._all: list[WorkerProcess] = []
        self._start_failure: tuple[float, str] | None = None
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)
        self._flushing = 0
        self.started = 0
        self.speed = JudgeSpeed()
        self._pipe_threads = DaemonThreads("groundwatch-judge-pipe")
        self._closing: asyncio.Event | None = None
        """Set by :meth:`close_soon` (on the worker's loop)."""
        self._closed = False

    def _fall_back(self, why: str) -> None:
        message = (
            f"executor='auto': judge {self.name} runs on a thread of this interpreter instead "
            f"of a worker process, because {why}; CPU-bound scoring may then slow this "
            "process's requests"
        )
        _logger.warning("%s", message)
        hint = (
            " (make the judge picklable, its class in a module the worker process can import, "
            "or pass executor='thread' to choose a thread and silence this)"
        )
        guard.say_once("executor fallback", f"groundwatch: {message}{hint}", ConfigWarning)
        self.fallback = ThreadRunner(self.inner)

    def batch_size(self) -> int:
        if self.fallback is not None:
            return self.fallback.batch_size()
        return self.speed.batch_size()

    # --- the processes ---------------------------------------------------------------------

    def _take(self) -> WorkerProcess:
        with self._lock:
            while self._flushing and not self._idle and len(self._all) >= self.concurrency:
                # A force_flush has the process for a moment: wait for it rather than start
                # one more than ``processes``.
                self._returned.wait(0.5)
            if self._idle:
                return self._idle.pop()
            failed = self._start_failure
        if failed is not None and time.monotonic() - failed[0] < START_RETRY_S:
            raise WorkerProcessError(START_FAILED, f"(not retried yet) {failed[1]}")
        assert self._judge_bytes is not None
        try:
            child = WorkerProcess(self._judge_bytes, self._export_setup, self.nice)
        except WorkerProcessError as exc:
            with self._lock:
                self._start_failure = (time.monotonic(), str(exc))
            raise
        if child.export_failure is not None and not self._export_failure_warned:
            self._export_failure_warned = True
            _logger.warning(
                "export_from_worker: the worker process cannot export (%s); this process "
                "exports the evaluations instead",
                child.export_failure,
            )
        with self._lock:
            self._start_failure = None
            self._all.append(child)
            self.started += 1
        return child

    @functools.cached_property
    def _export_setup(self) -> bytes | None:
        # Built at the first start (providers set after the monitor count), then kept: one
        # warning when it cannot be pickled, not one per process.
        return self.export.setup() if self.export is not None else None

    def _give_back(self, child: WorkerProcess) -> None:
        with self._lock:
            self._idle.append(child)
            self._returned.notify()

    def _discard(self, child: WorkerProcess) -> None:
        if self.export is not None:
            child.stop(STOP_GRACE_S)  # its batch processors may hold spans of earlier records
        else:
            child.kill()
        with self._lock:
            if child in self._all:
                self._all.remove(child)

    def _gather_s(self) -> float:
        """The judge's recent time per record (0 while unknown)."""
        ns = self.speed.ns
        return ns / 1e9 if ns is not None else 0.0

    async def start(self) -> None:
        """Start a worker process if none is ready; the worker awaits this *outside* the
        evaluation deadline, so a slow interpreter start is not a judge timeout. A failed
        start is left for :meth:`run` to report (and to fall back from).

        Once shutdown began (:meth:`close_soon`) a start is waited for half the time left at
        most; then, with no process ready, what is left is scored on a thread of this
        interpreter (the app is stopping, its requests are done), so the records queued at
        exit do not hang on how long an interpreter takes to start on a loaded machine."""
        with self._lock:
            ready = bool(self._idle) or len(self._all) >= self.concurrency
        if ready or self.fallback is not None or self._judge_bytes is None:
            return
        if self._closing is None:
            self._closing = asyncio.Event()
        if self._closing.is_set():
            self._finish_on_thread()
            return
        call = _BatchCall()

        def start_one() -> None:
            child = self._take()
            call.child = child
            if self._closed:  # came after close(): nobody will use or stop it
                self._discard(child)
            else:
                self._give_back(child)

        starting = asyncio.ensure_future(self._pipe_threads.run(start_one))
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait((starting, closing), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            starting.cancel()
            if call.child is not None:  # shut down while it started: nobody will use it
                self._discard(call.child)
            raise
        finally:
            closing.cancel()
        if starting.done():
            with contextlib.suppress(WorkerProcessError):
                starting.result()
            return
        # Shutdown's patience ran out while the process started: the process, when it comes,
        # is stopped (start_one after close()); the batch goes to a thread now.
        starting.add_done_callback(_consume_result)
        self._finish_on_thread()

    def close_soon(self, deadline: float) -> None:
        """Shutdown began (on the worker's loop): a worker process still starting gets half
        the time left, the rest is for scoring on a thread (:meth:`start`)."""
        if self._closing is None:
            self._closing = asyncio.Event()
        patience = max(0.0, deadline - time.monotonic()) / 2
        asyncio.get_running_loop().call_later(patience, self._closing.set)

    def _finish_on_thread(self) -> None:
        if self.fallback is None:
            _logger.info(
                "judge %s: shutdown began before a worker process was ready; what is left is "
                "scored on a thread of this interpreter",
                self.name,
            )
            self.fallback = ThreadRunner(self.inner)

    # --- a batch ---------------------------------------------------------------------------

    def _batch_blocking(
        self, blobs: list[bytes | Exception], policy: Any, timeout_s: float, call: _BatchCall
    ) -> list[RunnerResult | _Failed]:
        """Runs on a pipe thread: send the batch, read one reply per item, each within
        ``timeout_s`` of the previous one. A stuck or lost process is killed; the item it was
        on fails, the rest go to a fresh process."""
        now = time.time_ns
        outcomes: list[RunnerResult | _Failed | None] = [None] * len(blobs)
        pending: list[int] = []
        for i, blob in enumerate(blobs):
            if isinstance(blob, Exception):
                failure = WorkerProcessError(type(blob).__qualname__, str(blob)[:500])
                outcomes[i] = _Failed(failure, now(), now())
            else:
                pending.append(i)
        while pending and not call.cancelled:
            try:
                child = self._take()
            except WorkerProcessError as exc:
                for i in pending:
                    outcomes[i] = _Failed(exc, now(), now())
                break
            call.child = child
            if call.cancelled:
                break
            sent = now()
            try:
                child.send(("evaluate_batch", ([blobs[i] for i in pending], policy)))
            except WorkerProcessError as exc:
                self._discard(child)
                outcomes[pending[0]] = _Failed(exc, sent, now())
                pending = pending[1:]
                continue
            rest, pending = pending, []
            last = sent
            per_reply_s = self._gather_s()
            for k, i in enumerate(rest):
                waited = 0.0
                # Waiting pays only when a wake-up can take more than one reply: all of those
                # still due (up to REPLY_GATHER_MAX), so a batch takes a wake-up or two, not one
                # per record (waiting for half of them each time took about log2 of the batch).
                due = len(rest) - k
                if per_reply_s and due > 1 and not child.has_buffered():
                    expected = min(due, REPLY_GATHER_MAX)
                    waited = min(REPLY_GATHER_S, timeout_s / 2, per_reply_s * expected)
                    time.sleep(waited)
                try:
                    reply = child.reply(timeout_s - waited)
                except TimeoutError:
                    self._discard(child)
                    outcomes[i] = _Failed(None, last, now())
                    pending = rest[k + 1 :]
                    break
                except WorkerProcessError as exc:
                    if exc.error_type == LOST or child.proc.poll() is not None:
                        self._discard(child)
                        outcomes[i] = _Failed(exc, last, now())
                        pending = rest[k + 1 :]
                        break
                    # Raised in the child; it lives.
                    outcomes[i] = _Failed(exc, last, now())
                    last = now()
                    continue
                last = now()
                outcomes[i] = result_from_reply(reply, last)
            else:
                self._give_back(child)
        end = now()
        return [
            o if o is not None else _Failed(WorkerProcessError(LOST, "cancelled"), end, end)
            for o in outcomes
        ]

    async def run(
        self, items: Sequence[Prepared], policy: scoring.LabelPolicy, timeout_s: float
    ) -> list[RunnerResult]:
        """Evaluate several prepared records with one message to the worker process and one
        thread hop, instead of one of each per record (the host's CPU per record is what
        the request path competes with). Each evaluation keeps its own ``timeout_s``."""
        if self.fallback is not None:
            return await self.fallback.run(items, policy, timeout_s)
        if self._judge_bytes is None:
            now = time.time_ns()
            message = self._pickle_error or "the judge cannot be pickled"
            return [
                RunnerResult(
                    error_evaluation("judge_not_picklable", message, item, self.name), now, now
                )
                for item in items
            ]
        blobs: list[bytes | Exception] = []
        export = self.export
        for item in items:
            try:
                if export is not None and item.record is not None:
                    request = export.record_fields(item.record, item.passages)
                else:
                    request = RecordFields(
                        item.record.record_id if item.record is not None else "",
                        item.question,
                        item.answer,
                        item.passages,
                        truncated=item.truncated,
                    )
                blobs.append(pickle.dumps(request.to_wire(), protocol=pickle.HIGHEST_PROTOCOL))
            except Exception as exc:  # unpicklable metadata: this record fails, not the batch
                blobs.append(exc)
        call = _BatchCall()
        try:
            outcomes = await self._pipe_threads.run(
                lambda: self._batch_blocking(blobs, policy, timeout_s, call)
            )
        except asyncio.CancelledError:
            call.cancelled = True
            if call.child is not None:
                self._discard(call.child)
            raise
        results: list[RunnerResult] = []
        for item, outcome in zip(items, outcomes, strict=True):
            start_ns, end_ns = outcome.start_ns, outcome.end_ns
            if isinstance(outcome, RunnerResult):
                results.append(outcome)
                self.speed.observe(end_ns - start_ns)
                continue
            failure = outcome.failure
            if failure is None:  # past its deadline
                evaluation = timeout_evaluation(timeout_s, item, self.name)
            elif self.allow_fallback and self.started == 0 and failure.error_type == START_FAILED:
                # Not one process ever started (no usable Python executable, the judge's
                # module not importable out there): scoring on a thread beats no scoring.
                self._fall_back(f"no worker process could start ({failure})")
                assert self.fallback is not None
                results.extend(await self.fallback.run([item], policy, timeout_s))
                continue
            else:
                evaluation = error_evaluation(failure.error_type, str(failure), item, self.name)
            results.append(RunnerResult(evaluation, start_ns, end_ns))
        return results

    # --- lifecycle -------------------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """Have each idle worker process export what its batch processors hold (with
        ``export_from_worker``; ``Monitor.force_flush`` calls this once the queue is done).
        A process that does not answer in time is stopped."""
        if self.export is None:
            return True
        deadline = time.monotonic() + timeout_s
        with self._lock:
            waiting = len(self._idle)
        done = True
        for _ in range(waiting):  # one at a time: the others stay free for batches
            with self._lock:
                if not self._idle:
                    break
                child = self._idle.pop(0)
                self._flushing += 1
            try:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                child.send(("flush", int(left * 1000)))
                done = bool(child.reply(left)) and done
            except (TimeoutError, WorkerProcessError):
                self._discard(child)
                done = False
            else:
                self._give_back(child)
            finally:
                with self._lock:
                    self._flushing -= 1
                    self._returned.notify_all()
        return done

    def close(self) -> None:
        """Stop every worker process (Monitor.shutdown calls this)."""
        with self._lock:
            self._closed = True
            children, self._all, self._idle = self._all, [], []
        # All pipes first, then the waits: each process exits (exporting what it holds, with
        # export_from_worker) at the same time as the others, not one after another.
        for child in children:
            child.close_pipes()
        deadline = time.monotonic() + CLOSE_WAIT_S
        for child in children:
            child.close(max(0.0, deadline - time.monotonic()))
        self._pipe_threads.close()

    def at_fork_reinit(self) -> None:
        # The processes belong to the parent; the forked child starts its own when needed.
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)
        self._flushing = 0
        self._closing = None  # the parent's loop's
        for child in self._all:
            child.close_pipes()
        self._all, self._idle = [], []
        self._pipe_threads.at_fork_reinit()
        if self.fallback is not None:
            self.fallback.at_fork_reinit()

    def pids(self) -> list[int]:
        with self._lock:
            return [child.proc.pid for child in self._all]
