"""Which human labels count for the rate, and how an estimate is said in words.

``groundwatch check``, its HTML report and the demo read both from here, so a method or a basis
is worded once.
"""

from __future__ import annotations

from typing import Literal

from ._estimate import RateEstimate, RateMethod
from ._totals import RateTotals

__all__ = [
    "BASIS_WORDS",
    "LABEL_PRECISION",
    "METHOD_WORDS",
    "RateBasis",
    "describe_estimate",
    "labels_needed",
    "rate_labels",
]

RateBasis = Literal["audit", "census", "declared", "none", "not_random"]
"""Which human labels the rate estimate uses: rows marked ``audit`` (``audit``), every row, all
of them labelled (``census``), every labelled row as the user declared them random
(``declared``), none because no row is labelled (``none``), or none because the labels present
were not chosen at random (``not_random``)."""

METHOD_WORDS: dict[RateMethod, str] = {
    "ppi": "prediction-powered: the audit labels with the judge's probabilities",
    "labels": "the audit labels alone",
    "no_audit": "no audit labels: the rate is unknown",
}
"""How each :data:`~groundwatch.rates.RateMethod` is said, everywhere it is shown."""

BASIS_WORDS: dict[RateBasis, str] = {
    "audit": 'the labels of rows marked "audit" (a random audit)',
    "census": "every row's label (the file is fully labelled)",
    "declared": "every label, declared random (--labels-are-random)",
    "none": "none: no row is labelled",
    "not_random": 'none: the labels were not chosen at random (no row marked "audit", not '
    "every row labelled; pass --labels-are-random if they were)",
}
"""Which labels an estimate used, as the summary, the HTML report and JUnit say it."""

LABEL_PRECISION: tuple[tuple[int, float, float], ...] = (
    (50, 0.051, 0.093),
    (100, 0.033, 0.068),
    (200, 0.023, 0.050),
    (400, 0.017, 0.037),
)
"""Audit labels and the half-width of the 90 % interval they give with the local judge at a true
rate of 5 % and of 50 % (docs/rates.md "Running an audit": how many labels; streams of 1,000
answers)."""


def rate_labels(
    everything: RateTotals, audit: RateTotals, *, labels_are_random: bool = False
) -> tuple[RateBasis, RateTotals]:
    """Which labels of a file enter the estimate, and the totals with only those labels.

    Labels count as a random audit when every judged answer is labelled (a census), when the
    user declares them random, or, for the answers marked ``audit`` (written by
    ``DatasetSink(when="audit")``), those answers' labels. Otherwise the labels were chosen by
    someone (the hard cases, the complaints) and would bias the estimate: left out.

    Args:
        everything: the sums over the judged answers, every label counted.
        audit: the same answers, only the labels of those marked ``audit`` counted.
        labels_are_random: the labelled answers were chosen at random.
    """
    if everything.labelled == 0:
        return "none", everything
    if everything.labelled == everything.scored:
        return "census", everything
    if labels_are_random:
        return "declared", everything
    if audit.labelled:
        return "audit", audit
    return "not_random", without_labels(everything)


def without_labels(totals: RateTotals) -> RateTotals:
    """The same answers, none of them labelled."""
    return RateTotals(
        scored=totals.scored,
        flagged=totals.flagged,
        probability_sum=totals.probability_sum,
        probability_square_sum=totals.probability_square_sum,
    )


def _pct(share: float) -> str:
    return f"{100 * share:.1f} %"


def labels_needed() -> str:
    """How many audit labels give which precision, in one sentence."""
    parts = [
        f"{n} labels ±{100 * low:.0f}–{100 * high:.0f} points" for n, low, high in LABEL_PRECISION
    ]
    return "a random audit gives it: " + ", ".join(parts) + " (docs/rates.md)"


def describe_estimate(r: RateEstimate) -> str:
    """One line for an estimate: the rate with its interval, how many labels and the method; or,
    without audit labels, that the rate is unknown and the flag share is not it."""
    if r.estimate is None or r.lower is None or r.upper is None:
        return (
            f"hallucination rate unknown until an audit (flag share {_pct(r.flag_share)} of "
            f"{r.scored:,} judged answers: the judge's verdicts, not the rate)"
        )
    return (
        f"hallucination rate {_pct(r.estimate)} ({100 * r.confidence:.0f} % interval "
        f"{_pct(r.lower)}–{_pct(r.upper)}; {r.labelled:,} audit labels of {r.scored:,} judged "
        f"answers; {METHOD_WORDS[r.method].split(':')[0]}); flag share {_pct(r.flag_share)}"
    )
