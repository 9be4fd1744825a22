"""The hallucination rate in ``groundwatch check``: which labels count as an audit, the line,
``--json``'s ``rate``, and the gate on the estimate's upper bound."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from statistics import NormalDist

import pytest

from groundwatch.check.rows import Row, parse_row
from groundwatch.check.summary import CheckSummary
from groundwatch.rates import (
    RateEstimate,
    estimate_rate,
    wilson_interval,
)
from groundwatch.types import Evaluation

from .conftest import GOLDEN_SET, run_cli

Z90 = NormalDist().inv_cdf(0.95)


def _row(n: int, label: str | None = None, audit: bool = False, answer: str = "a") -> Row:
    return Row(n, f"r{n}", None, ["ctx"], answer, label, audit=audit)  # type: ignore[arg-type]


def _ev(flagged: bool, probability: float | None = None, judge: str = "j") -> Evaluation:
    label = "hallucinated" if flagged else "grounded"
    return Evaluation(label=label, judge=judge, hallucination_probability=probability)


def _stream(
    size: int, labelled: int, *, audit: bool = False, seed: int = 0, known: bool = True
) -> CheckSummary:
    """A summary of ``size`` judged rows, 10 % hallucinated, the judge informative and
    over-flagging; the first ``labelled`` rows (a random order already) carry labels."""
    rng = random.Random(seed)
    summary = CheckSummary(judge="j")
    for n in range(size):
        truth = rng.random() < 0.1
        f = min(1.0, max(0.0, (0.7 if truth else 0.3) + rng.gauss(0, 0.15)))
        label = ("hallucinated" if truth else "faithful") if n < labelled else None
        summary.add(
            _row(n, label, audit=audit and n < labelled), _ev(f > 0.4, f if known else None)
        )
    return summary


def test_a_fully_labelled_file_gives_the_labels_own_rate_and_interval() -> None:
    summary = _stream(300, 300)
    r = summary.rate
    positives = summary.rate_totals.label_sum
    assert summary.rate_basis == "census"
    assert (r.method, r.labelled, r.scored) == ("labels", 300, 300)
    assert r.estimate == positives / 300
    assert (r.lower, r.upper) == pytest.approx(wilson_interval(positives, 300, Z90))


def test_rows_marked_audit_are_an_audit_and_the_line_says_prediction_powered() -> None:
    summary = _stream(1000, 200, audit=True)
    r = summary.rate
    assert summary.rate_basis == "audit"
    assert (r.method, r.labelled, r.scored) == ("ppi", 200, 1000)
    assert r == estimate_rate(summary.rate_totals, confidence=0.9)
    line = summary.rate_lines()[0]
    pct = r"\d+\.\d"
    assert re.fullmatch(
        rf"hallucination rate {pct} % \(90 % interval {pct} %–{pct} %; 200 audit labels of "
        rf"1,000 judged answers; prediction-powered\); flag share {pct} %",
        line,
    ), line
    assert f"hallucination rate {100 * r.estimate:.1f} %" in line
    assert f"flag share {100 * r.flag_share:.1f} %" in line


def test_unmarked_partial_labels_are_not_an_audit() -> None:
    summary = _stream(1000, 200)
    r = summary.rate
    assert summary.rate_basis == "not_random"
    assert (r.method, r.labelled, r.estimate, r.lower, r.upper) == ("no_audit", 0, None, None, None)
    lines = summary.rate_lines()
    assert lines[0].startswith("hallucination rate unknown until an audit (flag share ")
    assert lines[-1].startswith("  labels used: none: the labels were not chosen at random")
    assert "--labels-are-random" in lines[-1]


def test_labels_declared_random_enter_the_estimate() -> None:
    summary = dataclasses.replace(_stream(1000, 200), labels_are_random=True)
    assert summary.rate_basis == "declared"
    assert (summary.rate.method, summary.rate.labelled) == ("ppi", 200)


def test_only_the_marked_rows_labels_enter_an_audit() -> None:
    summary = _stream(1000, 200, audit=True)
    summary.add(_row(5000, "hallucinated"), _ev(True, 0.9))  # a complaint, labelled by hand
    assert summary.rate.labelled == 200 and summary.rate_totals.labelled == 201
    assert "1 labelled rows not marked" in summary.rate_lines()[-1]


def test_judge_errors_are_out_of_the_rate() -> None:
    summary = _stream(100, 100)
    summary.add(_row(100, "hallucinated"), Evaluation(label="error", judge="j"))
    assert summary.rate_basis == "census"
    assert (summary.rate.scored, summary.rate.labelled) == (100, 100)


def test_no_claims_is_in_the_population_and_not_flagged() -> None:
    summary = CheckSummary()
    summary.add(_row(1), _ev(True, 0.9))
    summary.add(_row(2), Evaluation(label="no_claims", judge="j", hallucination_probability=0.1))
    assert (summary.rate.scored, summary.rate.flag_share) == (2, 0.5)


@pytest.mark.parametrize("known", [True, False])
def test_an_unknown_probability_is_the_flag(known: bool) -> None:
    summary = _stream(1000, 200, audit=True, known=known)
    totals = summary.audit_totals
    if known:
        assert totals.probability_sum != totals.flagged
    else:
        assert totals.probability_sum == totals.flagged
    assert summary.rate.method == "ppi"


def test_a_stray_probability_is_taken_as_unknown() -> None:
    summary = CheckSummary()
    summary.add(_row(1), _ev(True, 1.7))
    assert summary.rate_totals.probability_sum == 1.0


@pytest.mark.parametrize("judge", ["local", "j"])
def test_without_audit_labels_no_interval_is_the_rate(judge: str) -> None:
    """A held-out-style stream without labels (the judge over-flags, its shipped error rates
    exist for "local"): nothing is reported as the rate, the summary says it is unknown and
    how many labels give which precision, and the rate gate refuses instead of passing."""
    summary = CheckSummary()
    rng = random.Random(3)
    for n in range(1000):
        truth = rng.random() < 0.18
        flagged = rng.random() < (0.9 if truth else 0.08)
        summary.add(_row(n), _ev(flagged, 0.7 if flagged else 0.2, judge=judge))
    r = summary.rate
    assert (r.method, r.estimate, r.lower, r.upper) == ("no_audit", None, None, None)
    text = "\n".join(summary.rate_lines())
    assert "hallucination rate unknown until an audit" in text
    assert "200 labels ±2–5 points" in text
    assert not re.search(r"hallucination rate \d", text)
    (gate,) = [t for t in summary.thresholds(max_rate_upper_bound=0.15) if "upper" in t.name]
    assert (gate.passed, gate.refused) == (False, True)
    assert not gate.blames("hallucinated", 0.0, 0.0)  # the input is at fault, no answer
    assert "no audit labels" in gate.text and "--labels-are-random" in gate.text
    assert summary.to_dict()["rate"]["estimate"] is None


def test_the_gate_on_the_upper_bound() -> None:
    summary = _stream(300, 300)
    upper = summary.rate.upper
    (failed,) = [
        t for t in summary.thresholds(max_rate_upper_bound=upper - 0.01) if "upper" in t.name
    ]
    (passed,) = [
        t for t in summary.thresholds(max_rate_upper_bound=upper + 0.01) if "upper" in t.name
    ]
    assert not failed.passed and passed.passed
    assert failed.text.startswith(f"hallucination rate upper bound {100 * upper:.1f} % > ")
    assert failed.blames("hallucinated", 0.0, 0.0) and not failed.blames("grounded", 1.0, 1.0)
    assert not CheckSummary().thresholds(max_rate_upper_bound=1.0)[0].passed  # nothing judged


def test_the_json_summary_has_exactly_the_estimates_fields() -> None:
    summary = _stream(300, 300)
    out = summary.to_dict()
    assert list(out["rate"]) == [f.name for f in dataclasses.fields(RateEstimate)]
    assert out["rate"] == dataclasses.asdict(summary.rate)
    assert out["rate_labels"] == "census"


@pytest.mark.parametrize(
    ("cell", "audit"), [(True, True), (False, False), ("true", True), ("0", False), ("", False)]
)
def test_the_audit_column(cell: object, audit: bool) -> None:
    row = parse_row(1, {"answer": "a", "contexts": ["c"], "audit": cell}, contexts_are_json=False)
    assert isinstance(row, Row) and row.audit is audit


def test_a_bad_audit_cell_is_an_invalid_row() -> None:
    bad = parse_row(
        1, {"answer": "a", "contexts": ["c"], "audit": "maybe"}, contexts_are_json=False
    )
    assert not isinstance(bad, Row) and bad.field == "audit"


def test_check_on_a_fully_labelled_file(tmp_path: Path) -> None:
    """The golden set: every row labelled, 6 of 12 hallucinated. The line, --json's rate and
    the gate on the upper bound, end to end."""
    out, junit = tmp_path / "out.jsonl", tmp_path / "junit.xml"
    lower, upper = wilson_interval(6, 12, Z90)
    common = ("--json", out, "--junit", junit, "--max-flag-share", "1")
    proc = run_cli(GOLDEN_SET, *common, "--max-rate-upper-bound", f"{upper - 0.01:.4f}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        f"hallucination rate 50.0 % (90 % interval {100 * lower:.1f} %–{100 * upper:.1f} %; "
        "12 audit labels of 12 judged answers; the audit labels alone); flag share 41.7 %"
        in proc.stdout
    )
    assert "labels used: every row's label (the file is fully labelled)" in proc.stdout
    assert "FAIL  hallucination rate upper bound" in proc.stdout
    rate = json.loads(out.read_text().splitlines()[-1])["rate"]
    assert rate == {
        "flag_share": pytest.approx(5 / 12),
        "estimate": 0.5,
        "lower": pytest.approx(lower),
        "upper": pytest.approx(upper),
        "confidence": 0.9,
        "method": "labels",
        "scored": 12,
        "labelled": 12,
    }
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["rate_method"] == "labels"
    assert properties["rate_labels"] == "census"
    assert float(properties["flag_share"]) == pytest.approx(5 / 12, abs=1e-6)
    assert "hallucination_rate" not in properties
    assert float(properties["rate_upper"]) == pytest.approx(upper, abs=1e-6)
    (gate,) = [
        c
        for c in ET.parse(junit).getroot().iter("testcase")
        if c.get("name") == "gate: hallucination rate upper bound"
    ]
    assert gate.find("failure") is not None
    assert run_cli(GOLDEN_SET, *common, "--max-rate-upper-bound", "0.8").returncode == 0


@pytest.mark.parametrize(
    ("marked", "options", "expected"),
    [
        (True, (), "30 audit labels of 36 judged answers"),
        (False, (), "labels used: none: the labels were not chosen at random"),
        (False, ("--labels-are-random",), "30 audit labels of 36 judged answers"),
    ],
)
def test_check_on_a_partly_labelled_file(
    tmp_path: Path, marked: bool, options: tuple[str, ...], expected: str
) -> None:
    """The golden set three times over, 30 of its 36 rows labelled: an audit when the rows say
    so (``"audit": true``) or the option does, never by default."""
    rows = [json.loads(line) for line in GOLDEN_SET.read_text("utf-8").splitlines()] * 3
    data = tmp_path / "partly.jsonl"
    with data.open("w", encoding="utf-8") as out:
        for n, row in enumerate(rows):
            row = {**row, "id": f"{row['id']}-{n}"}
            if n >= 30:
                row.pop("label")
            elif marked:
                row["audit"] = True
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary_out = tmp_path / "out.jsonl"
    proc = run_cli(data, "--max-flag-share", "1", "--json", summary_out, *options)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert expected in proc.stdout
    summary = json.loads(summary_out.read_text("utf-8").splitlines()[-1])
    assert summary["rate"]["labelled"] == (0 if "not chosen" in expected else 30)
    assert summary["rate_labels"] == {(True, ()): "audit", (False, ()): "not_random"}.get(
        (marked, options), "declared"
    )


def _unlabelled_copy(tmp_path: Path) -> Path:
    data = tmp_path / "unlabelled.jsonl"
    rows = [json.loads(line) for line in GOLDEN_SET.read_text("utf-8").splitlines()]
    data.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "label"}) + "\n" for r in rows)
    )
    return data


def test_the_rate_gate_refuses_a_file_without_audit_labels(tmp_path: Path) -> None:
    """Exit 2 before any scoring, naming the fix; a generous bound passes nothing."""
    data = _unlabelled_copy(tmp_path)
    for bound in ("0.15", "25%", "1"):
        proc = run_cli(data, "--max-flag-share", "1", "--max-rate-upper-bound", bound)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "no audit labels" in proc.stderr and "--labels-are-random" in proc.stderr
        assert 'DatasetSink(when="audit")' in proc.stderr
        assert proc.stdout == ""  # refused before scoring


def test_without_labels_check_reports_the_flag_share_and_no_rate(tmp_path: Path) -> None:
    data, out, junit = _unlabelled_copy(tmp_path), tmp_path / "o.jsonl", tmp_path / "j.xml"
    proc = run_cli(data, "--max-flag-share", "1", "--json", out, "--junit", junit)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "hallucination rate unknown until an audit (flag share 41.7 %" in proc.stdout
    assert not re.search(r"hallucination rate \d", proc.stdout)
    summary = json.loads(out.read_text("utf-8").splitlines()[-1])
    assert summary["flag_share"] == pytest.approx(5 / 12)
    assert "hallucination_rate" not in summary
    assert (summary["rate"]["estimate"], summary["rate"]["lower"], summary["rate"]["upper"]) == (
        None,
        None,
        None,
    )
    assert summary["rate"]["method"] == "no_audit" and summary["rate_labels"] == "none"
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert (properties["rate_estimate"], properties["rate_method"]) == ("", "no_audit")


def test_the_flag_share_gate_has_its_name_and_the_former_name_warns(tmp_path: Path) -> None:
    new = run_cli(GOLDEN_SET, "--max-flag-share", "40%")
    assert new.returncode == 1, new.stdout + new.stderr
    assert "FAIL  flag share 41.7% > 40.0%" in new.stdout
    old = run_cli(GOLDEN_SET, "--max-hallucination-rate", "0.4")
    assert old.returncode == 1
    assert "--max-hallucination-rate is now --max-flag-share" in old.stderr
    assert "FAIL  flag share 41.7% > 40.0%" in old.stdout
    assert run_cli(GOLDEN_SET, "--max-hallucination-rate", "0.5").returncode == 0
