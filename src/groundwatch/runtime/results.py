"""What happens to a scored record, on the worker thread: :class:`Results`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .. import _guard
from .._wire import as_evaluation
from ..telemetry import Telemetry
from ..types import Evaluation, RagRecord
from .feedback import Verdict, VerdictMemory
from .runner import NO_PACING, Pacer, Scored
from .sampling import Sampler, inner_samplers, record_sampling_rate

ResultCallback = Callable[[RagRecord, Evaluation], None]
"""``on_result(record, evaluation)``: runs on the worker thread for every scored record."""


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

    def add_callback(self, callback: ResultCallback) -> None:
        # A new list, not an append: the worker may be iterating the old one.
        self.callbacks = [*self.callbacks, callback]

    def finish(
        self, records: Sequence[RagRecord], results: Sequence[Scored], pacer: Pacer = NO_PACING
    ) -> None:
        """Finish each record with its result (same order)."""
        # An evaluation from the worker process (EvaluationFields) becomes the pydantic
        # Evaluation (with its claims) only for code that reads it: user code here, content
        # capture in the emitter (built once either way).
        telemetry = self.telemetry
        verdicts = self.verdicts
        need_full = bool(self.observers or self.callbacks)
        batch = telemetry.batch()
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
                _guard.user_error("sampler", exc)
            try:
                telemetry.emit(
                    record,
                    evaluation,
                    sampling_rate=rate,
                    start_ns=result.start_ns,
                    end_ns=result.end_ns,
                    batch=batch,
                    spans=not result.exported,
                )
            except Exception as exc:
                _guard.internal_error("telemetry", exc, reraise=False)
            if verdicts is not None:
                try:
                    verdicts.remember(
                        record.trace_id,
                        Verdict(
                            evaluation.label,
                            record.route,
                            record.span_id,
                            int(record.span_context.trace_flags) if record.span_context else 0,
                            evaluation.judge,
                            evaluation.hallucination_probability,
                            telemetry.audited(record, evaluation),
                        ),
                    )
                except Exception as exc:
                    _guard.internal_error("feedback", exc, reraise=False)
            if full is None:
                continue
            for callback in self.callbacks:
                try:
                    callback(record, full)
                except BaseException as exc:  # user code: even SystemExit must not end the worker
                    _guard.user_error("on_result", exc)
        try:
            batch.flush()
        except Exception as exc:
            _guard.internal_error("telemetry", exc, reraise=False)
