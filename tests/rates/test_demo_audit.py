"""``groundwatch demo``'s simulated audit: the flag share, the estimate and its interval."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from groundwatch.demo.simulated_audit import rate_lines
from groundwatch.types import Evaluation

ROOT = Path(__file__).resolve().parents[2]


def _answers(seed: int, size: int = 400) -> list[tuple[Evaluation, bool]]:
    """A judge that flags every hallucination and a third of the faithful answers too."""
    rng = random.Random(seed)
    out = []
    for _ in range(size):
        truth = rng.random() < 0.1
        flagged = truth or rng.random() < 0.33
        probability = 0.8 if flagged else 0.1
        label = "hallucinated" if flagged else "grounded"
        out.append(
            (Evaluation(label=label, judge="demo", hallucination_probability=probability), truth)
        )
    return out


def _interval(line: str) -> tuple[float, float, float]:
    found = re.search(r"(\d+\.\d)%  \(90% interval (\d+\.\d)%–(\d+\.\d)%", line)
    assert found, line
    return tuple(float(x) / 100 for x in found.groups())  # type: ignore[return-value]


def test_the_audit_estimate_covers_the_truth_the_flag_share_does_not() -> None:
    answers = _answers(1)
    truth = sum(t for _, t in answers) / len(answers)
    lines = rate_lines(answers, 100, seed=3)
    assert lines[0].startswith(f"Hallucination rate of the 400 scored answers: really {truth:.1%}")
    flag_share = float(lines[0].rsplit("flags ", 1)[1].rstrip("%")) / 100
    assert flag_share > truth + 0.2  # the over-flagging judge
    assert "no correction" in lines[1]  # "demo" has no measured error rates
    assert lines[2].startswith("  audit of 100")
    estimate, lower, upper = _interval(lines[2])
    assert lower <= truth <= upper and upper - lower < 0.15
    assert abs(estimate - truth) < 0.05


def test_no_audit_and_errors_left_out() -> None:
    answers = [*_answers(2, 50), (Evaluation(label="error", judge="demo"), True)]
    lines = rate_lines(answers, 0, seed=1)
    assert len(lines) == 2 and "of the 50 scored answers" in lines[0]
    assert rate_lines([(Evaluation(label="error"), True)], 10, seed=1) == []


def test_an_audit_larger_than_the_scored_answers_labels_them_all() -> None:
    lines = rate_lines(_answers(3, 40), 100, seed=1)
    assert lines[2].startswith("  audit of 40") and "the labels alone" in lines[2]


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
    assert lines[head + 1].startswith("  without labels")
    assert lines[head + 2].startswith("  audit of 20")
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
