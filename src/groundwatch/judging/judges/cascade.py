"""The cascade: a cheap judge decides the clear answers, an LLM judge only the unclear ones.

Escalation rule (the knob is ``min_confidence``): the whole answer goes to ``then`` (one call)
when ``first``

- failed (its judgement has ``error`` set), or
- gave any claim a ``confidence`` below ``min_confidence``, or no confidence at all (``None``:
  a judge that cannot say how sure it is counts as unsure; ``escalate_unknown=False`` trusts
  it instead), or
- gave any claim a verdict listed in ``escalate_verdicts`` (default none; e.g.
  ``{"contradicted"}`` to have every contradiction confirmed by the LLM).

Otherwise ``first``'s judgement is returned as is. ``LocalJudge`` expresses weak or conflicting
alignment and numbers it could not match as low confidence, which is what routes them here.

Every decision is counted in ``escalated`` / ``total`` on the judge; a monitor running the
cascade exports them as the ``groundwatch.judge.escalations`` counter with
``groundwatch.escalated`` = true/false (the judge itself emits no telemetry).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Sequence
from typing import TypeVar

from ...types import Evaluation, Judgement, Passage, Usage, Verdict
from ._base import Judge, judge_async

_Outcome = TypeVar("_Outcome", Judgement, Evaluation)

DEFAULT_MIN_CONFIDENCE = 0.65
"""Claims the first judge is less sure of than this are sent to the second judge.

Chosen on the selective-judging curve of ``benchmarks/accuracy.py`` for the calibrated
``LocalJudge``: on AttributionBench dev (held out) about half of the answers have every claim at
0.65 or above; the local judge decides those (balanced accuracy 0.775 against 0.68 on all
answers) and the other half goes to the second judge."""


class CascadeJudge:
    """Runs ``first``; sends the answer to ``then`` when ``first`` is unsure (see module doc).

    Args:
        first: the cheap judge, e.g. ``LocalJudge()``.
        then: the expensive judge, e.g. ``OpenAIJudge(...)``.
        min_confidence: escalate when any claim's confidence is below this (0 = never on
            confidence, 1.01 = always).
        escalate_unknown: escalate claims whose confidence is ``None``.
        escalate_verdicts: verdicts of ``first`` that always escalate.
        fallback_to_first: when ``then`` fails, return ``first``'s judgement instead of the
            error (keeps scores flowing through an LLM outage, at ``first``'s accuracy).
        name: defaults to ``cascade(<first>,<then>)``.

    Attributes:
        escalated: answers sent to ``then`` so far.
        total: answers judged so far.
    """

    def __init__(
        self,
        first: Judge,
        then: Judge,
        *,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        escalate_unknown: bool = True,
        escalate_verdicts: Collection[Verdict] = (),
        fallback_to_first: bool = False,
        name: str | None = None,
    ) -> None:
        self.first = first
        self.then = then
        self.min_confidence = min_confidence
        self.escalate_unknown = escalate_unknown
        self.escalate_verdicts = frozenset(escalate_verdicts)
        self.fallback_to_first = fallback_to_first
        self.name = name or f"cascade({first.name},{then.name})"
        self.escalated = 0
        self.total = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"CascadeJudge(first={self.first!r}, then={self.then!r}, "
            f"min_confidence={self.min_confidence})"
        )

    @property
    def escalation_rate(self) -> float | None:
        """Share of answers sent to ``then``; ``None`` before the first answer."""
        with self._lock:
            return self.escalated / self.total if self.total else None

    def should_escalate(self, judgement: Judgement | Evaluation) -> bool:
        """The escalation rule applied to ``first``'s judgement, or to its evaluation (where
        ``first`` ran in a runner of its own: see
        :mod:`groundwatch.runtime.runners.cascade_runner`)."""
        if judgement.error is not None:
            return True
        for claim in judgement.claims:
            if claim.verdict in self.escalate_verdicts:
                return True
            if claim.confidence is None or math.isnan(claim.confidence):
                if self.escalate_unknown:
                    return True
            elif claim.confidence < self.min_confidence:
                return True
        return False

    def count(self, escalated: bool) -> None:
        """Count one answer decided (``escalated``: sent to ``then``)."""
        with self._lock:
            self.total += 1
            self.escalated += escalated

    async def judge(
        self, answer: str, contexts: Sequence[Passage], question: str | None = None
    ) -> Judgement:
        """``first``'s judgement, or ``then``'s when the escalation rule says so; never raises."""
        first = await judge_async(self.first, answer, contexts, question)
        if not self.should_escalate(first):
            self.count(False)
            return first
        self.count(True)
        second = await judge_async(self.then, answer, contexts, question)
        return self.combine(first, second)

    def combine(self, first: _Outcome, second: _Outcome) -> _Outcome:
        """The cascade's judgement (or evaluation, where the stages ran on runners of their own)
        once ``then`` judged an escalated answer: ``then``'s, or ``first``'s when ``then``
        failed and ``fallback_to_first`` is set; usage summed."""
        usage = sum_usage(first.usage, second.usage)
        if second.error is not None and self.fallback_to_first and first.error is None:
            return first.model_copy(update={"usage": usage})
        return second.model_copy(update={"usage": usage})


def sum_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    if a is None:
        return b
    if b is None:
        return a
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        calls=a.calls + b.calls,
    )
