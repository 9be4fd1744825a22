"""RateTotals: the sums every estimate and every online counter share."""

from __future__ import annotations

import dataclasses
import random

import pytest

from groundwatch.rates import RateTotals
from groundwatch.types import Evaluation


def _answers(seed: int, size: int) -> list[tuple[bool, float | None, bool | None]]:
    rng = random.Random(seed)
    rows: list[tuple[bool, float | None, bool | None]] = []
    for _ in range(size):
        f = rng.random()
        probability = None if rng.random() < 0.2 else f
        label = rng.random() < 0.3 if rng.random() < 0.25 else None
        rows.append((f > 0.6, probability, label))
    return rows


def test_add_accumulates_every_sum() -> None:
    totals = RateTotals().add(True, 0.8, True).add(False, 0.3, False).add(True, 0.6).add(False)
    assert totals == RateTotals(
        scored=4,
        flagged=2,
        probability_sum=pytest.approx(0.8 + 0.3 + 0.6 + 0.0),
        probability_square_sum=pytest.approx(0.64 + 0.09 + 0.36),
        labelled=2,
        label_sum=1.0,
        labelled_flagged=1,
        label_flag_sum=1.0,
        labelled_probability_sum=pytest.approx(1.1),
        labelled_probability_square_sum=pytest.approx(0.73),
        label_probability_sum=pytest.approx(0.8),
    )


def test_unknown_probability_uses_the_flag() -> None:
    assert RateTotals().add(True).probability_sum == 1.0
    assert RateTotals().add(False, None, True).labelled_probability_sum == 0.0


def test_merge_of_two_halves_is_the_totals_of_the_whole() -> None:
    rows = _answers(1, 400)
    whole = RateTotals.from_answers(*zip(*rows, strict=True))
    left = RateTotals.from_answers(*zip(*rows[:150], strict=True))
    right = RateTotals.from_answers(*zip(*rows[150:], strict=True))
    merged = left.merge(right)
    for field in dataclasses.fields(RateTotals):
        assert getattr(merged, field.name) == pytest.approx(getattr(whole, field.name))
    assert whole.scored == 400 and 0 < whole.labelled < 400


def test_from_evaluations_leaves_errors_and_their_labels_out() -> None:
    evaluations = [
        Evaluation(label="hallucinated", hallucination_probability=0.9),
        Evaluation(label="error"),
        Evaluation(label="no_claims", hallucination_probability=0.1),
        Evaluation(label="grounded"),
    ]
    totals = RateTotals.from_evaluations(evaluations, [True, True, None, False])
    assert (totals.scored, totals.flagged, totals.labelled, totals.label_sum) == (3, 1, 2, 1.0)
    assert totals.probability_sum == pytest.approx(1.0)  # 0.9 + 0.1 + 0.0 (flag of grounded)


@pytest.mark.parametrize("probability", [-0.1, 1.5, float("nan")])
def test_a_probability_outside_the_unit_interval_is_refused(probability: float) -> None:
    with pytest.raises(ValueError, match="within"):
        RateTotals().add(True, probability)


def test_parallel_sequences_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="length"):
        RateTotals.from_answers([True, False], [0.5])


def test_the_judges_error_rates_on_the_audit() -> None:
    # Labelled: 3 hallucinated (2 flagged), 4 faithful (1 flagged); unlabelled rows ignored.
    flags = [True, True, False, True, False, False, False, True]
    labels = [True, True, True, False, False, False, False, None]
    totals = RateTotals.from_answers(flags, None, labels)
    assert totals.audit_sensitivity == pytest.approx(2 / 3)
    assert totals.audit_specificity == pytest.approx(3 / 4)
    assert RateTotals().audit_sensitivity is None and RateTotals().audit_specificity is None
    only_faithful = RateTotals().add(True, None, False)
    assert (only_faithful.audit_sensitivity, only_faithful.audit_specificity) == (None, 0.0)
