"""The drop detector's defaults for a judge with the error rates it really has.

A judge that flags far more answers than are hallucinated (the local judge: a flag share of
31-65 % on services whose true rate is 5 %) must not make the default detector fire on a
healthy service, and its rate CUSUM is designed from the judge's shipped sensitivity and
specificity: the flags move by ``sensitivity + specificity - 1`` times the rise of the true rate.
"""

from __future__ import annotations

import random

import pytest

from groundwatch.alerts import (
    DEFAULT_FLOORS,
    DEFAULT_JUDGE_RATE_RISE,
    DropDetector,
    RateDesign,
    flag_rate_after_rise,
)
from groundwatch.rates import JudgeErrorRates, judge_error_rates
from groundwatch.types import Evaluation

# A judge as weak as the local one on web search answers: it flags 3 hallucinated answers in 4
# and 3 faithful ones in 10.
WEAK = JudgeErrorRates(
    sensitivity=0.75,
    specificity=0.70,
    sensitivity_low=0.6,
    sensitivity_high=0.9,
    specificity_low=0.5,
    specificity_high=0.8,
)


def judged(rng: random.Random, true_rate: float, judge: str = "local") -> Evaluation:
    """One answer at ``true_rate`` as the WEAK judge labels it."""
    hallucinated = rng.random() < true_rate
    flagged = rng.random() < (WEAK.sensitivity if hallucinated else 1 - WEAK.specificity)
    label = "hallucinated" if flagged else "grounded"
    return Evaluation(label=label, groundedness=1.0, faithfulness=1.0, judge=judge)  # type: ignore[arg-type]


def test_flag_rate_after_rise_follows_the_judge() -> None:
    youden = WEAK.sensitivity + WEAK.specificity - 1
    # The flags move by youden times the true rate's rise.
    assert flag_rate_after_rise(0.33, WEAK) == pytest.approx(0.33 + youden * 0.10)
    assert flag_rate_after_rise(0.33, WEAK, judge_rate_rise=0.05) == pytest.approx(
        0.33 + youden * 0.05
    )
    # Without error rates the flags are the truth: the design for perfect labels.
    assert flag_rate_after_rise(0.05, None) == pytest.approx(0.15)
    assert flag_rate_after_rise(0.02, None) == pytest.approx(0.07)
    assert flag_rate_after_rise(0.33, None) == pytest.approx(0.99)
    # A judge no better than chance says nothing about the rate: flags as the truth.
    useless = JudgeErrorRates(0.5, 0.5, 0.4, 0.6, 0.4, 0.6)
    assert flag_rate_after_rise(0.05, useless) == pytest.approx(0.15)


def test_no_ceiling_on_the_judges_flag_share_by_default() -> None:
    assert "flag_share" not in DEFAULT_FLOORS
    det = DropDetector(scores=("flag_share",))
    rng = random.Random(3)
    # A healthy service (5 %) through the weak judge: a flag share near 32 %, steady.
    alerts = [a for _ in range(3_000) for a in det.update(judged(rng, 0.05), "faq")]
    assert alerts == []
    # The ceiling the detector used to have fires within its first window.
    old = DropDetector(scores=("flag_share",), floors={"flag_share": 0.30})
    rng = random.Random(3)
    fired = [i for i in range(300) for a in old.update(judged(rng, 0.05), "faq") if a]
    assert fired and fired[0] < 100


def test_update_designs_the_cusum_from_the_judges_shipped_error_rates() -> None:
    shipped = judge_error_rates("local")
    assert shipped is not None
    det = DropDetector(warmup=300, floors=None, scores=("flag_share",))
    truth = DropDetector(warmup=300, floors=None, scores=("flag_share",), error_rates=None)
    rng = random.Random(4)
    for _ in range(300):
        evaluation = judged(rng, 0.05)
        det.update(evaluation)
        truth.update(evaluation)
    design, flags_as_truth = det.design("flag_share"), truth.design("flag_share")
    assert isinstance(design, RateDesign) and isinstance(flags_as_truth, RateDesign)
    assert design.p0 == flags_as_truth.p0
    assert design.p1 == pytest.approx(flag_rate_after_rise(design.p0, shipped))
    youden = shipped.sensitivity + shipped.specificity - 1
    assert design.p1 - design.p0 == pytest.approx(youden * DEFAULT_JUDGE_RATE_RISE)
    # Tuned for the small rise of the flags the judge shows, not for a tripled flag share.
    assert design.p1 - design.p0 < 0.05 < flags_as_truth.p1 - flags_as_truth.p0
    # A judge without shipped error rates keeps the design for flags that are the truth.
    unknown = DropDetector(warmup=300, floors=None, scores=("flag_share",))
    rng = random.Random(4)
    for _ in range(300):
        unknown.update(judged(rng, 0.05, judge="my-own-judge"))
    assert unknown.design("flag_share") == flags_as_truth


def test_the_judge_design_detects_a_rise_the_truth_design_is_slow_to() -> None:
    """5 % -> 20 % through the weak judge (flags 32.5 % -> 39 %): the detector designed for
    the judge fires in every run and sooner than the one that takes its flags as the truth."""

    def delay(error_rates: JudgeErrorRates | None, seed: int) -> int:
        det = DropDetector(floors=None, scores=("flag_share",), error_rates=error_rates)
        rng = random.Random(seed)
        for _ in range(800):
            assert det.update(judged(rng, 0.05)) == []
        for i in range(8_000):
            if det.update(judged(rng, 0.20)):
                return i
        return 8_000

    judge = sorted(delay(WEAK, seed) for seed in range(6))
    truth = sorted(delay(None, seed) for seed in range(6))
    assert judge[-1] < 8_000, judge
    assert judge[3] < truth[3], (judge, truth)
