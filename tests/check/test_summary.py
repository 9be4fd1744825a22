"""Running aggregates and the gate: denominators, balanced accuracy, worst answers, thresholds."""

from __future__ import annotations

import pytest

from groundwatch.check.rows import Row
from groundwatch.check.summary import CheckSummary
from groundwatch.types import Claim, Evaluation


def _row(n: int, expected: str | None = None) -> Row:
    return Row(n, f"r{n}", None, ["ctx"], "answer", expected)  # type: ignore[arg-type]


def _ev(label: str, f: float | None = None, g: float | None = None, bad: int = 0) -> Evaluation:
    claims = [Claim(text=f"claim {i}", verdict="unsupported") for i in range(bad)]
    return Evaluation(label=label, faithfulness=f, groundedness=g, claims=claims)  # type: ignore[arg-type]


def test_means_and_rate_are_over_scored_answers_only() -> None:
    s = CheckSummary()
    s.add(_row(1), _ev("grounded", 1.0, 1.0))
    s.add(_row(2), _ev("hallucinated", 1.0, 0.2, bad=4))
    s.add(_row(3), _ev("insufficient_context", 1.0, 0.0, bad=1))
    s.add(_row(4), _ev("no_claims"))
    s.add(_row(5), _ev("error"))
    assert s.rows == 5 and s.scored == 3
    assert s.mean_groundedness == pytest.approx(0.4)
    assert s.mean_faithfulness == pytest.approx(1.0)
    # The flag share: hallucinated over every judged answer (no_claims in, error out).
    assert s.flag_share == pytest.approx(1 / 4)
    assert s.histogram_groundedness == [1, 0, 1, 0, 0, 0, 0, 0, 0, 1]
    names = {t.name: t.passed for t in s.thresholds(max_flag_share=0.25)}
    # The judge error fails the gate even though the flag share passes.
    assert names == {"flag share": True, "judge errors": False, "truncated inputs": True}
    assert all(t.passed for t in s.thresholds(max_flag_share=0.25, max_errors=1))


def test_thresholds_fail_when_nothing_was_scored() -> None:
    s = CheckSummary()
    s.add(_row(1), _ev("no_claims"))
    results = s.thresholds(min_groundedness=0.5, max_flag_share=0.5)
    # No scored answer for the mean; the no_claims answer is judged, and not flagged.
    assert [t.passed for t in results] == [False, True, True, True]
    assert "no scored answer" in results[0].text
    assert results[1].text == "flag share 0.0% <= 50.0% (0 of 1 judged answer)"


def test_threshold_boundaries_are_inclusive() -> None:
    s = CheckSummary()
    s.add(_row(1), _ev("grounded", 1.0, 0.7))
    s.add(_row(2), _ev("hallucinated", 0.5, 0.5, bad=1))
    results = s.thresholds(min_faithfulness=0.75, min_groundedness=0.6, max_flag_share=0.5)
    assert [t.passed for t in results] == [True, True, True, True, True]
    results = s.thresholds(min_faithfulness=0.76, min_groundedness=0.61, max_flag_share=0.49)
    assert [t.passed for t in results] == [False, False, False, True, True]


def test_balanced_accuracy_and_confusion() -> None:
    s = CheckSummary()
    # 3 human-hallucinated: 2 flagged (one via insufficient_context), 1 missed.
    s.add(_row(1, "hallucinated"), _ev("hallucinated", 1.0, 0.0, bad=1))
    s.add(_row(2, "hallucinated"), _ev("insufficient_context", 1.0, 0.0, bad=1))
    s.add(_row(3, "hallucinated"), _ev("grounded", 1.0, 1.0))
    # 2 human-faithful: 1 right, 1 flagged; the error row is left out.
    s.add(_row(4, "faithful"), _ev("grounded", 1.0, 1.0))
    s.add(_row(5, "faithful"), _ev("hallucinated", 1.0, 0.5, bad=1))
    s.add(_row(6, "faithful"), _ev("error"))
    s.add(_row(7), _ev("grounded", 1.0, 1.0))  # unlabelled
    assert s.labelled == 6
    assert s.confusion[("faithful", "error")] == 1
    assert s.balanced_accuracy == pytest.approx((2 / 3 + 1 / 2) / 2)
    only_one_class = CheckSummary()
    only_one_class.add(_row(1, "faithful"), _ev("grounded", 1.0, 1.0))
    assert only_one_class.balanced_accuracy is None


def test_worst_keeps_the_k_lowest_in_bounded_memory() -> None:
    s = CheckSummary(worst_kept=3)
    scores = [0.9, 0.1, 0.5, 0.0, 0.7, 0.0, 0.3, 1.0]
    for i, g in enumerate(scores, start=1):
        s.add(_row(i), _ev("hallucinated" if g < 1 else "grounded", 1.0, g, bad=1 if g < 1 else 0))
    assert len(s._worst) == 3
    # Lowest groundedness first; the tie at 0.0 keeps input order.
    assert [(w.number, w.groundedness) for w in s.worst] == [(4, 0.0), (6, 0.0), (2, 0.1)]
    # Contradictions (low faithfulness) rank worse than low groundedness.
    s.add(_row(9), _ev("hallucinated", 0.5, 0.9, bad=1))
    assert s.worst[0].number == 9


def test_render_shows_the_tables() -> None:
    s = CheckSummary(source="set.jsonl", judge="local")
    s.add(_row(1, "faithful"), _ev("grounded", 1.0, 1.0))
    s.add(_row(2, "hallucinated"), _ev("hallucinated", 1.0, 0.0, bad=2))
    text = s.render(s.thresholds(max_flag_share=0.1), 1)
    assert "hallucinated                1" in text
    assert "balanced accuracy 1.000" in text
    assert "r2 (row 2) hallucinated" in text and '? unsupported: "claim 0"' in text
    assert "FAIL  flag share 50.0% > 10.0%" in text
    assert text.endswith("result: FAIL (a threshold failed), exit 1")


def test_render_says_bad_input_one_class_and_one_answer_in_words() -> None:
    from groundwatch.check.rows import InvalidRow

    s = CheckSummary(source="set.jsonl", judge="local")
    s.add(_row(1, "faithful"), _ev("grounded", 1.0, 1.0))  # a file's "grounded" is faithful
    s.add_invalid(InvalidRow(2, "answer", "row 2: field 'answer' is missing", None))
    text = s.render(s.thresholds(max_flag_share=0.0), 2)
    gate = text.split("\ngate\n")[1].splitlines()
    # The bad input is a gate line of its own, not only the result's parenthesis.
    assert gate[-2] == "  FAIL  invalid rows 1 > 0 allowed (bad input: exit 2)"
    assert gate[-1] == "result: FAIL (bad input), exit 2"
    assert "(0 of 1 judged answer)" in text and "judged answers)" not in text
    assert "1 audit labels of 1 judged answers; the audit labels alone" in text
    assert "(1 labelled row)" in text
    # The human-label row says which labels it counts.
    assert any(line.startswith("faithful/grounded ") for line in text.splitlines())
    # No balanced accuracy from one class, and the line says why.
    assert (
        "balanced accuracy - (needs rows of both human labels; none labelled hallucinated)" in text
    )
