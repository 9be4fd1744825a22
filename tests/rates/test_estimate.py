"""estimate_rate: each method, when it applies, and the degenerate cases."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from statistics import NormalDist

import pytest

from groundwatch.rates import (
    JudgeErrorRates,
    RateEstimate,
    RateExtrapolation,
    RateTotals,
    _error_rates,
    estimate_rate,
    extrapolate_rate,
    judge_error_rates,
    wilson_interval,
)

from .streams import stream

Z90 = NormalDist().inv_cdf(0.95)

RATES = JudgeErrorRates(
    sensitivity=0.8,
    specificity=0.6,
    sensitivity_low=0.7,
    sensitivity_high=0.9,
    specificity_low=0.5,
    specificity_high=0.7,
    labelled=1000,
    measured="test",
)


def test_the_fields_are_exactly_the_contracts() -> None:
    assert [f.name for f in dataclasses.fields(RateEstimate)] == [
        "flag_share",
        "estimate",
        "lower",
        "upper",
        "confidence",
        "method",
        "scored",
        "labelled",
    ]


def test_wilson_interval_keeps_width_where_wald_collapses() -> None:
    # Reference values from statsmodels' proportion_confint(k, n, alpha=0.1, method="wilson").
    assert wilson_interval(0, 50, Z90) == pytest.approx((0.0, 0.051333185786270163), abs=1e-12)
    assert wilson_interval(20, 100, Z90) == pytest.approx(
        (0.14250182366028782, 0.2733038088096168), abs=1e-12
    )


def test_an_informative_judge_gives_ppi_tighter_than_the_labels_alone() -> None:
    drawn = stream(1, size=2000, rate=0.1, labelled=200, signal=4.0)
    totals, labels = drawn.totals, drawn.labels
    estimate = estimate_rate(totals)
    alone = wilson_interval(sum(labels), len(labels), Z90)
    assert estimate.method == "ppi"
    assert estimate.upper - estimate.lower < alone[1] - alone[0]
    assert estimate.lower <= estimate.estimate <= estimate.upper
    assert (estimate.scored, estimate.labelled) == (2000, 200)
    assert estimate.flag_share == totals.flagged / totals.scored


def test_a_judge_without_information_falls_back_to_the_labels() -> None:
    drawn = stream(2, size=2000, rate=0.1, labelled=200, signal=0.0)
    totals, labels = drawn.totals, drawn.labels
    estimate = estimate_rate(totals)
    assert estimate.method == "labels"
    assert estimate.estimate == pytest.approx(sum(labels) / len(labels))
    assert (estimate.lower, estimate.upper) == pytest.approx(
        wilson_interval(sum(labels), len(labels), Z90)
    )


@pytest.mark.parametrize("rate", [0.05, 0.3])
def test_ppi_covers_the_true_rate_about_as_often_as_it_says(rate: float) -> None:
    """Over 300 streams the 90 % interval holds the true share 85-96 % of the time, and the
    estimate is unbiased: a broken formula (a wrong variance, a sign) misses this."""
    covered, errors = 0, []
    for seed in range(300):
        drawn = stream(1000 + seed, rate=rate, labelled=200, signal=3.0)
        true_share = drawn.true_share
        estimate = estimate_rate(drawn.totals)
        covered += estimate.lower <= true_share <= estimate.upper
        errors.append(estimate.estimate - true_share)
    assert 0.85 <= covered / 300 <= 0.97
    assert abs(sum(errors) / len(errors)) < 0.005


def test_a_census_gives_the_labels_own_rate_and_interval() -> None:
    drawn = stream(3, size=300, rate=0.2, labelled=300, signal=4.0)
    totals, labels = drawn.totals, drawn.labels
    estimate = estimate_rate(totals)
    assert estimate.method == "labels"
    assert estimate.estimate == sum(labels) / 300
    assert (estimate.lower, estimate.upper) == pytest.approx(wilson_interval(sum(labels), 300, Z90))


def test_few_labels_of_one_kind_use_the_labels_interval() -> None:
    # 200 labels of which only 2 hallucinated: PPI's normal approximation does not hold.
    totals = RateTotals.from_answers(
        [i % 3 == 0 for i in range(1000)],
        [0.9 if i % 3 == 0 else 0.2 for i in range(1000)],
        [(i < 2) if i < 200 else None for i in range(1000)],
    )
    estimate = estimate_rate(totals)
    assert estimate.method == "labels"
    assert estimate.estimate == pytest.approx(0.01)
    assert estimate.upper > 0.02


def test_all_labels_equal_never_gives_a_zero_width_interval() -> None:
    totals = RateTotals.from_answers(
        [i % 2 == 0 for i in range(500)], None, [False if i < 100 else None for i in range(500)]
    )
    estimate = estimate_rate(totals)
    assert (estimate.method, estimate.estimate, estimate.lower) == ("labels", 0.0, 0.0)
    assert estimate.upper == pytest.approx(wilson_interval(0, 100, Z90)[1])


def test_constant_predictions_fall_back_to_the_labels() -> None:
    totals = RateTotals.from_answers(
        [False] * 500, [0.3] * 500, [(i % 4 == 0) if i < 100 else None for i in range(500)]
    )
    assert estimate_rate(totals).method == "labels"


def test_unknown_probabilities_use_the_flag_as_the_prediction() -> None:
    unknown = stream(4, size=2000, labelled=200, signal=4.0, known_probability=False).totals
    assert unknown.probability_sum == unknown.flagged
    estimate = estimate_rate(unknown)
    assert estimate.method == "ppi"  # the flag carries the information here
    assert estimate.lower <= estimate.estimate <= estimate.upper


def _extrapolate(totals: RateTotals, error_rates: JudgeErrorRates) -> RateExtrapolation:
    found = extrapolate_rate(totals, error_rates=error_rates)
    assert found is not None
    return found


def test_rogan_gladen_corrects_the_flag_share() -> None:
    totals = RateTotals(scored=1000, flagged=480)
    estimate = _extrapolate(totals, error_rates=RATES)
    assert estimate.flag_share == 0.48
    assert estimate.extrapolated == pytest.approx((0.48 + 0.6 - 1) / (0.8 + 0.6 - 1))
    assert estimate.lower < estimate.extrapolated < estimate.upper
    # The box's corners: the lowest from the high sensitivity and low specificity.
    q_low, q_high = wilson_interval(480, 1000, Z90)
    assert estimate.lower == pytest.approx(max(0.0, (q_low + 0.5 - 1) / (0.9 + 0.5 - 1)))
    assert estimate.upper == pytest.approx((q_high + 0.7 - 1) / (0.7 + 0.7 - 1))


def test_rogan_gladen_widens_with_the_spread_across_sources() -> None:
    totals = RateTotals(scored=1000, flagged=480)
    tight = dataclasses.replace(
        RATES, sensitivity_low=0.8, sensitivity_high=0.8, specificity_low=0.6, specificity_high=0.6
    )
    narrow = _extrapolate(totals, error_rates=tight)
    wide = _extrapolate(totals, error_rates=RATES)
    assert narrow.extrapolated == wide.extrapolated
    assert wide.upper - wide.lower > narrow.upper - narrow.lower > 0


def test_rogan_gladen_spans_the_sources_pairs_not_the_box_of_their_extremes() -> None:
    """Sources measured apart: the interval spans each source's (sensitivity, specificity),
    so the worst sensitivity of one source never meets the worst specificity of another (a
    judge no better than chance here, which would open the interval to [0, 1])."""
    sources = {
        "a": {"sensitivity": 0.9, "specificity": 0.4, "labelled": 100},
        "b": {"sensitivity": 0.6, "specificity": 0.8, "labelled": 100},
    }
    rates = JudgeErrorRates(0.75, 0.6, 0.6, 0.9, 0.4, 0.8, sources=sources)
    estimate = _extrapolate(RateTotals(scored=1000, flagged=480), error_rates=rates)
    q_low, q_high = wilson_interval(480, 1000, Z90)
    corrected = [
        (q + sp - 1) / (se + sp - 1)
        for se, sp in ((0.75, 0.6), (0.9, 0.4), (0.6, 0.8))
        for q in (q_low, q_high)
    ]
    assert (estimate.lower, estimate.upper) == pytest.approx(
        (max(0.0, min(corrected)), max(corrected))
    )
    assert estimate.upper < 1.0  # the box's corner (0.6, 0.4) would have opened it


def test_a_flag_share_below_every_false_alarm_rate_keeps_an_upper_bound() -> None:
    """Flagging 5 % where every measured specificity predicts at least 30 % false alarms: the
    specificities do not fit, so the upper bound is q/se (true whatever the specificity), not
    a collapsed [0, 0] that would miss any true rate above zero."""
    estimate = _extrapolate(RateTotals(scored=1000, flagged=50), error_rates=RATES)
    q_high = wilson_interval(50, 1000, Z90)[1]
    assert (estimate.extrapolated, estimate.lower) == (0.0, 0.0)
    assert estimate.upper == pytest.approx(q_high / 0.7)  # the lowest sensitivity in the box


def test_a_flag_share_above_every_pairs_reach_keeps_a_lower_bound() -> None:
    estimate = _extrapolate(RateTotals(scored=1000, flagged=990), error_rates=RATES)
    q_low = wilson_interval(990, 1000, Z90)[0]
    assert (estimate.extrapolated, estimate.upper) == (1.0, 1.0)
    assert estimate.lower == pytest.approx(1 - (1 - q_low) / 0.5)


def test_rogan_gladen_clips_to_the_unit_interval() -> None:
    estimate = _extrapolate(RateTotals(scored=1000, flagged=300), error_rates=RATES)
    assert estimate.extrapolated == 0.0 and estimate.lower == 0.0  # (0.3 + 0.6 - 1) < 0


def test_a_judge_no_better_than_chance_gets_no_correction() -> None:
    chance = JudgeErrorRates(0.5, 0.5, 0.4, 0.6, 0.4, 0.6)
    assert extrapolate_rate(RateTotals(scored=100, flagged=40), error_rates=chance) is None


def test_a_box_reaching_chance_leaves_that_side_open() -> None:
    loose = dataclasses.replace(RATES, sensitivity_low=0.45, specificity_low=0.5)
    estimate = _extrapolate(RateTotals(scored=1000, flagged=480), error_rates=loose)
    assert (estimate.lower, estimate.upper) == (0.0, 1.0)


def test_no_labels_give_no_rate_and_no_interval() -> None:
    """Without audit labels nothing is the rate: no estimate and no interval, whatever the
    judge's shipped error rates say; the flag share is said for what it is."""
    for judge in ("local", "no-such-judge", None):
        estimate = estimate_rate(RateTotals(scored=200, flagged=50), judge=judge)
        assert (estimate.method, estimate.estimate, estimate.lower, estimate.upper) == (
            "no_audit",
            None,
            None,
            None,
        )
        assert (estimate.flag_share, estimate.known) == (0.25, False)


def test_no_error_rates_give_no_extrapolation() -> None:
    with pytest.raises(ValueError, match="no-such-judge"):  # named, never a silent None
        extrapolate_rate(RateTotals(scored=200, flagged=50), judge="no-such-judge")
    assert extrapolate_rate(RateTotals(), error_rates=RATES) is None


def test_nothing_scored_says_nothing_is_known() -> None:
    estimate = estimate_rate(RateTotals())
    assert (estimate.method, estimate.estimate, estimate.lower, estimate.upper) == (
        "no_audit",
        None,
        None,
        None,
    )


def test_a_single_label_does_not_raise() -> None:
    estimate = estimate_rate(RateTotals().add(True, 0.9, True).add(False, 0.1))
    assert estimate.method == "labels" and estimate.estimate == 1.0 and estimate.lower < 1.0


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5])
def test_confidence_outside_the_open_unit_interval_is_refused(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence"):
        estimate_rate(RateTotals(scored=1, flagged=1), confidence=confidence)


def test_a_higher_confidence_gives_a_wider_interval() -> None:
    totals = stream(5, size=1000, labelled=200, signal=3.0).totals
    ninety, ninety_nine = estimate_rate(totals), estimate_rate(totals, confidence=0.99)
    assert ninety_nine.lower < ninety.lower and ninety.upper < ninety_nine.upper


# -- the judges' error rates ------------------------------------------------------------------

ENTRY = {
    "sensitivity": 0.8,
    "specificity": 0.6,
    "sensitivity_low": 0.7,
    "sensitivity_high": 0.9,
    "specificity_low": 0.5,
    "specificity_high": 0.7,
    "labelled": 1000,
    "sources": {"a": {"sensitivity": 0.7, "specificity": 0.7, "labelled": 500}},
}


def _write(tmp_path: Path, table: object) -> Path:
    path = tmp_path / "rates.json"
    path.write_text(json.dumps(table))
    return path


def test_judge_error_rates_reads_an_entry(tmp_path: Path) -> None:
    path = _write(tmp_path, {"measured": "how", "judges": {"local": {"en": ENTRY}}})
    rates = judge_error_rates("local", "en", path=path)
    assert rates == JudgeErrorRates(
        0.8, 0.6, 0.7, 0.9, 0.5, 0.7, labelled=1000, measured="how", sources=ENTRY["sources"]
    )
    assert judge_error_rates("local", "zh", path=path) is None
    assert judge_error_rates("llm", "en", path=path) is None


def test_judge_error_rates_without_a_file_is_none(tmp_path: Path) -> None:
    assert judge_error_rates("local", path=tmp_path / "missing.json") is None


def test_malformed_entries_are_none(tmp_path: Path) -> None:
    broken = {**ENTRY, "sensitivity_low": 0.95}  # low above the value
    path = _write(tmp_path, {"judges": {"local": {"en": broken, "zh": {"sensitivity": 1}}}})
    assert judge_error_rates("local", "en", path=path) is None
    assert judge_error_rates("local", "zh", path=path) is None
    assert judge_error_rates("local", path=_write(tmp_path, [1, 2])) is None


def test_extrapolate_rate_looks_up_the_judges_shipped_rates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, {"measured": "how", "judges": {"local": {"en": ENTRY}}})
    monkeypatch.setattr(_error_rates, "_SHIPPED", path)
    totals = RateTotals(scored=1000, flagged=480)
    with pytest.raises(ValueError, match="measured in en"):
        extrapolate_rate(totals, judge="local", language="zh")
    found, given = (
        extrapolate_rate(totals, judge="local"),
        extrapolate_rate(totals, error_rates=RATES),
    )
    assert found is not None and given is not None
    assert (found.extrapolated, found.lower, found.upper) == (
        given.extrapolated,
        given.lower,
        given.upper,
    )
