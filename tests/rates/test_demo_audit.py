"""``groundwatch demo``'s simulated audit: the flag share, the estimate and its interval."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from groundwatch.demo.simulated_audit import ReviewedAnswer, rate_lines
from groundwatch.rates import METHOD_WORDS
from groundwatch.types import Evaluation

ROOT = Path(__file__).resolve().parents[2]


def _answers(seed: int, size: int = 400, audit: float = 0.25) -> list[ReviewedAnswer]:
    """A judge that flags every hallucination and a third of the faithful answers too; a
    random ``audit`` share of the answers labelled."""
    rng = random.Random(seed)
    out = []
    for _ in range(size):
        truth = rng.random() < 0.1
        flagged = truth or rng.random() < 0.33
        probability = 0.8 if flagged else 0.1
        label = "hallucinated" if flagged else "grounded"
        evaluation = Evaluation(label=label, judge="demo", hallucination_probability=probability)
        out.append(ReviewedAnswer(evaluation, truth, rng.random() < audit))
    return out


def _interval(line: str) -> tuple[float, float, float]:
    found = re.search(r"(\d+\.\d)%  \(90% interval (\d+\.\d)%–(\d+\.\d)%", line)
    assert found, line
    return tuple(float(x) / 100 for x in found.groups())  # type: ignore[return-value]


def test_the_audit_estimate_covers_the_truth_the_flag_share_does_not() -> None:
    answers = _answers(1)
    truth = sum(a.invented for a in answers) / len(answers)
    audited = sum(a.audited for a in answers)
    lines = rate_lines(answers)
    assert lines[0] == (
        f"Hallucination rate of the 400 scored answers: really {truth:.1%} (the demo knows)"
    )
    assert lines[1].startswith("  flag share") and "not the rate" in lines[1]
    flag_share = float(lines[1].split()[2].rstrip("%")) / 100
    assert flag_share > truth + 0.2  # the over-flagging judge
    assert lines[2].startswith(f"  audit of {audited}")
    estimate, lower, upper = _interval(lines[2])
    assert lower <= truth <= upper and upper - lower < 0.15
    assert abs(estimate - truth) < 0.05


def test_without_an_audit_the_rate_is_unknown_and_no_number_is_called_the_rate() -> None:
    answers = [*_answers(2, 50, audit=0.0), ReviewedAnswer(Evaluation(label="error"), True, True)]
    lines = rate_lines(answers)
    assert len(lines) == 3 and "of the 50 scored answers" in lines[0]
    assert lines[2].startswith("  no audit") and "rate unknown" in lines[2]
    assert "%" not in lines[2].split("points")[0].split("gives it")[0]  # no rate, no interval
    assert rate_lines([ReviewedAnswer(Evaluation(label="error"), True, True)]) == []


def test_a_method_is_worded_as_rates_words_it() -> None:
    lines = rate_lines(_answers(3, 40, audit=1.0))
    assert lines[2].startswith("  audit of 40")
    assert METHOD_WORDS["labels"].split(":")[0] in lines[2]


def test_the_demo_prints_the_block() -> None:
    pytest.importorskip("langchain_core")
    env = {**os.environ}
    paths = [str(ROOT / "src"), str(ROOT / "integrations" / "langchain" / "src")]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-m", "groundwatch", "demo", "--requests", "80", "--audit", "20"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    (head,) = [i for i, line in enumerate(lines) if line.startswith("Hallucination rate of the")]
    really = float(lines[head].split("really ")[1].split("%")[0]) / 100
    assert lines[head + 1].startswith("  flag share")
    assert lines[head + 2].startswith("  audit of ")
    _, lower, upper = _interval(lines[head + 2])
    assert lower <= really <= upper
    bad = subprocess.run(
        [sys.executable, "-m", "groundwatch", "demo", "--audit", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "--audit" in bad.stderr
