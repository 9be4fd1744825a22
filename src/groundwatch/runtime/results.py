"""What happens to a scored record, on the worker thread: :class:`Results`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import _logs, metrics, trace

from .._fields import EvaluationView, as_evaluation
from .._shared import config, guard
from .._shared.error_types import exception_type
from ..telemetry import Telemetry
from ..telemetry._rate_counters import audit_key
from ..types import Evaluation, RagRecord
from .feedback import Verdict, VerdictMemory
from .runners.contract import NO_PACING, Pacer, RunnerResult
from .sampling import Sampler, inner_samplers, record_sampling_rate

ResultCallback = Callable[[RagRecord, Evaluation], None]
"""``on_result(record, evaluation)``: runs on the worker thread for every scored record."""


class AuditDecision:
    """One audit decision per record, taken once and read by everyone who finishes it: the span,
    the events, the verdict memory and the bound callbacks (a
    :class:`~groundwatch.DatasetSink`'s audit file, a dashboard sink). :class:`Results` and
    ``groundwatch worker``'s consumer (``queue/consumer.py``) each hold one.

    :meth:`decide` takes the decision for the record being finished; calling the object (the
    ``audited`` a callback is bound with) returns that decision for that record, and takes it
    afresh only for another record (a callback that calls it later, from its own thread).
    """

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry
        self._deciding: tuple[RagRecord | None, bool] = (None, False)
        """The record being finished and its audit decision."""

    def decide(self, record: RagRecord, evaluation: EvaluationView) -> bool:
        """Take the record's decision (:meth:`Telemetry.audited
        <groundwatch.telemetry.Telemetry.audited>`) and keep it for the readers that follow."""
        audited = self._telemetry.audited(record, evaluation)
        self._deciding = (record, audited)
        return audited

    def __call__(self, record: RagRecord, evaluation: EvaluationView) -> bool:
        deciding, audited = self._deciding
        if record is deciding:
            return audited
        return self._telemetry.audited(record, evaluation)


class Results:
    """For each finished record, in order: the sampler's observers (adaptive samplers learn
    from scores), :meth:`Telemetry.emit <groundwatch.telemetry.Telemetry.emit>` (span, events,
    metric points), then the ``on_result`` callbacks.

    User code (observers, callbacks) that raises anything, ``SystemExit`` included, is logged
    and counted in ``groundwatch.errors`` and the record stays evaluated; the worker goes on.
    """

    def __init__(
        self,
        sampler: Sampler,
        telemetry: Telemetry,
        callbacks: Sequence[ResultCallback],
        verdicts: VerdictMemory | None = None,
    ) -> None:
        self.sampler = sampler
        self.verdicts = verdicts
        """Where each record's label is remembered for ``Monitor.feedback`` (ids and labels)."""
        self.telemetry = telemetry
        self.callbacks: list[ResultCallback] = list(callbacks)
        self.observers: list[Callable[[RagRecord, Evaluation], None]] = [
            observe
            for observe in (getattr(x, "observe", None) for x in inner_samplers(sampler))
            if callable(observe)
        ]
        self._looked_for_sdk = False
        self.audit = AuditDecision(telemetry)
        """The audit decision of the record being finished, for the callbacks that ask."""
        self.bound: list[Any] = []
        """Callbacks that asked for the monitor's settings (``bind_monitor``): flushed and
        closed with the monitor, so that what they buffered is written at shutdown."""
        for callback in self.callbacks:
            self._bind(callback)

    def add_callback(self, callback: ResultCallback) -> None:
        """Add an ``on_result`` callback (see :meth:`_bind`)."""
        self._bind(callback)
        # A new list, not an append: the worker may be iterating the old one.
        self.callbacks = [*self.callbacks, callback]

    def _bind(self, callback: ResultCallback) -> None:
        """Hand a callback that asks for it (``bind_monitor``) the monitor's content settings
        and its audit decision: a :class:`~groundwatch.DatasetSink` writes content only as the
        monitor captures it, and the audited answers the span marks."""
        bind = getattr(callback, "bind_monitor", None)
        if callable(bind):
            telemetry = self.telemetry
            bind(
                capture_content=telemetry.capture_content,
                redact=telemetry.redact,
                audited=self.audited,
                audit_rate=telemetry.audit_rate,
            )
            self.bound = [*self.bound, callback]

    def audited(self, record: RagRecord, evaluation: EvaluationView) -> bool:
        """The record's audit decision: the one :meth:`finish` took for it (once per record,
        shared by the span, the events, the verdict memory and the callbacks), else taken
        now."""
        return self.audit(record, evaluation)

    def flush_bound(self, deadline: float) -> bool:
        """Flush the bound callbacks by ``deadline`` (``time.monotonic()``)."""
        return all(sink.flush(max(0.0, deadline - time.monotonic())) for sink in self.bound)

    def close_bound(self, deadline: float) -> bool:
        """Close the bound callbacks by ``deadline``; one that raises is the user's fault,
        counted, and the others still close."""
        ok = True
        for sink in self.bound:
            try:
                ok = sink.close(max(0.0, deadline - time.monotonic())) and ok
            except Exception as exc:  # a sink of the user's own
                guard.user_error("on_result", exc)
                ok = False
        return ok

    def finish(
        self,
        records: Sequence[RagRecord],
        results: Sequence[RunnerResult],
        pacer: Pacer = NO_PACING,
    ) -> None:
        """Finish each record with its result (same order)."""
        # An evaluation from the worker process (EvaluationFields) becomes the pydantic
        # Evaluation (with its claims) only for code that reads it: user code here, content
        # capture in the emitter (built once either way).
        telemetry = self.telemetry
        verdicts = self.verdicts
        need_full = bool(self.observers or self.callbacks)
        batch = telemetry.batch()
        if not self._looked_for_sdk:
            self._looked_for_sdk = True
            say_if_nowhere(telemetry)
        pacer.start()
        for record, result in zip(records, results, strict=True):
            pacer.maybe()
            evaluation = result.evaluation
            full = as_evaluation(evaluation) if need_full else None
            rate: float | None = None
            try:
                if full is not None:
                    for observe in self.observers:
                        observe(record, full)
                rate = record_sampling_rate(self.sampler, record)
            except BaseException as exc:  # user code: even SystemExit must not end the worker
                guard.user_error("sampler", exc)
            audited = False
            try:
                # One audit decision per record, by one key: the span, the events, the verdict
                # memory and the callbacks (a DatasetSink's audit file) all read this one.
                audited = self.audit.decide(record, evaluation)
                telemetry.emit(
                    record,
                    evaluation,
                    sampling_rate=rate,
                    start_ns=result.start_ns,
                    end_ns=result.end_ns,
                    batch=batch,
                    spans=not result.exported,
                    audited=audited,
                )
            except Exception as exc:
                guard.internal_error("telemetry", exc, reraise=False)
            if evaluation.label == "error":
                say_failed(evaluation)
            if verdicts is not None:
                try:
                    verdicts.remember(
                        # A record without a trace by its record id's digest, as its audit
                        # row's id names it to feedback().
                        audit_key(record.trace_id, record.record_id),
                        Verdict(
                            evaluation.label,
                            record.route,
                            record.span_id,
                            int(record.span_context.trace_flags) if record.span_context else 0,
                            evaluation.judge,
                            evaluation.hallucination_probability,
                            audited,
                        ),
                    )
                except Exception as exc:
                    guard.internal_error("feedback", exc, reraise=False)
            if full is None:
                continue
            for callback in self.callbacks:
                try:
                    callback(record, full)
                except BaseException as exc:  # user code: even SystemExit must not end the worker
                    guard.user_error("on_result", exc)
        try:
            batch.flush()
        except Exception as exc:
            guard.internal_error("telemetry", exc, reraise=False)


_HINTS = {
    "timeout": "; raise evaluation_timeout_millis (GROUNDWATCH_EVALUATION_TIMEOUT_MILLIS) or "
    "use a faster judge",
    "internal": "; the span's exception.type names the exception, the 'groundwatch' logger at "
    "DEBUG has its traceback",
}


def say_failed(evaluation: EvaluationView) -> None:
    """Say the first failed evaluation of each ``error.type`` once per process (a
    :class:`~groundwatch.LossWarning` on stderr): a judge that raises on every answer otherwise
    shows only as ``label=error`` in the telemetry. The judge's message is not repeated (it may
    quote the content); its exception's class is."""
    error_type = evaluation.error_type or "error"
    raised = exception_type(evaluation.error_type, evaluation.error)
    because = f", exception.type={raised}" if raised else ""
    guard.say_once(
        f"evaluation failed:{error_type}",
        f"groundwatch: judge {evaluation.judge} failed an evaluation (error.type={error_type}"
        f"{because}); failed evaluations are counted as groundwatch.evaluations"
        f"{{groundwatch.label=error}}{_HINTS.get(error_type, '')}",
    )


def _placeholder(given: Any, global_provider: Callable[[], Any]) -> bool:
    """Whether a provider (as given, else the global one now) is one of the OpenTelemetry
    API's own no-op or proxy providers: nothing it is handed goes anywhere."""
    provider = given if given is not None else global_provider()
    return type(provider).__module__.split(".")[:2] in (
        ["opentelemetry", "trace"],
        ["opentelemetry", "metrics"],
        ["opentelemetry", "_logs"],
    )


def say_if_nowhere(telemetry: Telemetry) -> None:
    """Say once (a :class:`~groundwatch.ConfigWarning`) when no OpenTelemetry SDK is set up
    as the first evaluation is emitted: its span, events and metric points would go nowhere.
    Looked at then, not in ``Monitor()``: providers set after the monitor count."""
    if (
        _placeholder(telemetry.tracer_provider, trace.get_tracer_provider)
        and _placeholder(telemetry.meter_provider, metrics.get_meter_provider)
        and _placeholder(telemetry.logger_provider, _logs.get_logger_provider)
    ):
        guard.say_once(
            "no sdk",
            "groundwatch: no OpenTelemetry SDK is set up (no tracer, meter or logger provider): "
            "evaluations are scored but their spans, events and metrics go nowhere; set the "
            "SDK's providers up (README, 'Send it to your OpenTelemetry backend') or run the "
            "app under opentelemetry-instrument",
            config.ConfigWarning,
        )
