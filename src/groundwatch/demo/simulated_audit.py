"""The demo's simulated audit: a reviewer who labels the audited answers, and the rate it gives.

The demo knows which answers the scripted model invented, so it can play the person who labels
the random audit: the monitor marks the audited traces (``Monitor(audit_rate=...)``, a hash of
the trace id), and for each audited answer the reviewer sends the true label back through
``monitor.feedback(source="audit")``, as a person would; the counters then carry the audit, so
Prometheus records the estimate (docs/alerts.md). The summary sets the judge's flag share and
the audited estimate (:func:`groundwatch.estimate_rate`, its wording from
:mod:`groundwatch.rates`) beside the truth; without an audit the rate is unknown, and the
summary says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..rates import METHOD_WORDS, RateEstimate, RateTotals, estimate_rate, labels_needed
from ..types import Evaluation

DEFAULT_AUDIT = 50
"""Scored answers the simulated audit labels, about (the audit is a share of the scored
answers chosen by trace id: ``audit_rate`` = this over the expected scored answers)."""


class ReviewedAnswer(NamedTuple):
    """One scored answer of the demo: its evaluation, the truth, and whether it was audited."""

    evaluation: Evaluation
    invented: bool
    audited: bool


def audit_rate(audit: int, requests: int, sample_rate: float) -> float:
    """The monitor's ``audit_rate`` that audits about ``audit`` of the scored answers."""
    expected = max(1.0, requests * sample_rate)
    return min(1.0, audit / expected)


def rate_lines(answers: Sequence[ReviewedAnswer]) -> list[str]:
    """The rate block of the demo's summary: the truth, the flag share, and the audited
    estimate (or, without an audit, that the rate is unknown)."""
    judged = [a for a in answers if a.evaluation.label != "error"]
    if not judged:
        return []
    evaluations = [a.evaluation for a in judged]
    labels = [a.invented if a.audited else None for a in judged]
    true_rate = sum(a.invented for a in judged) / len(judged)
    estimate = estimate_rate(RateTotals.from_evaluations(evaluations, labels))
    lines = [
        f"Hallucination rate of the {len(judged)} scored answers: really {true_rate:.1%} "
        "(the demo knows)",
        f"  {'flag share':<17}  {estimate.flag_share:.1%}  (the judge's verdicts, not the rate)",
    ]
    if estimate.labelled:
        lines.append(f"  {f'audit of {estimate.labelled}':<17}  {_estimate(estimate)}")
    else:
        lines.append(f"  {'no audit':<17}  rate unknown; {labels_needed()}")
    return lines


def _estimate(r: RateEstimate) -> str:
    if r.estimate is None or r.lower is None or r.upper is None:
        return f"rate unknown; {labels_needed()}"
    how = METHOD_WORDS[r.method].split(":")[0]
    return f"{r.estimate:.1%}  (90% interval {r.lower:.1%}–{r.upper:.1%}; {how})"
