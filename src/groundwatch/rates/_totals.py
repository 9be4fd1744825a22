"""The sufficient statistics of a hallucination-rate estimate: sums that add across replicas."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._sums import increments, prediction

if TYPE_CHECKING:
    from ..types import Evaluation

__all__ = ["RateTotals"]


@dataclasses.dataclass(frozen=True)
class RateTotals:
    """Sums over judged answers from which every rate estimate is computed.

    The population is every judged answer (``label != "error"``; ``no_claims`` included). For
    each answer the judge gives a flag (``label == "hallucinated"``) and a prediction ``f``, its
    ``hallucination_probability`` (the flag, 0 or 1, where the probability is unknown). Audited
    answers that came back with a human label ``y`` (1.0 hallucinated, 0.0 not) add to the
    ``labelled*`` sums as well. These are the same sums the online counters carry, so totals
    from several replicas (or Prometheus) add up to the totals of the whole: see :meth:`merge`.

    Attributes:
        scored: judged answers.
        flagged: of those, flagged by the judge.
        probability_sum: sum of ``f`` over judged answers.
        probability_square_sum: sum of ``f**2`` over judged answers.
        labelled: judged answers with an audit label.
        label_sum: sum of ``y`` (audit labels saying hallucinated).
        labelled_flagged: labelled answers the judge flagged.
        label_flag_sum: labelled answers both labelled hallucinated and flagged.
        labelled_probability_sum: sum of ``f`` over labelled answers.
        labelled_probability_square_sum: sum of ``f**2`` over labelled answers.
        label_probability_sum: sum of ``y * f`` over labelled answers.
    """

    scored: int = 0
    flagged: int = 0
    probability_sum: float = 0.0
    probability_square_sum: float = 0.0
    labelled: int = 0
    label_sum: float = 0.0
    labelled_flagged: int = 0
    label_flag_sum: float = 0.0
    labelled_probability_sum: float = 0.0
    labelled_probability_square_sum: float = 0.0
    label_probability_sum: float = 0.0

    def add(
        self, flagged: bool, probability: float | None = None, label: bool | None = None
    ) -> RateTotals:
        """These totals with one more judged answer.

        Args:
            flagged: the judge labelled the answer ``hallucinated``.
            probability: the judge's ``hallucination_probability``; ``None`` when unknown, in
                which case the flag (1.0 or 0.0) stands in as the prediction.
            label: the audit label (``True`` = a person called it hallucinated), or ``None``
                when the answer was not labelled in a random audit.

        Raises:
            ValueError: ``probability`` is not a number in [0, 1].
        """
        added = increments(flagged, prediction(flagged, probability), label)
        return dataclasses.replace(
            self,
            **{
                name: getattr(self, name) + (int(value) if name in _COUNTS else value)
                for name, value in added.items()
            },
        )

    def merge(self, other: RateTotals) -> RateTotals:
        """The totals of both (two replicas, two windows): every sum added."""
        return RateTotals(
            *(
                getattr(self, field.name) + getattr(other, field.name)
                for field in dataclasses.fields(self)
            )
        )

    @property
    def audit_sensitivity(self) -> float | None:
        """The judge's sensitivity on the audit: of the answers labelled hallucinated, the
        share it flagged (``None`` without such a label). Set beside the shipped
        :class:`~groundwatch.rates.JudgeErrorRates`, it tells a judge that drifted from an
        app that did."""
        return self.label_flag_sum / self.label_sum if self.label_sum > 0 else None

    @property
    def audit_specificity(self) -> float | None:
        """The judge's specificity on the audit: of the answers labelled faithful, the share
        it did not flag (``None`` without such a label)."""
        faithful = self.labelled - self.label_sum
        if faithful <= 0:
            return None
        return (faithful - (self.labelled_flagged - self.label_flag_sum)) / faithful

    @classmethod
    def from_answers(
        cls,
        flagged: Iterable[bool],
        probabilities: Iterable[float | None] | None = None,
        labels: Iterable[bool | None] | None = None,
    ) -> RateTotals:
        """Totals of judged answers given as parallel sequences.

        Args:
            flagged: per answer, whether the judge flagged it.
            probabilities: per answer, the judge's probability (``None`` = unknown); all
                unknown when omitted.
            labels: per answer, the audit label or ``None``; none labelled when omitted.

        Raises:
            ValueError: the sequences differ in length, or a probability is not in [0, 1].
        """
        flags = list(flagged)
        probs = [None] * len(flags) if probabilities is None else list(probabilities)
        marks = [None] * len(flags) if labels is None else list(labels)
        if not len(flags) == len(probs) == len(marks):
            raise ValueError(
                f"flagged, probabilities and labels differ in length: "
                f"{len(flags)}, {len(probs)}, {len(marks)}"
            )
        totals = cls()
        for flag, probability, label in zip(flags, probs, marks, strict=True):
            totals = totals.add(flag, probability, label)
        return totals

    @classmethod
    def from_evaluations(
        cls,
        evaluations: Iterable[Evaluation],
        labels: Iterable[bool | None] | None = None,
    ) -> RateTotals:
        """Totals of evaluations, with the audit label of each (``None`` = not labelled).

        Evaluations labelled ``error`` are left out, with their labels: the judge said nothing
        about them, so they belong to no rate.

        Raises:
            ValueError: ``labels`` is given and differs in length from ``evaluations``.
        """
        evals = list(evaluations)
        marks = [None] * len(evals) if labels is None else list(labels)
        if len(evals) != len(marks):
            raise ValueError(f"evaluations and labels differ in length: {len(evals)}, {len(marks)}")
        totals = cls()
        for evaluation, label in zip(evals, marks, strict=True):
            if evaluation.label != "error":
                totals = totals.add(
                    evaluation.is_hallucinated, evaluation.hallucination_probability, label
                )
        return totals


_COUNTS = frozenset(
    field.name for field in dataclasses.fields(RateTotals) if field.type in (int, "int")
)
"""The sums that count answers (whole numbers); the rest add probabilities."""
