"""An unknown judge or language in the error-rate look-up raises, naming the known ones (issue
#45 item 3): ``judge="LocalJudge"`` (a class name) or ``language="fr"`` fell back to no
correction without a word. The names are ``Evaluation.judge``'s (``local``), as the sink rows
docs/feedback.md shows carry them."""

from __future__ import annotations

import pytest

import groundwatch as gw
from groundwatch.rates import RateTotals, extrapolate_rate
from groundwatch.rates._error_rates import shipped_error_rates

TOTALS = RateTotals.from_answers([True] * 30 + [False] * 70, [0.9] * 30 + [0.1] * 70)


def test_the_judges_name_is_evaluation_judge() -> None:
    assert gw.evaluate("Paris is in France.", ["Paris is in France."]).judge == "local"
    assert extrapolate_rate(TOTALS, judge="local") is not None
    assert shipped_error_rates("local", "zh").sensitivity > 0


@pytest.mark.parametrize(
    ("judge", "language", "named"),
    [("LocalJudge", "en", "local, semantic"), ("local", "fr", "en, zh"), ("nli", "en", "local")],
)
def test_an_unknown_judge_or_language_raises_naming_the_known_ones(
    judge: str, language: str, named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        extrapolate_rate(TOTALS, judge=judge, language=language)
