"""``groundwatch check --baseline previous.json``: rows that newly fail, newly pass, changed label,
were added or removed, against a previous run's ``--json`` output; the ``--max-regressions``
gate, with the exit code and the JUnit file agreeing."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from .conftest import CONTEXT, GROUNDED, INVENTED, run_cli, write_jsonl

WRONG_YEAR = "The Eiffel Tower was completed in 1899."
REFUSAL = "I don't know."


def _row(row_id: str, answer: str) -> dict[str, Any]:
    return {**GROUNDED, "id": row_id, "answer": answer, "label": ""}


def _baseline(tmp_path: Path) -> Path:
    before = write_jsonl(
        tmp_path / "before.jsonl",
        [
            _row("a", GROUNDED["answer"]),
            _row("b", WRONG_YEAR),
            _row("c", GROUNDED["answer"]),
            _row("d", INVENTED["answer"]),
        ],
    )
    out = tmp_path / "previous.json"
    proc = run_cli(before, "--json", out, "--max-flag-share", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _now(tmp_path: Path) -> Path:
    return write_jsonl(
        tmp_path / "now.jsonl",
        [
            _row("a", WRONG_YEAR),  # grounded -> hallucinated: a regression
            _row("b", GROUNDED["answer"]),  # hallucinated -> grounded
            _row("c", REFUSAL),  # grounded -> no_claims: passes both times
            _row("e", GROUNDED["answer"]),  # added; d is removed
        ],
    )


def _junit(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def test_changes_are_listed_and_a_regression_fails_the_gate(tmp_path: Path) -> None:
    previous = _baseline(tmp_path)
    junit, html, out = tmp_path / "junit.xml", tmp_path / "report.html", tmp_path / "now.json"
    proc = run_cli(
        _now(tmp_path),
        "--baseline",
        previous,
        "--max-flag-share",
        "1",
        "--junit",
        junit,
        "--html",
        html,
        "--json",
        out,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = proc.stdout
    assert f"against the baseline {previous} (4 rows there, 3 matched by id)" in text
    assert "newly failing 1 · newly passing 1 · label changed 1 · added 1 · removed 1" in text, text
    for line in (
        "  newly failing (1)\n    a: grounded -> hallucinated",
        "  newly passing (1)\n    b: hallucinated -> grounded",
        "  label changed (1)\n    c: grounded -> no_claims",
        "  added (1)\n    e: - -> grounded",
        "  removed (1)\n    d: hallucinated -> -",
    ):
        assert line in text, text
    assert f"FAIL  regressions 1 > 0 allowed (rows that passed in {previous} and fail now)" in text
    assert "PASS  flag share" in text  # only the regression gate failed

    # JUnit agrees with the exit code: the regressed row and the gate case fail, nothing else.
    cases = _junit(junit)
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {"a", "gate: regressions"}
    failure = cases["a"].find("failure")
    assert failure is not None and failure.attrib["type"] == "regression"
    assert "grounded in the baseline" in failure.attrib["message"]

    report = html.read_text()
    assert 'id="baseline"' in report and "newly failing" in report
    assert "a: grounded → hallucinated" in report

    summary = json.loads(out.read_text().splitlines()[-1])
    assert summary["baseline"]["newly_failing"] == 1
    assert summary["baseline"]["removed"] == 1
    assert summary["baseline"]["changes"]["added"] == [
        {"id": "e", "before": None, "after": "grounded"}
    ]


def test_max_regressions_tolerates_them_and_junit_then_has_no_failure(tmp_path: Path) -> None:
    previous = _baseline(tmp_path)
    junit = tmp_path / "junit.xml"
    proc = run_cli(
        _now(tmp_path),
        "--baseline",
        previous,
        "--max-regressions",
        "1",
        "--max-flag-share",
        "1",
        "--junit",
        junit,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS  regressions 1 <= 1 allowed" in proc.stdout
    assert not [c for c in _junit(junit).values() if c.find("failure") is not None]
    root = ET.parse(junit).getroot()
    assert root.attrib["failures"] == "0"


def test_a_run_against_itself_has_no_change(tmp_path: Path) -> None:
    previous = _baseline(tmp_path)
    proc = run_cli(tmp_path / "before.jsonl", "--baseline", previous, "--max-flag-share", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "newly failing 0 · newly passing 0 · label changed 0 · added 0 · removed 0" in (
        proc.stdout
    )
    assert "PASS  regressions 0 <= 0 allowed" in proc.stdout


def test_bad_baselines_exit_2_before_any_output(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "rows.jsonl", [GROUNDED, INVENTED])
    junit = tmp_path / "junit.xml"
    not_json = tmp_path / "broken.json"
    not_json.write_text("{not json\n")
    rows_not_output = write_jsonl(tmp_path / "rows-again.json", [GROUNDED])
    for baseline, message in (
        (tmp_path / "missing.json", "cannot read"),
        (not_json, "line 1 is not JSON"),
        (rows_not_output, "not a line of a groundwatch check --json output"),
    ):
        proc = run_cli(data, "--baseline", baseline, "--junit", junit)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert message in proc.stderr, proc.stderr
        assert not junit.exists()
    proc = run_cli(data, "--max-regressions", "2")
    assert proc.returncode == 2
    assert "--max-regressions needs --baseline" in proc.stderr


def test_rows_without_an_id_are_matched_by_row_number(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "id"} for r in (GROUNDED, INVENTED)]
    first = write_jsonl(tmp_path / "first.jsonl", rows)
    previous = tmp_path / "previous.json"
    assert run_cli(first, "--json", previous, "--max-flag-share", "1").returncode == 0
    second = write_jsonl(tmp_path / "second.jsonl", [rows[1], rows[0]])  # swapped
    proc = run_cli(second, "--baseline", previous, "--max-flag-share", "1")
    assert proc.returncode == 1
    assert "row 1: grounded -> hallucinated" in proc.stdout
    assert "row 2: hallucinated -> grounded" in proc.stdout
    assert CONTEXT  # the rows share the conftest's context
