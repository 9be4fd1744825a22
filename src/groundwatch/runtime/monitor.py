"""``Monitor``: the front door of the online runtime.

``record()`` runs on the host's request path: it captures references and the current span
context, asks the sampler, appends to a bounded queue and returns, in microseconds (see
``benchmarks/overhead.py``). Scoring and telemetry happen on the background worker
(:mod:`groundwatch.runtime.worker`).
"""

from __future__ import annotations

import atexit
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import SpanContext, TracerProvider

from .._shared import config as _config
from .._shared import guard
from .._shared.capture import MAX_PASSAGES
from .._shared.record import RagRecord
from .._shared.weakhooks import reinit_after_fork, weak_callback
from ..telemetry import semconv as sc
from ._arguments import NOT_PASSAGES, a_decision, invalid_reason, misuse_reason
from .sampling import (
    Decision,
    RateLimitSampler,
    RatioSampler,
    Sampler,
    inner_samplers,
    record_sampling_rate,
)

if TYPE_CHECKING:
    from typing_extensions import Never

    from ..judging.judges import Judge
    from ..judging.scoring import LabelPolicy
    from ..telemetry.worker_export import WorkerExport, WorkerProviders
    from .results import ResultCallback
    from .worker import Destination, RecordQueue, Worker

# What record() needs is imported above; the rest (the judge, the telemetry, the worker and the
# runners) in the constructor, which an application reaches after its start-up imports:
# ``from groundwatch import Monitor`` then defines no pydantic model and loads no judge
# (tests/core/test_lazy_imports.py, benchmarks/import_cost.py).

__all__ = ["Monitor"]

_logger = logging.getLogger(__name__)

_getrandbits = random.getrandbits
_get_current_span = trace.get_current_span
_SAMPLED = Decision.SAMPLED


def default_sampler(config: _config.RuntimeConfig) -> Sampler:
    """The sampler the environment asks for: a ratio, with a rate limit on top if set."""
    sampler: Sampler = RatioSampler(config.sample_rate)
    if config.rate_limit_per_minute is not None:
        sampler = RateLimitSampler(config.rate_limit_per_minute, sampler)
    return sampler


class Monitor:
    """Samples RAG interactions, scores them in the background, emits OpenTelemetry data.

    Args:
        judge: the judge; the embedded :class:`~groundwatch.LocalJudge` by default.
        sampler: decides which records are scored; by default from the environment
            (``GROUNDWATCH_SAMPLE_RATE``, default 1.0, and ``GROUNDWATCH_RATE_LIMIT_PER_MINUTE``).
        tracer_provider, meter_provider, logger_provider: OpenTelemetry providers; the global
            ones by default (resolved lazily, so providers set after the monitor work too).
        max_queue_size: records waiting for the worker; more are dropped and counted
            (``GROUNDWATCH_MAX_QUEUE_SIZE``, default 1024).
        on_result: a callback, or a sequence of them, called with ``(record, evaluation)`` on
            the worker thread after the telemetry is emitted. Keep it quick (it holds up the
            worker); one that raises is logged and counted in ``groundwatch.errors``.
        capture_content: put the question, answer and claims with their quotes on the
            evaluation span (``GROUNDWATCH_CAPTURE_CONTENT``, default off).
        redact: applied to every captured text before it leaves the process.
        route: the default route of records (``record(route=...)`` overrides it).
        max_concurrency: evaluations in flight for an async judge
            (``GROUNDWATCH_MAX_CONCURRENCY``, default 8); sync judges run one at a time.
        evaluation_timeout_millis: deadline of one evaluation; past it the evaluation fails
            with ``error.type=timeout`` (``GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS``, 60000).
        executor: where a sync (CPU-bound) judge runs: ``"process"``, a worker process
            started on first use, so scoring never holds this interpreter's GIL (the judge
            must be picklable); ``"thread"``, a thread of this interpreter (no extra process,
            but it slows the host's requests: README "Overhead"); ``"auto"`` (the default,
            ``GROUNDWATCH_EXECUTOR``), a process, falling back to a thread with a warning
            when the judge cannot be pickled or no process can start. Async judges run on
            the worker's event loop (on threads once one blocks the loop: see
            :mod:`groundwatch.runtime.runners.async_runner`).
        policy: thresholds that turn scores into a label (:class:`~groundwatch.LabelPolicy`;
            its defaults when ``None``).
        content_max_chars: cap per captured text attribute (``GROUNDWATCH_CONTENT_MAX_CHARS``).
        shutdown_on_exit: register an ``atexit`` hook that flushes the queue (default on).
        processes: worker processes for ``executor="process"`` (started on first use).
        queue: send sampled records to a queue for ``groundwatch worker`` processes to score,
            instead of scoring them here (a :class:`~groundwatch.RedisQueue`;
            docs/distributed.md). ``judge`` and ``executor`` then go unused: the workers judge.
        export_from_worker: with the process executor, each worker process exports the span
            and the two events of what it scores itself, so this interpreter no longer pays
            the OpenTelemetry SDK's work for them; metric points stay here
            (:mod:`groundwatch.telemetry.worker_export`, docs/runtime.md). ``True``: over OTLP,
            configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables
            (:func:`~groundwatch.otlp_worker_providers`); or a picklable function that builds
            the worker process's tracer and logger providers. Default off
            (``GROUNDWATCH_EXPORT_FROM_WORKER``): this process's providers export everything.
        feedback_memory: scored traces whose judge's label :meth:`feedback` can still
            compare a person's label with (trace and span ids, label and route; never
            content): the most recent 10000 by default, ``0`` for none.
        audit_rate: the share of judged answers in the random audit, chosen by trace id
            (:meth:`audited`), marked ``groundwatch.audit=true`` for people to label and
            bring back with ``feedback(source="audit")`` (docs/feedback.md "Audits";
            ``GROUNDWATCH_AUDIT_RATE``, default 0).

    Raises:
        ValueError: a size, count or timeout below 1, an ``audit_rate`` outside [0, 1], an
            unknown ``executor``, or a
            :class:`~groundwatch.DatasetSink` in ``on_result`` without content capture. (Only
            the constructor raises; ``record`` and the rest never do.)
    """

    def __init__(
        self,
        judge: Judge | None = None,
        sampler: Sampler | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        max_queue_size: int | None = None,
        on_result: ResultCallback | Sequence[ResultCallback] | None = None,
        capture_content: bool | None = None,
        redact: Callable[[str], str] | None = None,
        route: str | None = None,
        max_concurrency: int | None = None,
        evaluation_timeout_millis: int | None = None,
        executor: str | None = None,
        policy: LabelPolicy | None = None,
        content_max_chars: int | None = None,
        shutdown_on_exit: bool = True,
        processes: int = 1,
        queue: RecordQueue | None = None,
        export_from_worker: bool | WorkerProviders | None = None,
        feedback_memory: int | None = None,
        audit_rate: float | None = None,
    ) -> None:
        for name, value in (
            ("max_queue_size", max_queue_size),
            ("max_concurrency", max_concurrency),
            ("evaluation_timeout_millis", evaluation_timeout_millis),
            ("content_max_chars", content_max_chars),
            ("processes", processes),
        ):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value!r}")
        if audit_rate is not None and not 0.0 <= audit_rate <= 1.0:
            raise ValueError(f"audit_rate must be within [0, 1], got {audit_rate!r}")
        from ..judging.judges import CascadeJudge
        from ..judging.scoring import DEFAULT_POLICY
        from ..telemetry import Stats, Telemetry
        from .feedback import DEFAULT_MEMORY, Feedback
        from .pipeline import LocalScoring
        from .results import Results
        from .runners.choice import runner_for
        from .worker import Worker

        config = _config.from_env()
        if judge is None:
            from ..judging.evaluate import default_judge

            judge = default_judge()
        self.judge: Judge = judge
        self.sampler: Sampler = sampler if sampler is not None else default_sampler(config)
        self.route = route
        self._disabled = config.disabled
        if on_result is None:
            callbacks: list[ResultCallback] = []
        elif callable(on_result):
            callbacks = [on_result]
        else:
            callbacks = list(on_result)
        self.executor = executor if executor is not None else config.executor
        if self.executor not in _config.EXECUTORS:
            raise ValueError(f"executor must be one of {_config.EXECUTORS}, got {executor!r}")
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
                config.capture_content if capture_content is None else capture_content
            ),
            redact=redact,
            content_max_chars=content_max_chars or config.content_max_chars,
            stats=self.stats,
            audit_rate=config.audit_rate if audit_rate is None else float(audit_rate),
        )
        self._feedback = Feedback(
            self._telemetry,
            self.stats,
            memory=DEFAULT_MEMORY if feedback_memory is None else feedback_memory,
            route=self.route,
        )
        self._bound: list[Any] = []
        for callback in callbacks:
            self._bind_callback(callback)
        self._results = Results(
            self.sampler, self._telemetry, callbacks, verdicts=self._feedback.memory
        )
        destination: Destination
        if queue is not None:  # remote workers judge: no runner here
            queue.attach(self.stats, self._sampling_rate)
            destination = queue
        else:
            runner = runner_for(
                self.judge,
                self.executor,
                processes,
                max_concurrency or config.max_concurrency,
                self._worker_export(
                    config.export_from_worker if export_from_worker is None else export_from_worker
                ),
            )
            timeout_millis = evaluation_timeout_millis or config.evaluation_timeout_millis
            destination = LocalScoring(
                runner,
                self._results,
                self.stats,
                policy=DEFAULT_POLICY if policy is None else policy,
                timeout_s=timeout_millis / 1000,
            )
        self._worker: Worker = Worker(
            destination=destination,
            stats=self.stats,
            max_queue_size=max_queue_size or config.max_queue_size,
        )
        self._atexit: Callable[[], None] | None = None
        if shutdown_on_exit:
            self._atexit = weak_callback(self._shutdown_at_exit)
            atexit.register(self._atexit)
        reinit_after_fork(self._at_fork_reinit)

    def _worker_export(self, wanted: bool | WorkerProviders) -> WorkerExport | None:
        if wanted is False:
            return None
        from ..judging.judges._base import is_async_judge, judge_name
        from ..telemetry.worker_export import WorkerExport, otlp_worker_providers

        providers = otlp_worker_providers if wanted is True else wanted
        if self.executor == "thread" or is_async_judge(self.judge):
            _logger.warning(
                "export_from_worker needs a sync judge in a worker process (executor "
                "'process' or 'auto'); %s runs in this process (executor %r), which exports "
                "the evaluations",
                judge_name(self.judge),
                self.executor,
            )
            return None
        return WorkerExport(providers, self._telemetry, self._sampling_rate)

    def _queue_size(self) -> int:
        worker: Worker | None = getattr(self, "_worker", None)  # None while constructing
        return len(worker.queue) if worker is not None else 0

    # --- request path --------------------------------------------------------------------------

    def record(
        self,
        *args: Never,
        question: str | None = None,
        contexts: Sequence[Any] | None = None,
        answer: str | None = None,
        span_context: SpanContext | None = None,
        route: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        always_score: bool = False,
        decision: Decision | None = None,
        **unknown: Never,
    ) -> None:
        """Hand one RAG interaction to the monitor. Returns at once; never raises.

        Every call is counted once in ``groundwatch.records``. A call that cannot be scored as
        given is never coerced or guessed at: a missing ``answer`` or ``contexts``, a value of
        the wrong type, positional arguments or an unknown keyword are counted
        ``groundwatch.decision="error"``, ``error.type="invalid_input"``, with a warning
        (rate-limited) that names the argument. The passages inside ``contexts`` are read only
        when the record is sampled: an item that is plainly not a passage (``None``, a number,
        bytes) is counted the same way then; one that fails when the worker reads it (a
        document without text) is an evaluation with ``label="error"``,
        ``error.type="invalid_input"``.

        Args:
            question: the user's question, if known.
            contexts: the retrieved passages: strings, :class:`~groundwatch.Passage` objects,
                mappings with ``text``, LangChain documents or LlamaIndex nodes, in a list (or
                any iterable but a string or a mapping). Only a shallow copy of the sequence is
                kept; the items must not be mutated afterwards.
            answer: the generated answer.
            span_context: the span the evaluation belongs to; by default the span current in
                the caller.
            route: the pipeline's name, for per-route sampling and metric attributes.
            attributes: extra attributes for the evaluation span (primitive values only).
            always_score: score this record whatever the sampler says (a thumbs-down).
            decision: the sampler's decision taken for this interaction with :meth:`decide`
                (integrations: when its retrieval started); the sampler is not asked again.
        """
        error_type: str | None
        try:
            if args or unknown:
                guard.bad_input("Monitor.record", TypeError(misuse_reason(args, unknown)))
                outcome, error_type = Decision.ERROR, sc.ERROR_INVALID_INPUT
            else:
                outcome, error_type = self._record(
                    question,
                    contexts,
                    answer,
                    span_context,
                    route,
                    attributes,
                    always_score,
                    decision,
                )
        except Exception as exc:
            outcome, error_type = Decision.ERROR, sc.ERROR_INTERNAL
            self.stats.count_decision(outcome.value, error_type)
            guard.internal_error("record", exc)
            return
        self.stats.count_decision(outcome.value, error_type)

    def _record(
        self,
        question: Any,
        contexts: Any,
        answer: Any,
        span_context: Any,
        route: Any,
        attributes: Any,
        always_score: Any,
        decided: Any,
    ) -> tuple[Decision, str | None]:
        if self._shut:
            return Decision.ERROR, sc.ERROR_SHUTDOWN
        if (
            not isinstance(answer, str)
            or (question is not None and not isinstance(question, str))
            or contexts is None
            or isinstance(contexts, (str, bytes, Mapping))
            or not hasattr(contexts, "__iter__")
            or (span_context is not None and not isinstance(span_context, SpanContext))
            or (route is not None and not isinstance(route, str))
            or (attributes is not None and not isinstance(attributes, Mapping))
            or not isinstance(always_score, bool)
            or (decided is not None and type(decided) is not Decision and not a_decision(decided))
        ):
            reason = invalid_reason(
                question, contexts, answer, span_context, route, attributes, always_score, decided
            )
            guard.bad_input("Monitor.record", TypeError(reason))
            return Decision.ERROR, sc.ERROR_INVALID_INPUT
        if span_context is None:
            span_context = _get_current_span().get_span_context()
        if span_context.is_valid:
            trace_id, span_id = span_context.trace_id, span_context.span_id
        else:
            trace_id = span_id = 0
            span_context = None
        record = RagRecord(
            question,
            contexts,
            answer,
            route if route is not None else self.route,
            attributes,
            "%016x" % _getrandbits(64),  # noqa: UP031 (the fastest spelling)
            trace_id,
            span_id,
            always_score,
            span_context,
        )
        if self._disabled:
            return Decision.NOT_SAMPLED, None
        if not always_score:
            if decided is not None:
                decision = Decision(decided)
            else:
                try:
                    decision = self.sampler.decide(record)
                except Exception as exc:
                    guard.user_error("sampler", exc)
                    return Decision.ERROR, sc.ERROR_SAMPLER
            if decision is not _SAMPLED:
                return Decision(decision), None
        try:
            # One more than the cap, so the worker still sees (and marks) the truncation without
            # the request path copying a huge or endless sequence.
            copied = record.contexts = list(islice(contexts, MAX_PASSAGES + 1))
            if attributes is not None:
                record.attributes = dict(attributes)
        except Exception as exc:
            # The caller's objects raised while read (a generator, a lazy document list, a
            # mapping that is not one): their input, not our bug.
            guard.bad_input("Monitor.record", exc)
            return Decision.ERROR, sc.ERROR_INVALID_INPUT
        if not NOT_PASSAGES.isdisjoint(map(type, copied)):  # one C-level pass
            i, item = next((i, x) for i, x in enumerate(copied) if type(x) in NOT_PASSAGES)
            reason = f"contexts[{i}] must be a string or a passage, got {type(item).__name__}"
            guard.bad_input("Monitor.record", TypeError(reason))
            return Decision.ERROR, sc.ERROR_INVALID_INPUT
        if not self._worker.submit(record):
            return Decision.QUEUE_FULL, None
        return _SAMPLED, None

    def decide(
        self, *, span_context: SpanContext | None = None, route: str | None = None
    ) -> Decision:
        """The sampler's decision for an interaction, taken before its content exists.

        For integrations, when an interaction's retrieval starts (its trace id is known then):
        an interaction that will not be scored need keep no documents and build no record. End
        it with ``record(..., decision=SAMPLED)`` or :meth:`record_decision`, which count it;
        ``decide`` counts nothing. The sampler sees a record with the span context and route
        only (the built-in samplers need no more). Never raises: a raising sampler gives
        ``ERROR``.
        """
        try:
            if self._disabled:
                return Decision.NOT_SAMPLED
            if span_context is None:
                span_context = _get_current_span().get_span_context()
            valid = isinstance(span_context, SpanContext) and span_context.is_valid
            record = RagRecord(
                None,
                (),
                "",
                route if route is not None else self.route,
                None,
                "%016x" % _getrandbits(64),  # noqa: UP031 (the fastest spelling)
                span_context.trace_id if valid else 0,
                span_context.span_id if valid else 0,
                False,
                span_context if valid else None,
            )
            decision = self.sampler.decide(record)
            return decision if type(decision) is Decision else Decision(decision)
        except Exception as exc:
            guard.user_error("sampler", exc)
            return Decision.ERROR

    def record_decision(self, decision: Decision, *, route: str | None = None) -> None:
        """Count an interaction that :meth:`decide` did not sample, in place of ``record``.

        Counted as ``groundwatch.records{groundwatch.decision=<decision>}`` (``ERROR``: the
        sampler raised, ``error.type=sampler_error``). Never raises.
        """
        try:
            if type(decision) is not Decision:
                decision = Decision(decision)
            if decision is Decision.ERROR:
                self.stats.count_decision(decision.value, sc.ERROR_SAMPLER)
            elif self._shut:
                self.stats.count_decision(Decision.ERROR.value, sc.ERROR_SHUTDOWN)
            else:
                self.stats.count_decision(decision.value)
        except Exception as exc:
            guard.internal_error("record_decision", exc)

    def record_failure(self, error_type: str, *, route: str | None = None) -> None:
        """Count an interaction that could not be turned into a record.

        For integrations: the chain, retriever or LLM raised, so there is no answer to score.
        Counted as ``groundwatch.records{groundwatch.decision="error", error.type=...}``.
        Never raises.
        """
        try:
            self.stats.count_decision(Decision.ERROR.value, str(error_type) or "error")
        except Exception as exc:
            guard.internal_error("record_failure", exc)

    def feedback(
        self,
        *args: Never,
        label: str | None = None,
        trace_id: str | int | SpanContext | None = None,
        span_context: SpanContext | None = None,
        score: float | None = None,
        name: str = sc.EVALUATION_GROUNDEDNESS,
        source: str = "human",
        comment: str | None = None,
        **unknown: Never,
    ) -> None:
        """A person's (or another system's) verdict on an answer served earlier. Returns at
        once; never raises.

        The answer is named by its trace: ``trace_id`` as the 32-hex string (a
        ``traceparent`` header's, a log line's), the int or a ``SpanContext``; or
        ``span_context``. The call is counted in ``groundwatch.feedback`` with the person's
        label (``groundwatch.feedback.label``) beside the judge's (``groundwatch.label``)
        when the monitor still remembers its verdict for that trace (``feedback_memory``),
        else ``unknown``. A ``gen_ai.evaluation.result`` log record lands in that trace,
        marked ``gen_ai.evaluation.evaluator.type=human`` for ``source="human"``, emitted on
        a thread of its own (the caller pays a dict look-up and a queue append). Arguments
        that cannot be read are counted with ``error.type=invalid_input`` and a warning
        (rate-limited). docs/feedback.md has the whole loop.

        Args:
            label: ``hallucinated`` or ``grounded`` (or ``unfaithful``, ``faithful``: the
                human labels ``groundwatch check`` reads).
            trace_id: the trace of the answer.
            span_context: the span of the answer, in place of ``trace_id``.
            score: a score the person gave, if any (``gen_ai.evaluation.score.value``).
            name: the evaluation's name (``gen_ai.evaluation.name``), ``groundedness`` by
                default.
            source: who gave it: ``human`` (default) or another system's name
                (``groundwatch.feedback.source``).
            comment: the person's words: ``gen_ai.evaluation.explanation``, only with
                content capture on, through ``redact``.
        """
        try:
            if args or unknown:
                reason = (
                    f"feedback() takes keyword arguments only (label=, trace_id=), got "
                    f"{len(args)} positional"
                    if args
                    else f"unknown arguments: {', '.join(sorted(unknown))}"
                )
                guard.bad_input("Monitor.feedback", TypeError(reason))
                self.stats.count_feedback(None, None, None, sc.ERROR_INVALID_INPUT)
                return
            if self._disabled:
                return
            self._feedback.give(label, trace_id, span_context, score, name, source, comment)
        except Exception as exc:
            guard.internal_error("feedback", exc)

    @property
    def audit_rate(self) -> float:
        """The share of judged answers in the random audit."""
        return self._telemetry.audit_rate

    def audited(self, trace_id: str | int | SpanContext) -> bool:
        """Whether the answer of this trace is in the random audit (if it is judged: an
        evaluation that fails, or a record scored with ``always_score``, is not). The same
        answer in every replica, ``serve`` and ``worker`` at the same ``audit_rate``.

        Args:
            trace_id: the 32-hex string, the int or a ``SpanContext``.

        Raises:
            ValueError: ``trace_id`` is not a trace id.
        """
        from .feedback import parse_trace

        ids = parse_trace(trace_id, None)
        if isinstance(ids, str):
            raise ValueError(ids)
        rate = self._telemetry.audit_rate
        if not rate:
            return False
        from ..rates._audit import is_audited

        return is_audited(ids[0], rate)

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
        self._bind_callback(callback)
        self._results.add_callback(callback)

    def _bind_callback(self, callback: ResultCallback) -> None:
        """Hand a callback that asks for it (``bind_monitor``) the monitor's content settings:
        a :class:`~groundwatch.DatasetSink` writes content only as the monitor captures it."""
        self._feedback.listen(callback)  # a dashboard sink's on_feedback (docs/dashboards.md)
        bind = getattr(callback, "bind_monitor", None)
        if callable(bind):
            bind(
                capture_content=self._telemetry.capture_content,
                redact=self._telemetry.redact,
                audited=self._telemetry.audited,
                audit_rate=self._telemetry.audit_rate,
            )
            # Flushed and closed with the monitor: what it buffered is written at shutdown.
            self._bound = [*self._bound, callback]

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
            for sink in self._bound:
                if not sink.flush(max(0.0, deadline - time.monotonic())):
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
            for sink in self._bound:
                try:
                    ok = sink.close(max(0.0, deadline - time.monotonic())) and ok
                except Exception as exc:  # a sink of the user's own
                    guard.user_error("on_result", exc)
                    ok = False
            return ok
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
