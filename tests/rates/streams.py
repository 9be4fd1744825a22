"""Simulated streams of judged answers with a known true rate, for the estimator's tests."""

from __future__ import annotations

import dataclasses
import math
import random

from groundwatch.rates import RateTotals


@dataclasses.dataclass
class Stream:
    """One simulated stream: the truth, the judge's probabilities and the audited answers."""

    truth: list[int]
    probabilities: list[float]
    audited: list[int]
    totals: RateTotals

    @property
    def true_share(self) -> float:
        return sum(self.truth) / len(self.truth)

    @property
    def labels(self) -> list[int]:
        return [self.truth[i] for i in self.audited]

    @property
    def labelled_predictions(self) -> list[float]:
        return [self.probabilities[i] for i in self.audited]

    @property
    def unlabelled_predictions(self) -> list[float]:
        audited = set(self.audited)
        return [f for i, f in enumerate(self.probabilities) if i not in audited]


def stream(
    seed: int,
    *,
    size: int = 1000,
    rate: float = 0.1,
    labelled: int = 200,
    signal: float = 2.0,
    known_probability: bool = True,
) -> Stream:
    """A stream of ``size`` answers, a share ``rate`` hallucinated, judged by a judge whose
    log-odds move by ``signal`` with the truth (0 = no information) and that over-flags, as the
    local judge does; ``labelled`` of them chosen at random for the audit."""
    rng = random.Random(seed)
    truth = [1 if rng.random() < rate else 0 for _ in range(size)]
    probabilities = [
        1 / (1 + math.exp(-(signal * (y - 0.5) + 0.3 + rng.gauss(0, 1)))) for y in truth
    ]
    audited = sorted(rng.sample(range(size), labelled))
    chosen = set(audited)
    totals = RateTotals.from_answers(
        [f > 0.5 for f in probabilities],
        probabilities if known_probability else None,
        [bool(truth[i]) if i in chosen else None for i in range(size)],
    )
    return Stream(truth, probabilities, audited, totals)
