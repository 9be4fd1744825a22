"""Turning one scored record into a span, log events and metric points.

Runs on the background worker only. Metric instruments are shared by every monitor that uses
the same meter provider (``_Instruments.for_provider``), so two monitors never register two
callbacks for the same observable instrument.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

from opentelemetry import metrics, trace
from opentelemetry._logs import LoggerProvider, LogRecord, get_logger_provider
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import Link, NonRecordingSpan, SpanKind, Status, StatusCode, TracerProvider

from .. import _version
from .._fields import EvaluationView, as_evaluation
from .._shared import guard
from .._shared.error_types import exception_type
from ..types import Evaluation, RagRecord
from . import semconv as sc
from ._rate_counters import RateInstruments, RateKey, audit_key, count_scored, rate_key
from ._stats import Stats as Stats

Redactor = Callable[[str], str]

_VERSION = _version.__version__

MAX_CONTENT_CLAIMS = 50
"""Claims listed in ``groundwatch.content.claims``; a final ``{"truncated_claims": n}`` entry
marks the rest."""
MAX_CONTENT_QUOTES = 3
"""Evidence quotes listed per claim."""

# Secrets that must never leave the process even when content capture is on: an error message
# or a retrieved document may carry one.
_SECRET = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]+|(?i:api[_-]?key)\s*[=:]\s*\S+)"
)


def scrub_secrets(text: str) -> str:
    """Replace what looks like an API key or bearer token with ``[REDACTED]``."""
    return _SECRET.sub("[REDACTED]", text)


def cap_content(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, marking the cut (never silent)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[truncated {len(text) - limit} chars]"


_VERDICT_LABELS = ("grounded", "hallucinated", "insufficient_context", "no_claims", "error")


class _Instruments:
    _by_provider: ClassVar[weakref.WeakKeyDictionary[Any, _Instruments]] = (
        weakref.WeakKeyDictionary()
    )
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def for_provider(cls, provider: MeterProvider) -> _Instruments:
        with cls._lock:
            found = cls._by_provider.get(provider)
            if found is None:
                found = cls(provider)
                cls._by_provider[provider] = found
            return found

    def __init__(self, provider: MeterProvider) -> None:
        self.sources: weakref.WeakSet[Stats] = weakref.WeakSet()
        meter = provider.get_meter(sc.INSTRUMENTATION_NAME, _VERSION)
        self.score = meter.create_histogram(
            sc.METRIC_EVALUATION_SCORE,
            unit="1",
            description="Faithfulness and groundedness scores of evaluated answers",
            explicit_bucket_boundaries_advisory=list(sc.SCORE_BUCKETS),
        )
        self.evaluations = meter.create_counter(
            sc.METRIC_EVALUATIONS,
            unit="{evaluation}",
            description="Sampled records scored, by label (label=error: the evaluation failed)",
        )
        self.claims = meter.create_counter(
            sc.METRIC_CLAIMS, unit="{claim}", description="Claims checked, by verdict"
        )
        self.duration = meter.create_histogram(
            sc.METRIC_JUDGE_DURATION,
            unit="s",
            description="Time to judge and score one record",
            explicit_bucket_boundaries_advisory=list(sc.DURATION_BUCKETS),
        )
        self.tokens = meter.create_counter(
            sc.METRIC_JUDGE_TOKENS, unit="{token}", description="Tokens used by the judge"
        )
        for name, unit, description, observe in _OBSERVED_COUNTERS:
            meter.create_observable_counter(
                name,
                callbacks=[functools.partial(observe, self)],
                unit=unit,
                description=description,
            )
        self.rates = RateInstruments(meter, self.sources)
        meter.create_observable_gauge(
            sc.METRIC_QUEUE_SIZE,
            callbacks=[self._observe_queue],
            unit="{record}",
            description="Records waiting for the background worker",
        )

    def _observe_records(self, options: CallbackOptions) -> Iterable[Observation]:
        total: Counter[tuple[str, str | None, str | None]] = Counter()
        for stats in list(self.sources):
            with stats.lock:
                total.update(stats.decisions)
        for (decision, error_type, route), n in total.items():
            attrs = {sc.GROUNDWATCH_DECISION: decision}
            if error_type:
                attrs[sc.ERROR_TYPE] = error_type
            if route is not None:
                attrs[sc.GROUNDWATCH_ROUTE] = route
            yield Observation(n, attrs)

    def _observe_dropped(self, options: CallbackOptions) -> Iterable[Observation]:
        total: Counter[str] = Counter()
        for stats in list(self.sources):
            with stats.lock:
                total.update(stats.dropped)
        # The known label sets at 0 from the start (a counter is not "No data" before its first
        # increment); each stays once counted, so no series ever vanishes.
        for error_type in sc.DROPPED_ERROR_TYPES:
            total.setdefault(error_type, 0)
        for error_type, n in total.items():
            yield Observation(n, {sc.ERROR_TYPE: error_type})

    def _observe_errors(self, options: CallbackOptions) -> Iterable[Observation]:
        for (where, error_type), n in guard.error_counts():
            yield Observation(n, {sc.GROUNDWATCH_COMPONENT: where, sc.ERROR_TYPE: error_type})
        # Each place of failure at 0, without error.type (the exception's class, not known
        # before it happens): distinct from every series above.
        for where in sc.ERROR_COMPONENTS:
            yield Observation(0, {sc.GROUNDWATCH_COMPONENT: where})

    def _observe_escalations(self, options: CallbackOptions) -> Iterable[Observation]:
        total: Counter[tuple[str, bool]] = Counter()
        for stats in list(self.sources):
            for judge in stats.escalating:
                escalated, seen = judge.escalated, judge.total
                total[(judge.name, True)] += escalated
                total[(judge.name, False)] += seen - escalated
        for (name, escalated), n in total.items():
            yield Observation(n, {sc.GROUNDWATCH_ESCALATED: escalated, sc.GROUNDWATCH_JUDGE: name})

    def _observe_feedback(self, options: CallbackOptions) -> Iterable[Observation]:
        total: Counter[tuple[str | None, str | None, str | None, str | None]] = Counter()
        routes: set[str | None] = set()
        for stats in list(self.sources):
            with stats.lock:
                if stats.feedback:
                    total.update(stats.feedback)
                    routes.update(stats.feedback_routes)
        # Once feedback is in use, each route's label pairs at 0 (the agreement rules use
        # increase(), which misses a series' first sample): the judge's verdict labels and
        # unknown, against the two labels a thumbs-up or thumbs-down gives.
        if total:
            for route in routes:
                for judge_label in (*_VERDICT_LABELS, sc.FEEDBACK_JUDGE_UNKNOWN):
                    for human_label in ("grounded", "hallucinated"):
                        total.setdefault((judge_label, human_label, route, None), 0)
        for (judge, human, route, error_type), n in total.items():
            attrs: dict[str, str] = {}
            if judge is not None:
                attrs[sc.GROUNDWATCH_LABEL] = judge
            if human is not None:
                attrs[sc.GROUNDWATCH_FEEDBACK_LABEL] = human
            if route is not None:
                attrs[sc.GROUNDWATCH_ROUTE] = route
            if error_type is not None:
                attrs[sc.ERROR_TYPE] = error_type
            yield Observation(n, attrs)

    def _observe_queue(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(sum(s.queue_size() for s in list(self.sources)))


_Observe = Callable[[_Instruments, CallbackOptions], Iterable[Observation]]

_OBSERVED_COUNTERS: tuple[tuple[str, str, str, _Observe], ...] = (
    # (name, unit, description, what reads the sources' totals): the counters whose totals
    # the monitors keep themselves (in Stats, the guard and the cascade judges), read when the
    # metric reader collects.
    (
        sc.METRIC_RECORDS,
        "{record}",
        "Records seen by the monitor, by sampling decision",
        _Instruments._observe_records,
    ),
    (
        sc.METRIC_DROPPED,
        "{record}",
        "Sampled records never scored (shutdown deadline, fork, lost worker)",
        _Instruments._observe_dropped,
    ),
    (
        sc.METRIC_ERRORS,
        "{error}",
        "groundwatch's own failures, caught and logged",
        _Instruments._observe_errors,
    ),
    (
        sc.METRIC_JUDGE_ESCALATIONS,
        sc.METRIC_JUDGE_ESCALATIONS_UNIT,
        "Answers the cascade judged, by whether they went to the second judge",
        _Instruments._observe_escalations,
    ),
    (
        sc.METRIC_FEEDBACK,
        "{feedback}",
        "Feedback on served answers, by the judge's label and the person's",
        _Instruments._observe_feedback,
    ),
)


class MetricBatch:
    """Counter increments of several evaluations, added once per distinct attribute set.

    Each ``Counter.add`` costs the SDK a measurement object and an attribute lookup (about
    10 us); a batch of evaluations from the worker process shares a handful of attribute sets.
    Histograms still get one point per evaluation (their values differ).
    """

    __slots__ = ("claims", "evaluations", "instruments", "rates", "stats")

    def __init__(self, instruments: _Instruments, stats: Stats) -> None:
        self.instruments = instruments
        self.stats = stats
        self.evaluations: Counter[tuple[tuple[str, Any], ...]] = Counter()
        self.claims: Counter[tuple[tuple[str, str], ...]] = Counter()
        self.rates: dict[RateKey, list[float]] = {}
        """``[scored, flagged, f, f²]`` by route and judge (``groundwatch.rate.*``)."""

    def flush(self) -> None:
        ins = self.instruments
        for key, n in self.evaluations.items():
            ins.evaluations.add(n, dict(key))
        for key, n in self.claims.items():
            ins.claims.add(n, dict(key))
        if self.rates:
            self.stats.rates.merge(self.rates)
        self.evaluations.clear()
        self.claims.clear()
        self.rates.clear()


def _primitive(value: Any) -> Any:
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, (str, bool, int, float)) for v in value
    ):
        return list(value)
    return None


class ReportedError(Exception):
    """A failure already counted and logged where it happened (a ``redact`` that raised)."""


def collect_attributes(
    attrs: dict[str, Any], where: str, family: Iterator[tuple[str, Any]]
) -> None:
    """Put the pairs ``family`` yields into ``attrs`` up to its first exception, which is
    counted and logged (``groundwatch.errors{groundwatch.component="telemetry <where>"}``),
    never raised."""
    try:
        for key, value in family:
            attrs[key] = value
    except ReportedError:
        pass
    except Exception as exc:
        guard.internal_error(f"telemetry {where}", exc, reraise=False)


def user_attributes(record: RagRecord) -> Iterator[tuple[str, Any]]:
    for key, value in (record.attributes or {}).items():
        prim = _primitive(value)
        if isinstance(key, str) and prim is not None:
            yield key, prim


def _score_attributes(
    evaluation: EvaluationView, counts: Mapping[Any, int]
) -> Iterator[tuple[str, Any]]:
    yield sc.GROUNDWATCH_LABEL, evaluation.label
    if evaluation.hallucination_probability is not None:
        yield sc.GROUNDWATCH_HALLUCINATION_PROBABILITY, evaluation.hallucination_probability
    if evaluation.faithfulness is not None:
        yield sc.GROUNDWATCH_FAITHFULNESS, evaluation.faithfulness
    if evaluation.groundedness is not None:
        yield sc.GROUNDWATCH_GROUNDEDNESS, evaluation.groundedness
    if evaluation.label == "error":
        yield sc.ERROR_TYPE, evaluation.error_type or "error"
        raised = exception_type(evaluation.error_type, evaluation.error)
        if raised is not None:
            yield sc.EXCEPTION_TYPE, raised
    else:
        for verdict, n in counts.items():
            yield sc.GROUNDWATCH_CLAIMS_BY_VERDICT[verdict], n


def _record_attributes(
    record: RagRecord, evaluation: EvaluationView, sampling_rate: float | None, audited: bool
) -> Iterator[tuple[str, Any]]:
    yield sc.GROUNDWATCH_RECORD_ID, record.record_id
    yield sc.GROUNDWATCH_JUDGE, evaluation.judge
    if evaluation.model:
        yield sc.GEN_AI_REQUEST_MODEL, evaluation.model
    if record.route is not None:
        yield sc.GROUNDWATCH_ROUTE, record.route
    if sampling_rate is not None:
        yield sc.GROUNDWATCH_SAMPLING_RATE, sampling_rate
    if evaluation.evidence_rejected:
        yield sc.GROUNDWATCH_EVIDENCE_REJECTED, evaluation.evidence_rejected
    if evaluation.truncated:
        yield sc.GROUNDWATCH_TRUNCATED, True
    if audited:
        yield sc.GROUNDWATCH_AUDIT, True


class Telemetry:
    """Emits the span, events and metrics of one evaluation (on the worker thread)."""

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        logger_provider: LoggerProvider | None,
        capture_content: bool,
        redact: Redactor | None,
        content_max_chars: int,
        stats: Stats,
        audit_rate: float = 0.0,
    ) -> None:
        tp = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        mp = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        lp = logger_provider if logger_provider is not None else get_logger_provider()
        self.tracer_provider = tracer_provider
        """As given (``None``: the global one, looked up when it is needed)."""
        self.meter_provider = meter_provider
        self.logger_provider = logger_provider
        self.tracer = tp.get_tracer(sc.INSTRUMENTATION_NAME, _VERSION)
        self.event_logger = lp.get_logger(sc.INSTRUMENTATION_NAME, _VERSION)
        self.instruments = _Instruments.for_provider(mp)
        self.instruments.sources.add(stats)
        self.stats = stats
        self.capture_content = capture_content
        self.redact = redact
        self.content_max_chars = content_max_chars
        self.audit_rate = audit_rate
        """The share of judged answers in the random audit (``Monitor(audit_rate=...)``)."""

    def audited(self, record: RagRecord, evaluation: EvaluationView) -> bool:
        """Whether this evaluation is in the random audit: a judged answer (not ``error``)
        whose trace :func:`groundwatch.rates.is_audited` picks at :attr:`audit_rate`. A record
        scored on request (``always_score``: a thumbs-down) is not a random sample and never
        in it."""
        rate = self.audit_rate
        if not rate or evaluation.label == "error" or record.always_score:
            return False
        from ..rates._audit import is_audited  # the rates package only where audits run

        return is_audited(audit_key(record.trace_id, record.record_id), rate)

    def trace_audited(self, trace_id: int) -> bool:
        """Whether the judged answer of the trace ``trace_id`` is in the random audit: the
        decision :meth:`audited` takes for its record, by the same key."""
        rate = self.audit_rate
        if not rate:
            return False
        from ..rates._audit import is_audited

        return is_audited(audit_key(trace_id, ""), rate)

    # --- span attributes: small generators, each guarded --------------------------------------
    #
    # One family of attributes per generator. ``collect_attributes`` stops a generator at its first
    # exception, logs and counts it, and keeps what it yielded so far: one bad field costs its
    # family, never the span, its events or its metrics (OpenInference's extractors do the same).

    def _span_attributes(
        self,
        record: RagRecord,
        evaluation: EvaluationView,
        sampling_rate: float | None,
        counts: Mapping[Any, int],
        audited: bool,
    ) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if record.attributes:
            collect_attributes(attrs, "user attributes", user_attributes(record))
        collect_attributes(attrs, "score attributes", _score_attributes(evaluation, counts))
        collect_attributes(
            attrs,
            "record attributes",
            _record_attributes(record, evaluation, sampling_rate, audited),
        )
        if self.capture_content:
            # With content capture on, the worker asks for the whole evaluation first.
            full = as_evaluation(evaluation)
            collect_attributes(attrs, "content attributes", self._content_attributes(record, full))
        return attrs

    def _content(self, text: str) -> str:
        if self.redact is not None:
            try:
                text = self.redact(text)
            except Exception as exc:
                guard.user_error("redact", exc)
                raise ReportedError from exc
        return cap_content(scrub_secrets(text), self.content_max_chars)

    def _content_attributes(
        self, record: RagRecord, evaluation: Evaluation
    ) -> Iterator[tuple[str, Any]]:
        if record.question is not None:
            yield sc.GROUNDWATCH_CONTENT_QUESTION, self._content(record.question)
        yield sc.GROUNDWATCH_CONTENT_ANSWER, self._content(record.answer)
        # Each text is capped, not the JSON (a cut JSON document is unreadable).
        claims: list[dict[str, Any]] = [
            {
                "text": self._content(claim.text),
                "verdict": claim.verdict,
                "quotes": [self._content(e.quote) for e in claim.evidence[:MAX_CONTENT_QUOTES]],
                # Which passage each quote is from: "passage 2", "tool lookup_policy".
                "sources": [e.name for e in claim.evidence[:MAX_CONTENT_QUOTES]],
            }
            for claim in evaluation.claims[:MAX_CONTENT_CLAIMS]
        ]
        if len(evaluation.claims) > MAX_CONTENT_CLAIMS:
            claims.append({"truncated_claims": len(evaluation.claims) - MAX_CONTENT_CLAIMS})
        yield sc.GROUNDWATCH_CONTENT_CLAIMS, json.dumps(claims, ensure_ascii=False)

    # --- span ----------------------------------------------------------------------------------

    def _parent(self, record: RagRecord) -> tuple[Context, list[Link]]:
        sc_ = record.span_context
        if sc_ is not None and sc_.is_valid:
            if sc_.trace_flags.sampled:
                # Same trace as the caller's span, even though that span has ended by now: a
                # non-recording wrapper carries its context as the parent.
                return trace.set_span_in_context(NonRecordingSpan(sc_), Context()), []
            # The caller's trace is not sampled: parenting would drop our span with it, so
            # start a trace of our own and link it to the caller's span.
            return Context(), [Link(sc_)]
        return Context(), []

    def _explanation(self, evaluation: EvaluationView) -> str:
        if evaluation.label == "error" and not self.capture_content:
            # A judge's error message may quote the content or an endpoint's reply.
            return f"judge failed: {evaluation.error_type or 'error'}"
        return scrub_secrets(evaluation.explanation)

    def batch(self) -> MetricBatch:
        """A batch for :meth:`emit`'s counter increments; call its ``flush()`` after."""
        return MetricBatch(self.instruments, self.stats)

    def emit(
        self,
        record: RagRecord,
        evaluation: EvaluationView,
        *,
        sampling_rate: float | None,
        start_ns: int,
        end_ns: int,
        batch: MetricBatch | None = None,
        spans: bool = True,
        audited: bool | None = None,
    ) -> None:
        """Emit the span, the two events and the metric points of one finished evaluation.

        ``evaluation`` is an :class:`Evaluation` or the worker process's
        :class:`~groundwatch._fields.EvaluationFields` (its claims are read only with content
        capture on). Counter increments go to ``batch`` when given.
        ``spans=False``: the metric points only (the worker process exported the span and the
        events itself: :mod:`groundwatch.telemetry.worker_export`). ``audited``: the record's
        audit decision when the caller took it already (:meth:`audited`, once per record).
        """
        counts: Mapping[Any, int] = evaluation.verdict_counts
        own = batch is None
        if batch is None:
            batch = self.batch()
        if spans:
            try:
                self.emit_span(record, evaluation, sampling_rate, start_ns, end_ns, counts, audited)
            except Exception as exc:  # the span is lost; the metric points are not
                guard.internal_error("telemetry span", exc, reraise=False)
        # The evaluation counter is the accounting: it is recorded whatever failed above.
        self._record_metrics(record, evaluation, (end_ns - start_ns) / 1e9, counts, batch)
        if own:
            batch.flush()

    def emit_span(
        self,
        record: RagRecord,
        evaluation: EvaluationView,
        sampling_rate: float | None,
        start_ns: int,
        end_ns: int,
        counts: Mapping[Any, int],
        audited: bool | None = None,
    ) -> None:
        """The span and the two log events of one evaluation (no metric points)."""
        parent, links = self._parent(record)
        if audited is None:
            audited = self.audited(record, evaluation)
        span = self.tracer.start_span(
            sc.SPAN_EVALUATION,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=self._span_attributes(record, evaluation, sampling_rate, counts, audited),
            links=links,
            start_time=start_ns,
        )
        try:
            if evaluation.label == "error":
                span.set_status(Status(StatusCode.ERROR, evaluation.error_type or "error"))
            response_id = (
                record.attributes.get(sc.GEN_AI_RESPONSE_ID) if record.attributes else None
            )
            self._emit_events(
                evaluation,
                trace.set_span_in_context(span, Context()),
                timestamp=end_ns,
                response_id=response_id if isinstance(response_id, str) else None,
                audited=audited,
            )
        except Exception as exc:  # the events are lost; the span and the metrics are not
            guard.internal_error("telemetry events", exc, reraise=False)
        finally:
            span.end(end_time=end_ns)

    def _emit_events(
        self,
        evaluation: EvaluationView,
        ctx: Context,
        *,
        timestamp: int,
        response_id: str | None = None,
        audited: bool = False,
    ) -> None:
        # What both events share is built once; the SDK copies the attributes it is given.
        shared: dict[str, Any] = {
            sc.GEN_AI_EVALUATION_SCORE_LABEL: evaluation.label,
            sc.GEN_AI_EVALUATION_EXPLANATION: self._explanation(evaluation),
        }
        if response_id is not None:
            # The conventions: parented to the evaluated operation's span, or naming its
            # completion. Ours hang under the evaluation span, so they name the completion.
            shared[sc.GEN_AI_RESPONSE_ID] = response_id
        if evaluation.label == "error":
            shared[sc.ERROR_TYPE] = evaluation.error_type or "error"
        if evaluation.hallucination_probability is not None:
            shared[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] = evaluation.hallucination_probability
        if audited:
            shared[sc.GROUNDWATCH_AUDIT] = True
        emit = self.event_logger.emit
        for name, value in (
            (sc.EVALUATION_FAITHFULNESS, evaluation.faithfulness),
            (sc.EVALUATION_GROUNDEDNESS, evaluation.groundedness),
        ):
            attrs = {sc.GEN_AI_EVALUATION_NAME: name, **shared}
            if value is not None:
                attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] = value
            emit(
                LogRecord(
                    timestamp=timestamp,
                    event_name=sc.EVENT_EVALUATION_RESULT,
                    attributes=attrs,
                    context=ctx,
                )
            )

    def _record_metrics(
        self,
        record: RagRecord,
        evaluation: EvaluationView,
        seconds: float,
        counts: Mapping[Any, int],
        batch: MetricBatch,
    ) -> None:
        ins = self.instruments
        route = record.route
        judge = evaluation.judge
        for name, value in (
            (sc.EVALUATION_FAITHFULNESS, evaluation.faithfulness),
            (sc.EVALUATION_GROUNDEDNESS, evaluation.groundedness),
        ):
            if value is not None:
                attrs = {sc.GEN_AI_EVALUATION_NAME: name, sc.GROUNDWATCH_JUDGE: judge}
                if route is not None:
                    attrs[sc.GROUNDWATCH_ROUTE] = route
                ins.score.record(value, attrs)
        route_key: tuple[tuple[str, str], ...] = (
            ((sc.GROUNDWATCH_ROUTE, route),) if route is not None else ()
        )
        duration_attrs: dict[str, str] = {sc.GROUNDWATCH_JUDGE: judge}
        # A cut input is counted where scores are: a dashboard sums
        # groundwatch_evaluations_total{groundwatch_truncated="true"} beside the labels.
        cut_key: tuple[tuple[str, Any], ...] = (
            ((sc.GROUNDWATCH_TRUNCATED, True),) if evaluation.truncated else ()
        )
        if evaluation.label == "error":
            error_type = evaluation.error_type or "error"
            key = (
                (sc.GROUNDWATCH_LABEL, "error"),
                *route_key,
                (sc.ERROR_TYPE, error_type),
                *cut_key,
            )
            batch.evaluations[key] += 1
            duration_attrs[sc.ERROR_TYPE] = error_type
        else:
            key = ((sc.GROUNDWATCH_LABEL, evaluation.label), *route_key, *cut_key)
            batch.evaluations[key] += 1
            if not record.always_score:  # the rate's population: a random share of traffic
                rates = rate_key(route, judge)
                count_scored(
                    batch.rates,
                    rates,
                    evaluation.label == "hallucinated",
                    evaluation.hallucination_probability,
                )
                if self.audit_rate:
                    # The audit sums of this route and judge at 0 from now on (read when the
                    # SDK collects), ahead of the first label.
                    self.stats.audit.expect(rates)
        for verdict, n in counts.items():
            if n:
                key = ((sc.GROUNDWATCH_VERDICT, verdict), *route_key)
                batch.claims[key] += n
        ins.duration.record(seconds, duration_attrs)
        usage = evaluation.usage
        if usage is not None:
            if usage.input_tokens:
                ins.tokens.add(usage.input_tokens, {sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_INPUT})
            if usage.output_tokens:
                ins.tokens.add(usage.output_tokens, {sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_OUTPUT})
