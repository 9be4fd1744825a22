"""The rate estimate's sums, declared once: each :class:`RateTotals` field beside the counter that
carries it and the Prometheus record that reads it back.

This table is the only place the three names meet. :class:`RateTotals` adds answers with
:func:`increments`; the counters (``telemetry/_rate_counters.py``) are created from it and add
the same increments in the table's order; the recording rules
(``groundwatch rules``, :mod:`groundwatch.alerts.prometheus_rules`) read each counter into the
record named here. ``telemetry/semconv.py`` takes the counter names from it.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = [
    "AUDIT_SUMS",
    "RATE_SUMS",
    "SUMS",
    "RateSum",
    "increments",
    "prediction",
    "usable_probability",
]

Family = Literal["rate", "audit"]


@dataclasses.dataclass(frozen=True)
class RateSum:
    """One sum of the estimate.

    Attributes:
        field: the :class:`~groundwatch.rates.RateTotals` attribute.
        counter: the OpenTelemetry counter (by ``groundwatch.route`` and ``groundwatch.judge``).
        record: the stem of its Prometheus record, ``groundwatch_route:<record>:increase<window>``.
        family: ``rate`` (every judged answer, counted on the worker) or ``audit`` (labelled
            audited answers, counted when the label comes back).
        unit: the counter's unit.
        description: the counter's description.
    """

    field: str
    counter: str
    record: str
    family: Family
    unit: str
    description: str

    @property
    def exposed(self) -> str:
        """The counter's name as the OpenTelemetry Prometheus exporter renders it."""
        return self.counter.replace(".", "_") + "_total"


SUMS: tuple[RateSum, ...] = (
    RateSum(
        "scored",
        "groundwatch.rate.scored",
        "rate_scored",
        "rate",
        "{evaluation}",
        "Judged answers (label not error), the population of the rate estimate",
    ),
    RateSum(
        "flagged",
        "groundwatch.rate.flagged",
        "rate_flagged",
        "rate",
        "{evaluation}",
        "Judged answers the judge labelled hallucinated",
    ),
    RateSum(
        "probability_sum",
        "groundwatch.rate.probability",
        "rate_probability",
        "rate",
        "1",
        "Sum of the judge's hallucination probability over judged answers",
    ),
    RateSum(
        "probability_square_sum",
        "groundwatch.rate.probability_squares",
        "rate_probability_squares",
        "rate",
        "1",
        "Sum of the squared hallucination probability over judged answers",
    ),
    RateSum(
        "labelled",
        "groundwatch.audit.labelled",
        "audit_labelled",
        "audit",
        "{label}",
        "Audited answers a person labelled",
    ),
    RateSum(
        "label_sum",
        "groundwatch.audit.label_sum",
        "audit_label_sum",
        "audit",
        "{label}",
        "Audited answers a person labelled hallucinated",
    ),
    RateSum(
        "labelled_flagged",
        "groundwatch.audit.flagged",
        "audit_flagged",
        "audit",
        "{label}",
        "Labelled audited answers the judge flagged",
    ),
    RateSum(
        "label_flag_sum",
        "groundwatch.audit.label_flag",
        "audit_label_flag",
        "audit",
        "{label}",
        "Labelled audited answers both labelled hallucinated and flagged by the judge",
    ),
    RateSum(
        "labelled_probability_sum",
        "groundwatch.audit.probability",
        "audit_probability",
        "audit",
        "1",
        "Sum of the judge's hallucination probability over labelled audited answers",
    ),
    RateSum(
        "labelled_probability_square_sum",
        "groundwatch.audit.probability_squares",
        "audit_probability_squares",
        "audit",
        "1",
        "Sum of the squared probability over labelled audited answers",
    ),
    RateSum(
        "label_probability_sum",
        "groundwatch.audit.label_probability",
        "audit_label_probability",
        "audit",
        "1",
        "Sum of label times probability over labelled audited answers",
    ),
)
"""Every sum, in :class:`RateTotals`' field order."""

RATE_SUMS: tuple[RateSum, ...] = tuple(s for s in SUMS if s.family == "rate")
AUDIT_SUMS: tuple[RateSum, ...] = tuple(s for s in SUMS if s.family == "audit")
BY_FIELD: dict[str, RateSum] = {s.field: s for s in SUMS}


def usable_probability(probability: float | None) -> float | None:
    """The judge's probability if it is a number in [0, 1], else ``None`` (unknown): a custom
    judge's stray value never breaks a count; its flag stands in, as for no probability."""
    if probability is None:
        return None
    try:
        f = float(probability)
    except (TypeError, ValueError):
        return None
    return f if 0.0 <= f <= 1.0 else None  # NaN fails this too


def prediction(flagged: bool, probability: float | None) -> float:
    """The judge's prediction ``f`` of one answer: its probability, else its flag (1 or 0).

    Raises:
        ValueError: ``probability`` is given and is not a number in [0, 1].
    """
    if probability is None:
        return 1.0 if flagged else 0.0
    f = usable_probability(probability)
    if f is None:
        raise ValueError(f"probability must be within [0, 1], got {probability!r}")
    return f


def increments(flagged: bool, f: float, label: bool | None) -> dict[str, float]:
    """What one judged answer adds to each sum, by field: ``f`` is its :func:`prediction`,
    ``label`` the audit label (``None``: not labelled, and the ``audit`` sums get nothing)."""
    flag = 1.0 if flagged else 0.0
    out = {"scored": 1.0, "flagged": flag, "probability_sum": f, "probability_square_sum": f * f}
    if label is None:
        return out
    y = 1.0 if label else 0.0
    out.update(
        labelled=1.0,
        label_sum=y,
        labelled_flagged=flag,
        label_flag_sum=y * flag,
        labelled_probability_sum=f,
        labelled_probability_square_sum=f * f,
        label_probability_sum=y * f,
    )
    return out
