"""``Monitor.feedback``: a person's verdict on an answer served earlier, beside the judge's.

Three parts, each cheap on the caller's thread:

- :class:`VerdictMemory`: the judge's verdict on the last ``capacity`` scored traces (trace id,
  span id, trace flags, label, route, judge, probability and whether the answer is in the
  random audit: ids, labels and numbers only, never content), filled on the worker thread by
  :class:`~.results.Results` and read by :meth:`Feedback.give`.
- the ``groundwatch.feedback`` counter, counted on the caller's thread in :class:`Stats`
  (plain integers under a lock; the SDK reads them when it collects), with the judge's label
  (``unknown`` when the memory has no verdict for the trace) and the person's.
- the ``groundwatch.audit.*`` sums (:mod:`groundwatch.telemetry._rate_counters`), for a label with
  ``source="audit"`` on an audited answer only: feedback that is not a random sample (a
  thumbs-down) never enters the hallucination-rate estimate.
- :class:`FeedbackEvents`: the ``gen_ai.evaluation.result`` log record of each feedback,
  built and emitted on a thread of its own, so a slow log exporter never holds up the caller.
  The caller appends to a bounded ``deque`` and wakes that thread only when it sleeps.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from opentelemetry._logs import LogRecord
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from .._shared import guard
from .._shared.weakhooks import reinit_after_fork
from ..telemetry import ReportedError, Stats, Telemetry
from ..telemetry import semconv as sc
from ..telemetry._rate_counters import audit_key, prediction, rate_key
from ._background import BackgroundQueue

DEFAULT_MEMORY = 10_000
"""RunnerResult traces whose verdict the monitor remembers (about 240 bytes each)."""

MAX_PENDING_EVENTS = 4096
"""Feedback events waiting for their thread; more are dropped and counted in
``groundwatch.errors{groundwatch.component="feedback", error.type="queue_full"}``."""

STAY_AWAKE_S = 1.0
"""After its last event the events thread looks at its queue every ``POLL_S`` for this long
before it sleeps until :meth:`FeedbackEvents.submit` wakes it (a wake-up is a system call on
the caller's thread: under steady feedback, nobody pays for one)."""
POLL_S = 0.2

HUMAN_LABELS: Mapping[str, str] = {
    "grounded": "grounded",
    "faithful": "grounded",
    "hallucinated": "hallucinated",
    "unfaithful": "hallucinated",
}
"""Labels a person may give: the two classes of ``groundwatch check``'s human labels, in the
spellings it accepts, mapped onto the judge's vocabulary (a metric attribute, so a closed
set)."""

KNOWN_SOURCES = frozenset({"audit", "human", "llm_judge", "deterministic"})
"""The sources docs/feedback.md names, matched whatever their case (``"Audit"`` is ``audit``)."""

SOURCE_TO_EVALUATOR_TYPE: Mapping[str, str] = {
    "human": "human",
    "llm_judge": "llm_judge",
    "deterministic": "deterministic",
}
"""``gen_ai.evaluation.evaluator.type`` (proposed in the GenAI semantic conventions' PR #359)
for the sources that name one; other sources carry ``groundwatch.feedback.source`` only."""

_TRACE_FLAGS_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class Verdict(NamedTuple):
    """What the memory keeps of one scored record: ids, its label and numbers, never content."""

    label: str
    route: str | None
    span_id: int
    trace_flags: int
    judge: str = ""
    probability: float | None = None
    """The judge's ``hallucination_probability``."""
    audited: bool = False
    """The answer is in the random audit (``groundwatch.audit=true`` on its evaluation)."""


class VerdictMemory:
    """The judge's verdict of the last ``capacity`` scored traces, by trace id.

    A dict in insertion order: a new verdict goes last, the oldest goes when the memory is
    full; a trace scored again (an agent's second turn) moves to the end with its newest
    label. Written on the worker thread, read on callers' threads, under one lock held for a
    dict operation or two.
    """

    __slots__ = ("__weakref__", "_labelled", "_lock", "_stats", "_verdicts", "capacity", "routes")

    MAX_ROUTES = 64
    """Routes remembered for the zero series of ``groundwatch.feedback`` (a cap: routes are
    meant to be few, and a bug that made them many must not make the metric unbounded)."""

    def __init__(self, capacity: int = DEFAULT_MEMORY, stats: Stats | None = None) -> None:
        if capacity < 0:
            raise ValueError(f"feedback_memory must be >= 0, got {capacity!r}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._verdicts: dict[int, Verdict] = {}
        self._labelled: set[int] = set()
        """Remembered audited traces whose audit label has been counted (one label each)."""
        self._stats = stats
        self.routes: frozenset[str | None] = frozenset()
        """Routes of the verdicts seen so far (at most ``MAX_ROUTES``); replaced, never
        changed in place, so the metric callback reads it without a lock."""

    def remember(self, trace_id: int, verdict: Verdict) -> None:
        """Keep the judge's ``verdict`` on ``trace_id`` (worker thread)."""
        if not trace_id or not self.capacity:
            return
        route = verdict.route
        verdicts = self._verdicts
        with self._lock:
            verdicts.pop(trace_id, None)
            verdicts[trace_id] = verdict
            if len(verdicts) > self.capacity:
                oldest = next(iter(verdicts))
                del verdicts[oldest]
                self._labelled.discard(oldest)
            if route not in self.routes and len(self.routes) < self.MAX_ROUTES:
                self.routes = self.routes | {route}
                if self._stats is not None:
                    self._stats.feedback_routes = self.routes

    def recall(self, trace_id: int) -> Verdict | None:
        """The judge's verdict for ``trace_id``, if still remembered."""
        with self._lock:
            return self._verdicts.get(trace_id)

    def first_label(self, trace_id: int) -> bool:
        """Mark the audited ``trace_id`` labelled; ``False`` when it was already (a second
        label of the same answer must not count twice in the estimate)."""
        with self._lock:
            if trace_id in self._labelled:
                return False
            self._labelled.add(trace_id)
            return True

    def __len__(self) -> int:
        return len(self._verdicts)

    def reinit_after_fork(self) -> None:
        self._lock = threading.Lock()


class Pending(NamedTuple):
    """One feedback event waiting for the events thread."""

    trace_id: int
    span_id: int
    trace_flags: int
    name: str
    label: str
    score: float | None
    source: str
    comment: str | None
    judge_label: str
    route: str | None
    timestamp_ns: int
    probability: float | None = None
    """The judge's probability, on an audit label's event."""
    audited: bool = False
    """The label entered the audit counters."""


class FeedbackEvents:
    """Emits the feedback log records on a daemon thread of their own (see module docstring)."""

    def __init__(self, telemetry: Telemetry, max_pending: int = MAX_PENDING_EVENTS) -> None:
        self.telemetry = telemetry
        self.max_pending = max_pending
        self.listeners: list[Callable[[Pending], None]] = []
        """Sinks that write each feedback elsewhere too (``on_feedback`` of a dashboard sink),
        called on this thread after its event; replaced, never changed in place."""
        self._queue: BackgroundQueue[Pending] = BackgroundQueue(
            "groundwatch-feedback",
            self._emit_all,
            max_items=max_pending,
            poll_s=POLL_S,
            stay_awake_s=STAY_AWAKE_S,
        )

    @property
    def closed(self) -> bool:
        """Whether the monitor has closed it (later feedback is refused)."""
        return self._queue.closed

    def submit(self, item: Pending) -> bool:
        """Queue one event; ``False`` when the queue is full or closed (the caller counts)."""
        return self._queue.offer(item)

    def _emit_all(self, items: list[Pending]) -> None:
        for item in items:
            try:
                self.emit(item)
            except Exception as exc:
                guard.internal_error("feedback", exc, reraise=False)
            for listener in self.listeners:
                try:
                    listener(item)
                except Exception as exc:  # a sink of the user's own
                    guard.user_error("on_result", exc)

    def emit(self, item: Pending) -> None:
        """The ``gen_ai.evaluation.result`` log record of one feedback, in the answer's trace."""
        telemetry = self.telemetry
        attrs: dict[str, Any] = {
            sc.GEN_AI_EVALUATION_NAME: item.name,
            sc.GEN_AI_EVALUATION_SCORE_LABEL: item.label,
            sc.GROUNDWATCH_FEEDBACK_SOURCE: item.source,
            sc.GROUNDWATCH_LABEL: item.judge_label,
        }
        evaluator_type = SOURCE_TO_EVALUATOR_TYPE.get(item.source)
        if evaluator_type is not None:
            attrs[sc.GEN_AI_EVALUATION_EVALUATOR_TYPE] = evaluator_type
        if item.score is not None:
            attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] = item.score
        if item.route is not None:
            attrs[sc.GROUNDWATCH_ROUTE] = item.route
        if item.audited:
            attrs[sc.GROUNDWATCH_AUDIT] = True
            if item.probability is not None:
                attrs[sc.GROUNDWATCH_HALLUCINATION_PROBABILITY] = item.probability
        if item.comment is not None and telemetry.capture_content:
            # A person's words may quote the answer or name a customer: content rules apply
            # (redact, secrets scrubbed, capped), and none of it without content capture.
            # A redact hook that raised is counted as its error; the comment is left out.
            with contextlib.suppress(ReportedError):
                attrs[sc.GEN_AI_EVALUATION_EXPLANATION] = telemetry._content(item.comment)
        telemetry.event_logger.emit(
            LogRecord(
                timestamp=item.timestamp_ns,
                # The answer's trace; with no span id known, the span context is not "valid"
                # but the record still carries the trace id.
                context=set_span_in_context(
                    NonRecordingSpan(
                        SpanContext(
                            item.trace_id,
                            item.span_id,
                            is_remote=True,
                            trace_flags=TraceFlags(item.trace_flags),
                        )
                    ),
                    Context(),
                ),
                event_name=sc.EVENT_EVALUATION_RESULT,
                attributes=attrs,
            )
        )

    # --- lifecycle -----------------------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """Wait until every event queued so far is emitted; ``False`` past the deadline."""
        return self._queue.flush(timeout_s)

    def close(self, timeout_s: float) -> bool:
        """Emit what is queued within the deadline, then stop the thread."""
        ok, lost = self._queue.close(timeout_s)
        if lost:
            guard.user_fault(
                "feedback",
                sc.ERROR_SHUTDOWN,
                "groundwatch: %d feedback events not emitted by the shutdown deadline",
                lost,
            )
        return ok


class AnswerIds(NamedTuple):
    """The answer a feedback names: the key its verdict and audit are kept by, and the ids its
    event carries."""

    key: int
    """The trace id; for a record made outside a span, a digest of its record id
    (:func:`~groundwatch.telemetry._rate_counters.audit_key`, what the audit hashes)."""
    trace_id: int
    """``0`` for a record without a trace (its event then carries none)."""
    span_id: int
    trace_flags: int


def parse_trace(trace_id: Any, span_context: Any) -> AnswerIds | str:
    """The answer that ``feedback`` was given, or what is wrong.

    ``span_context`` wins; ``trace_id`` may be the 32-hex string of a trace id (as in a
    ``traceparent`` header or a log line), the int, a ``SpanContext``, or the 16-hex record id
    of a record made outside a span (the ``id`` of its dataset row).
    """
    if span_context is not None:
        if not isinstance(span_context, SpanContext):
            return f"span_context must be a SpanContext, got {type(span_context).__name__}"
        trace_id = span_context
    if isinstance(trace_id, SpanContext):
        if not trace_id.is_valid:
            return "the SpanContext is not valid (no trace id)"
        value = trace_id.trace_id
        return AnswerIds(value, value, trace_id.span_id, int(trace_id.trace_flags))
    if trace_id is None:
        return "trace_id or span_context is required (the trace of the answer)"
    if isinstance(trace_id, str):
        text = trace_id.strip().lower()
        if len(text) == RECORD_ID_DIGITS and _is_hex(text):
            return AnswerIds(audit_key(0, text), 0, 0, int(_TRACE_FLAGS_SAMPLED))
        if len(text) != 32:
            return (
                f"trace_id must be 32 hex digits (or a record's 16-hex id), got "
                f"{len(text)} characters"
            )
        if not _is_hex(text):
            return "trace_id must be 32 hex digits"
        value = int(text, 16)
    elif isinstance(trace_id, int) and not isinstance(trace_id, bool):
        value = trace_id
    else:
        kind = type(trace_id).__name__
        return f"trace_id must be a 32-hex string, an int or a SpanContext, got {kind}"
    if not 0 < value < 1 << 128:
        return "trace_id must be a non-zero 128-bit id"
    return AnswerIds(value, value, 0, int(_TRACE_FLAGS_SAMPLED))


RECORD_ID_DIGITS = 16
"""A record id's length in hex digits (``RagRecord.record_id``)."""


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def source_name(source: str) -> str:
    """``source`` as documented: the known sources (``audit``, ``human``, ``llm_judge``,
    ``deterministic``) in any case and spacing; another system's name as given."""
    folded = source.strip().lower()
    return folded if folded in KNOWN_SOURCES else source


def say_bad_feedback(kind: str, message: str, *, invalid: bool = True) -> None:
    """Warn about one bad ``feedback()`` call: a log line and a :class:`LossWarning`, at most
    once a minute for each kind of mistake (not once per process: the next, different
    mistake is said too). ``invalid``: arguments that cannot be read (counted as
    ``invalid_input``), else a label counted as feedback that was meant for the audit."""
    if invalid:
        message = f"invalid input to Monitor.feedback, counted as invalid_input: {message}"
    else:
        message = f"Monitor.feedback: {message}"
    guard.say_every_interval(f"feedback:{kind}", f"groundwatch: {message}")


class Feedback:
    """What :meth:`Monitor.feedback <groundwatch.Monitor.feedback>` does; see the module."""

    def __init__(
        self,
        telemetry: Telemetry,
        stats: Stats,
        *,
        memory: int = DEFAULT_MEMORY,
        route: str | None = None,
    ) -> None:
        self.memory = VerdictMemory(memory, stats)
        self.events = FeedbackEvents(telemetry)
        self.stats = stats
        self.route = route
        reinit_after_fork(self.memory.reinit_after_fork)

    def invalid(
        self, label: Any, name: Any, score: Any, source: Any, comment: Any
    ) -> tuple[str, str] | None:
        """``(kind, what is wrong)`` with the other arguments, or ``None``."""
        if label is None:
            return "label", "label is missing (feedback(label='hallucinated', trace_id=...))"
        if not isinstance(label, str) or label.strip().lower() not in HUMAN_LABELS:
            return "label", f"label must be one of {', '.join(sorted(HUMAN_LABELS))}, got {label!r}"
        if not isinstance(name, str) or not name:
            return "name", f"name must be a non-empty string, got {name!r}"
        if not isinstance(source, str) or not source.strip():
            return "source", f"source must be a non-empty string, got {source!r}"
        if score is not None and (
            isinstance(score, bool)
            or not isinstance(score, (int, float))
            or not math.isfinite(score)
        ):
            return "score", f"score must be a finite number or None, got {score!r}"
        if comment is not None and not isinstance(comment, str):
            return "comment", f"comment must be a string or None, got {type(comment).__name__}"
        return None

    def give(
        self,
        label: Any,
        trace_id: Any,
        span_context: Any,
        score: Any,
        name: Any,
        source: Any,
        comment: Any,
    ) -> None:
        """Count the feedback and queue its event (caller's thread; see the module)."""
        problem = self.invalid(label, name, score, source, comment)
        ids = parse_trace(trace_id, span_context) if problem is None else problem[1]
        if isinstance(ids, str):
            say_bad_feedback(problem[0] if problem else "trace_id", ids)
            self.stats.count_feedback(None, None, None, sc.ERROR_INVALID_INPUT)
            return
        if self.events.closed:
            # As record() after shutdown: counted, nothing emitted.
            say_bad_feedback(
                "shutdown",
                "feedback() after shutdown() is counted (error.type=shutdown), not emitted",
                invalid=False,
            )
            self.stats.count_feedback(None, None, None, sc.ERROR_SHUTDOWN)
            return
        source = source_name(source)
        verdict = self.memory.recall(ids.key)
        audit = source == sc.GROUNDWATCH_FEEDBACK_AUDIT_SOURCE
        labelled = audit and verdict is not None and verdict.audited
        if labelled and not self.memory.first_label(ids.key):
            labelled = False
            say_bad_feedback(
                "audit_repeated",
                "a second audit label of the same answer is counted as feedback, not in the "
                'audit (one label per answer; docs/feedback.md "Audits")',
                invalid=False,
            )
        elif audit and not labelled:
            say_bad_feedback(
                "audit_unknown",
                "feedback(source='audit') on an answer that is not an audited answer this "
                "monitor remembers: counted as feedback, not in the audit (docs/feedback.md "
                '"Audits")',
                invalid=False,
            )
        self.count(
            ids.trace_id,
            ids.span_id,
            ids.trace_flags,
            HUMAN_LABELS[label.strip().lower()],
            verdict,
            audited=labelled,
            score=None if score is None else float(score),
            name=name,
            source=source,
            comment=comment,
        )

    def count(
        self,
        trace: int,
        span_id: int,
        flags: int,
        human: str,
        verdict: Verdict | None,
        *,
        audited: bool,
        score: float | None = None,
        name: str = sc.EVALUATION_GROUNDEDNESS,
        source: str = "human",
        comment: str | None = None,
    ) -> None:
        """Count one readable feedback (and, when ``audited``, its audit sums) and queue its
        event: :meth:`give`'s second half, and ``groundwatch feedback import``'s, which
        reads the judge's verdict from the labelled row instead of the memory."""
        self.tally(human, verdict, audited=audited)
        item = self.pending(
            trace,
            span_id,
            flags,
            human,
            verdict,
            audited=audited,
            score=score,
            name=name,
            source=source,
            comment=comment,
        )
        if not self.events.submit(item):
            guard.user_fault(
                "feedback",
                "queue_full",
                "groundwatch: feedback events arrive faster than they are emitted; one was "
                "dropped (the groundwatch.feedback counter has it)",
            )

    def tally(self, human: str, verdict: Verdict | None, *, audited: bool) -> None:
        """Count one readable feedback in ``groundwatch.feedback`` and, when ``audited``, in
        the audit sums (without its event)."""
        if verdict is not None:
            judge, route = verdict.label, verdict.route
            if audited:
                flagged = verdict.label == "hallucinated"
                self.stats.audit.add(
                    rate_key(route, verdict.judge),
                    human == "hallucinated",
                    flagged,
                    prediction(flagged, verdict.probability),
                )
        else:
            judge, route = sc.FEEDBACK_JUDGE_UNKNOWN, self.route
        self.stats.count_feedback(judge, human, route)

    def pending(
        self,
        trace: int,
        span_id: int,
        flags: int,
        human: str,
        verdict: Verdict | None,
        *,
        audited: bool,
        score: float | None = None,
        name: str = sc.EVALUATION_GROUNDEDNESS,
        source: str = "human",
        comment: str | None = None,
    ) -> Pending:
        """The event of one readable feedback, for :meth:`FeedbackEvents.emit`."""
        if verdict is not None:
            judge, route = verdict.label, verdict.route
            if not span_id:
                # The span the evaluation was about: where the evaluation's own events point.
                span_id, flags = verdict.span_id, verdict.trace_flags
        else:
            judge, route = sc.FEEDBACK_JUDGE_UNKNOWN, self.route
        return Pending(
            trace,
            span_id,
            flags,
            name,
            human,
            None if score is None else float(score),
            source,
            comment,
            judge,
            route,
            time.time_ns(),
            verdict.probability if verdict is not None else None,
            audited,
        )

    def listen(self, sink: object) -> None:
        """Hand each feedback to ``sink.on_feedback`` too, if it has one (a dashboard sink
        among the monitor's ``on_result``: docs/dashboards.md)."""
        on_feedback = getattr(sink, "on_feedback", None)
        if callable(on_feedback):
            self.events.listeners = [*self.events.listeners, on_feedback]

    def flush(self, timeout_s: float) -> bool:
        return self.events.flush(timeout_s)

    def close(self, timeout_s: float) -> bool:
        return self.events.close(timeout_s)
