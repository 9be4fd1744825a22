"""``Monitor``: the front door of the online runtime, and what it is built from.

Each concern has its module: the request path (``record()``, ``decide()``, ...) is
:mod:`.request_path`'s, feedback and the audit's front :mod:`.feedback_front`'s, the options
:mod:`.options`'; scoring and telemetry happen on the background worker
(:mod:`groundwatch.runtime.worker`). This module builds the parts from the options and runs
their lifecycle (flush, shutdown, exit, fork).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from .._shared import config as _config
from .._shared import guard
from .._shared.record import RagRecord
from .._shared.weakhooks import reinit_after_fork, weak_callback
from .feedback_front import FeedbackFront
from .request_path import RequestPath
from .sampling import Sampler, default_sampler, inner_samplers, record_sampling_rate

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..judging.judges import Judge
    from .options import AuditOptions, CaptureOptions, GroupedKeywords, QueueOptions, ScoringOptions
    from .results import ResultCallback
    from .worker import Destination, Worker

# What record() needs is imported at start-up (.request_path); the rest (the options, the
# judge, the telemetry, the worker and the runners) in the constructor: ``from groundwatch
# import Monitor`` then defines no pydantic model and loads no judge
# (tests/core/test_lazy_imports.py).

__all__ = ["Monitor"]


class Monitor(RequestPath, FeedbackFront):
    """Samples RAG interactions, scores them in the background, emits OpenTelemetry data.

    Its options come in groups, as a ``TracerProvider``'s do (:mod:`groundwatch.runtime.options`):
    each group's fields are keyword arguments of their own too (``Monitor(executor="thread",
    audit_rate=0.02)``), read from their ``GROUNDWATCH_*`` variables when not given.

    Args:
        judge: the judge; the embedded :class:`~groundwatch.LocalJudge` by default.
        sampler: decides which records are scored; by default from the environment
            (``GROUNDWATCH_SAMPLE_RATE``, default 1.0, and ``GROUNDWATCH_RATE_LIMIT_PER_MINUTE``).
        tracer_provider, meter_provider, logger_provider: OpenTelemetry providers; the global
            ones by default (resolved lazily, so providers set after the monitor work too).
        on_result: a callback, or a sequence of them, called with ``(record, evaluation)`` on
            the worker thread after the telemetry is emitted. Keep it quick (it holds up the
            worker); one that raises is logged and counted in ``groundwatch.errors``.
        route: the default route of records (``record(route=...)`` overrides it).
        shutdown_on_exit: register an ``atexit`` hook that flushes the queue (default on).
        scoring: where and how the judge runs (:class:`~groundwatch.ScoringOptions`:
            ``executor``, ``processes``, ``max_concurrency``, ``evaluation_timeout_millis``,
            ``policy``, ``export_from_worker``).
        capture: what content leaves the process (:class:`~groundwatch.CaptureOptions`:
            ``capture_content``, ``redact``, ``content_max_chars``).
        audit: the random audit (:class:`~groundwatch.AuditOptions`: ``audit_rate``,
            ``feedback_memory``).
        queueing: the queue before the scoring (:class:`~groundwatch.QueueOptions`:
            ``max_queue_size``, ``queue``: a :class:`~groundwatch.RedisQueue` for
            ``groundwatch worker`` processes to score from).
        **keywords: any of the groups' fields, as a keyword argument.

    Raises:
        ValueError: a value its group refuses (a size, count or timeout below 1, an
            ``audit_rate`` outside [0, 1], an unknown ``executor``), or a
            :class:`~groundwatch.DatasetSink` in ``on_result`` without content capture.
        TypeError: an unknown keyword, or one given both flat and in its group. (Only the
            constructor raises; ``record`` and the rest never do.)
    """

    def __init__(
        self,
        judge: Judge | None = None,
        sampler: Sampler | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        on_result: ResultCallback | Sequence[ResultCallback] | None = None,
        route: str | None = None,
        shutdown_on_exit: bool = True,
        scoring: ScoringOptions | None = None,
        capture: CaptureOptions | None = None,
        audit: AuditOptions | None = None,
        queueing: QueueOptions | None = None,
        **keywords: Unpack[GroupedKeywords],
    ) -> None:
        from ..judging.judges import CascadeJudge
        from ..judging.scoring import DEFAULT_POLICY
        from ..telemetry import Stats, Telemetry
        from .feedback import DEFAULT_MEMORY, Feedback
        from .options import gather
        from .pipeline import LocalScoring
        from .results import Results
        from .runners.choice import runner_for, worker_export_for
        from .worker import Worker

        given = {"scoring": scoring, "capture": capture, "audit": audit, "queueing": queueing}
        options = gather(given, keywords)
        run, cap, aud, que = (options[g] for g in given)
        config = _config.from_env()
        if judge is None:
            from ..judging.evaluate import default_judge

            judge = default_judge()
        self.judge: Judge = judge
        self.sampler: Sampler = sampler if sampler is not None else default_sampler(config)
        self.route = route
        self._disabled = config.disabled
        callbacks = (
            [] if on_result is None else [on_result] if callable(on_result) else list(on_result)
        )
        self.executor: str = run.executor or config.executor
        self._shut = False
        self._lock = threading.Lock()
        self.stats = Stats(self._queue_size)
        if isinstance(self.judge, CascadeJudge):
            self.stats.escalating.append(self.judge)
        self._telemetry = Telemetry(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=(
                config.capture_content if cap.capture_content is None else cap.capture_content
            ),
            redact=cap.redact,
            content_max_chars=cap.content_max_chars or config.content_max_chars,
            stats=self.stats,
            audit_rate=config.audit_rate if aud.audit_rate is None else float(aud.audit_rate),
        )
        memory = DEFAULT_MEMORY if aud.feedback_memory is None else aud.feedback_memory
        self._feedback = Feedback(self._telemetry, self.stats, memory=memory, route=route)
        self._results = Results(
            self.sampler, self._telemetry, callbacks, verdicts=self._feedback.memory
        )
        for callback in callbacks:
            self._feedback.listen(callback)  # a dashboard sink's on_feedback
        destination: Destination
        if que.queue is not None:  # remote workers judge: no runner here
            que.queue.attach(self.stats, self._sampling_rate)
            destination = que.queue
        else:
            wanted = run.export_from_worker
            export = worker_export_for(
                self.judge,
                self.executor,
                config.export_from_worker if wanted is None else wanted,
                self._telemetry,
                self._sampling_rate,
            )
            runner = runner_for(
                self.judge,
                self.executor,
                run.processes or 1,
                run.max_concurrency or config.max_concurrency,
                export,
            )
            timeout_millis = run.evaluation_timeout_millis or config.evaluation_timeout_millis
            destination = LocalScoring(
                runner,
                self._results,
                self.stats,
                policy=DEFAULT_POLICY if run.policy is None else run.policy,
                timeout_s=timeout_millis / 1000,
            )
        self._worker: Worker = Worker(
            destination=destination,
            stats=self.stats,
            max_queue_size=que.max_queue_size or config.max_queue_size,
        )
        self._atexit: Callable[[], None] | None = None
        if shutdown_on_exit:
            self._atexit = weak_callback(self._shutdown_at_exit)
            atexit.register(self._atexit)
        reinit_after_fork(self._at_fork_reinit)

    def _queue_size(self) -> int:
        worker: Worker | None = getattr(self, "_worker", None)  # None while constructing
        return len(worker.queue) if worker is not None else 0

    # --- worker side ---------------------------------------------------------------------------

    def _sampling_rate(self, record: RagRecord) -> float | None:
        """The rate on the record's span (1.0 for ``always_score``), for a record whose span
        is built elsewhere: by a queue's workers, or by the worker process with
        ``export_from_worker``."""
        try:
            return record_sampling_rate(self.sampler, record)
        except BaseException as exc:  # user code
            guard.user_error("sampler", exc)
            return None

    def add_result_callback(self, callback: ResultCallback) -> None:
        """Add an ``on_result`` callback (e.g. an alert detector) after construction.

        Raises:
            ValueError: the callback cannot work with this monitor (a
                :class:`~groundwatch.DatasetSink` without content capture).
        """
        self._results.add_callback(callback)
        self._feedback.listen(callback)  # a dashboard sink's on_feedback (docs/dashboards.md)

    # --- lifecycle -----------------------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until every record queued so far is scored and emitted.

        Returns:
            ``True`` when done within ``timeout_millis``, ``False`` otherwise (and when called
            from an ``on_result`` callback, which would wait for itself). Never raises.
        """
        try:
            deadline = time.monotonic() + timeout_millis / 1000
            if not self._worker.flush(timeout_millis / 1000):
                return False
            if not self._feedback.flush(max(0.0, deadline - time.monotonic())):
                return False
            if not self._results.flush_bound(deadline):
                return False
            # The worker processes' own exporters (export_from_worker) hold the spans now.
            return self._worker.destination.flush(max(0.0, deadline - time.monotonic()))
        except Exception as exc:
            guard.internal_error("force_flush", exc)
            return False

    def shutdown(self, timeout_millis: int = 30000) -> bool:
        """Stop taking records, score what is queued within the deadline, stop the worker.

        What cannot be scored in time is counted in ``groundwatch.evaluations.dropped``
        (``error.type=shutdown``); with a queue (``RedisQueue``) that cannot be reached, what
        it could not hand over is counted ``error.type=transport``, and the deadline holds
        all the same. A second call does nothing and returns ``True``.

        Returns:
            ``True`` when everything queued was scored or handed over and the worker stopped
            in time; ``False`` when a record was dropped (the deadline, the queue's transport),
            which the first such shutdown of the process also says on stderr
            (a :class:`~groundwatch.LossWarning`).
        """
        try:
            with self._lock:
                if self._shut:
                    return True
                self._shut = True
            if self._atexit is not None:
                atexit.unregister(self._atexit)
                self._atexit = None
            deadline = time.monotonic() + timeout_millis / 1000
            ok = self._worker.shutdown(timeout_millis / 1000)
            self._worker.destination.close()
            ok = self._feedback.close(max(0.0, deadline - time.monotonic())) and ok
            return self._results.close_bound(deadline) and ok
        except Exception as exc:
            guard.internal_error("shutdown", exc)
            return False

    def _shutdown_at_exit(self) -> None:
        self._worker.exiting = True
        self.shutdown(timeout_millis=5000)

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()
        for sampler in inner_samplers(self.sampler):
            reinit = getattr(sampler, "_at_fork_reinit", None)
            if reinit is not None:
                reinit()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
