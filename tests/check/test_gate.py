"""The gate's default, and exit code, summary and JUnit file agreeing by construction."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .conftest import CONTEXT, GOLDEN_SET, GROUNDED, INVENTED, run_cli, write_jsonl


def _junit(path: Path) -> tuple[list[str], list[str]]:
    """(names of failed answer cases, names of failed gate cases)."""
    root = ET.parse(path).getroot()
    failed = [c.get("name", "") for c in root.iter("testcase") if c.find("failure") is not None]
    gates = [n for n in failed if n.startswith("gate: ")]
    assert root.get("failures") == str(len(failed))
    return [n for n in failed if not n.startswith("gate: ")], gates


def test_no_options_fails_on_any_hallucinated_answer(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    proc = run_cli(GOLDEN_SET, "--junit", junit)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL  flag share 41.7% > 0.0% (5 of 12 judged answers)" in proc.stdout
    assert "result: FAIL (a threshold failed), exit 1" in proc.stdout
    answers, gates = _junit(junit)
    assert gates == ["gate: flag share"]
    assert len(answers) == 5  # exactly the hallucinated answers, not the insufficient_context one


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--max-flag-share", "1"],
        ["--max-flag-share", "0.5"],
        ["--max-flag-share", "1", "--min-groundedness", "0.8"],
        ["--max-flag-share", "1", "--min-faithfulness", "0.5"],
        ["--max-flag-share", "0.2", "--min-groundedness", "0.3"],
    ],
)
def test_exit_code_summary_and_junit_agree(tmp_path: Path, options: list[str]) -> None:
    junit = tmp_path / "junit.xml"
    proc = run_cli(GOLDEN_SET, "--junit", junit, *options)
    answers, gates = _junit(junit)
    passed = proc.returncode == 0
    assert proc.returncode in (0, 1), proc.stderr
    assert ("result: PASS, exit 0" in proc.stdout) is passed
    assert (not answers and not gates) is passed, (answers, gates)
    assert bool(gates) is not passed


def test_relaxed_gate_passes_and_keeps_the_claims_out_of_failures(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    proc = run_cli(GOLDEN_SET, "--junit", junit, "--max-flag-share", "1")
    assert proc.returncode == 0, proc.stdout
    assert _junit(junit) == ([], [])
    # The flagged answers still say what was wrong, in their output.
    text = junit.read_text("utf-8")
    assert "label hallucinated" in text and "unsupported" in text


@pytest.mark.parametrize(
    ("convention", "fields"),
    [
        ("ragas", ("user_input", "retrieved_contexts", "response")),
        ("deepeval", ("input", "retrieval_context", "actual_output")),
    ],
)
def test_reads_ragas_and_deepeval_field_names(
    tmp_path: Path, convention: str, fields: tuple[str, str, str]
) -> None:
    q, c, a = fields
    rows = [
        {"id": row["id"], q: row["question"], c: row["contexts"], a: row["answer"]}
        for row in (GROUNDED, INVENTED)
    ]
    data = write_jsonl(tmp_path / f"{convention}.jsonl", rows)
    proc = run_cli(data, "--max-flag-share", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(1 of 2 judged answers)" in proc.stdout  # both rows read and scored


def test_an_alias_names_itself_in_errors(tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "bad.jsonl",
        [{"user_input": "q", "retrieved_contexts": CONTEXT, "response": "An answer."}],
    )
    proc = run_cli(data)
    assert proc.returncode == 2
    assert "field 'retrieved_contexts': expected a list of passages, got a string" in proc.stdout
