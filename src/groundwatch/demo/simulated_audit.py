"""The demo's simulated audit: what the hallucination rate looks like with and without labels.

The demo knows which answers the scripted model invented, so it can play the person who labels
a random audit: it draws ``--audit N`` of the scored answers at random, labels them with that
truth, and sets three figures beside the truth: the judge's flag share, the flag share
corrected with the judge's measured error rates (no labels), and the prediction-powered
estimate from the audit (:func:`groundwatch.estimate_rate`), each with its 90 % interval.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..rates import RateEstimate, RateTotals, estimate_rate
from ..types import Evaluation

DEFAULT_AUDIT = 50
"""Scored answers the simulated audit labels."""

_HOW = {
    "ppi": "prediction-powered",
    "labels": "the labels alone",
    "rogan_gladen": "the judge's measured error rates",
    "flag_share": "no correction: no measured error rates",
}


def rate_lines(answers: Sequence[tuple[Evaluation, bool]], audit: int, seed: int) -> list[str]:
    """The rate block of the demo's summary.

    Args:
        answers: every scored answer's evaluation and whether the model really invented it.
        audit: answers the simulated audit labels (0: no audit line).
        seed: chooses the audited answers.
    """
    judged = [(ev, truth) for ev, truth in answers if ev.label != "error"]
    if not judged:
        return []
    evaluations = [ev for ev, _ in judged]
    judge = evaluations[0].judge or None
    true_rate = sum(truth for _, truth in judged) / len(judged)
    unlabelled = estimate_rate(RateTotals.from_evaluations(evaluations), judge=judge)
    lines = [
        f"Hallucination rate of the {len(judged)} scored answers: really {true_rate:.1%} (the "
        f"demo knows); the judge flags {unlabelled.flag_share:.1%}",
        f"  without labels     {_estimate(unlabelled)}",
    ]
    if audit > 0:
        chosen = set(random.Random(seed).sample(range(len(judged)), min(audit, len(judged))))
        labels = [truth if i in chosen else None for i, (_, truth) in enumerate(judged)]
        audited = estimate_rate(RateTotals.from_evaluations(evaluations, labels), judge=judge)
        lines.append(f"  audit of {len(chosen):<9} {_estimate(audited)}")
    return lines


def _estimate(r: RateEstimate) -> str:
    if r.method == "flag_share":
        return f"{r.estimate:.1%}  ({_HOW[r.method]} for this judge)"
    return f"{r.estimate:.1%}  (90% interval {r.lower:.1%}–{r.upper:.1%}; {_HOW[r.method]})"
