"""Hallucination rates people can trust: the judge's flags corrected by a random audit.

The share of answers a judge flags is far from the true rate at the rates production RAG has
(a judge that over-flags reads 40 % on a service at 5 %). :func:`estimate_rate` turns the sums
in :class:`RateTotals` into a :class:`RateEstimate` with an interval: prediction-powered with
audit labels, the labels alone where they are tighter, the Rogan–Gladen correction with the
judge's shipped :class:`JudgeErrorRates` without labels, the flag share where nothing else
applies. :func:`is_audited` chooses the audited traces. ``docs/rates.md`` explains the methods.
"""

from __future__ import annotations

from ._audit import is_audited
from ._error_rates import JudgeErrorRates, judge_error_rates
from ._estimate import RateEstimate, RateMethod, estimate_rate, wilson_interval
from ._totals import RateTotals

__all__ = [
    "JudgeErrorRates",
    "RateEstimate",
    "RateMethod",
    "RateTotals",
    "estimate_rate",
    "is_audited",
    "judge_error_rates",
    "wilson_interval",
]
