"""What a person's verdict enters a :class:`~groundwatch.Monitor` through: ``feedback()``, and
the random audit it is matched against (``audit_rate``, ``audited()``). The work is
:mod:`groundwatch.runtime.feedback`'s (loaded with the monitor's constructor, not at import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.trace import SpanContext

from .._shared import guard
from ..telemetry import semconv as sc

if TYPE_CHECKING:
    from typing_extensions import Never

    from ..telemetry import Stats, Telemetry
    from .feedback import Feedback

__all__ = ["FeedbackFront"]


class FeedbackFront:
    """The feedback methods of :class:`~groundwatch.Monitor` (a mixin: the monitor holds the
    state they read)."""

    stats: Stats
    _disabled: bool
    _feedback: Feedback
    _telemetry: Telemetry

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
                from .feedback import say_bad_feedback

                reason = (
                    f"feedback() takes keyword arguments only (label=, trace_id=), got "
                    f"{len(args)} positional"
                    if args
                    else f"unknown arguments: {', '.join(sorted(unknown))}"
                )
                say_bad_feedback("arguments", reason)
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
        # The decision the record's span carries, by the same key (Telemetry.audited).
        return self._telemetry.trace_audited(ids[0])
