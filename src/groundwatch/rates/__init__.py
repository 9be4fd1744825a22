"""Hallucination rates people can trust: the judge's flags corrected by a random audit.

The share of answers a judge flags is far from the true rate at the rates production RAG has
(a judge that over-flags reads 40 % on a service at 5 %). :func:`estimate_rate` turns the sums
in :class:`RateTotals` into a :class:`RateEstimate` with an interval: prediction-powered with
audit labels, the labels alone where they are tighter; without audit labels the rate is unknown
(``no_audit``), and :func:`extrapolate_rate` is the Rogan–Gladen correction with the judge's
shipped :class:`JudgeErrorRates`, named as the extrapolation it is. :func:`is_audited` chooses
the audited traces; :func:`rate_labels` which labels of a file count; :data:`SUMS` ties each sum
to its counter and its Prometheus record. ``docs/rates.md`` explains the methods.
"""

from __future__ import annotations

from ._audit import is_audited
from ._error_rates import JudgeErrorRates, judge_error_rates
from ._estimate import (
    RateEstimate,
    RateExtrapolation,
    RateMethod,
    estimate_rate,
    extrapolate_rate,
    wilson_interval,
)
from ._labels import (
    METHOD_WORDS,
    RateBasis,
    describe_estimate,
    labels_needed,
    rate_labels,
)
from ._sums import SUMS, RateSum
from ._totals import RateTotals

__all__ = [
    "METHOD_WORDS",
    "SUMS",
    "JudgeErrorRates",
    "RateBasis",
    "RateEstimate",
    "RateExtrapolation",
    "RateMethod",
    "RateSum",
    "RateTotals",
    "describe_estimate",
    "estimate_rate",
    "extrapolate_rate",
    "is_audited",
    "judge_error_rates",
    "labels_needed",
    "rate_labels",
    "wilson_interval",
]
