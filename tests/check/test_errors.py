"""``check`` fails with a sentence: bad rows and files named in words, exit 2 for bad input and
usage, 1 for a failure while running, one line and no traceback."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from groundwatch import Judgement
from groundwatch.check import cli as check_cli
from groundwatch.check.rows import InvalidRow, read_rows

from .conftest import GROUNDED, run_cli, write_jsonl

ROW = json.dumps(GROUNDED)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (ROW[:-1], "the line ends before the JSON object is closed: a '}' is missing at the end"),
        ('{"answer": "a", "contexts": ["x"}', "a ']' is missing before column 33"),
        ('{"answer": "a", "contexts": ["x"]}}', "more than one JSON value on the line"),
        ("{'answer': 'a', 'contexts': ['x']}", "names must be in double quotes"),
        ('{"answer": "a", "contexts": ["x"],}', "a comma before '}' (JSON allows none)"),
        ('{"answer": "a, "contexts": ["x"]}', "at column 17"),
        ("{", "the line ends before the JSON object is closed"),
        ("[", "a JSON array: check reads JSON Lines, one object per line"),
        ("answer: a", "not JSON: a JSON Lines row starts with '{'"),
    ],
)
def test_broken_json_is_named_in_words_without_a_made_up_field(
    tmp_path: Path, line: str, words: str
) -> None:
    data = write_jsonl(tmp_path / "bad.jsonl", [GROUNDED, line])
    first, second = read_rows(data)
    assert not isinstance(first, InvalidRow)
    assert isinstance(second, InvalidRow)
    assert second.field is None
    text = str(second)
    assert text.startswith("row 2: not valid JSON: "), text
    assert words in text, text
    assert "(line)" not in text and "Expecting" not in text


def test_null_fields_are_reported_as_null_not_missing(tmp_path: Path) -> None:
    rows = [
        {"answer": None, "contexts": ["x"]},
        {"answer": "a", "contexts": None},
        {"response": None, "contexts": ["x"]},
        {"contexts": ["x"]},
    ]
    data = write_jsonl(tmp_path / "nulls.jsonl", rows)
    bad = [str(r) for r in read_rows(data)]
    assert bad == [
        "row 1: field 'answer': null; expected a string (the answer to check)",
        "row 2: field 'contexts': null; expected a list of passages",
        "row 3: field 'response': null; expected a string (the answer to check)",
        "row 4: field 'answer': missing (the answer to check)",
    ]


def test_a_directory_is_named_a_directory(tmp_path: Path) -> None:
    for target in (tmp_path / "golden.jsonl", tmp_path / "golden"):
        target.mkdir()
        proc = run_cli(target)
        assert proc.returncode == 2
        assert proc.stderr == f"groundwatch check: error: {target} is a directory, not a file\n"
        assert proc.stdout == ""


@pytest.mark.parametrize(
    ("content", "reason"),
    [("", "is empty"), ("\n  \n\n", "has only blank lines"), ("id,answer,contexts\n", "no rows")],
)
def test_an_empty_file_gives_the_reason_first_and_nothing_else(
    tmp_path: Path, content: str, reason: str
) -> None:
    data = tmp_path / ("empty.csv" if "," in content else "empty.jsonl")
    data.write_text(content, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = run_cli(data, "--json", out)
    assert proc.returncode == 2
    # One line: no zero tables, no gate, no FAIL before (or after) the real reason.
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("groundwatch check: error: "), proc.stderr
    assert reason in lines[0]
    assert not out.exists()


def test_help_agrees_with_itself_about_the_gate_defaults() -> None:
    parser = argparse.ArgumentParser(prog="groundwatch")
    check_cli.add_parser(parser.add_subparsers())
    check = parser._subparsers._group_actions[0].choices["check"]  # type: ignore[union-attr]
    gate = next(g for g in check._action_groups if (g.title or "").startswith("gate"))
    text = " ".join(check.format_help().split())
    for action in gate._group_actions:
        if action.default not in (None, False):
            # An option with a default is always checked: its help says the default, and the
            # group's title does not claim that it is checked only when given.
            assert "default" in (action.help or ""), action.option_strings
            assert "only when given" not in (gate.title or "") + (gate.description or "")
    assert "--allow-truncated" in text
    # The description's exit codes name what the gate checks by default.
    assert "a truncated answer or passage" in text


def test_a_failure_while_running_exits_1_with_one_line(tmp_path: Path) -> None:
    # /dev/full opens fine (so the run starts: not a usage error) and then cannot be written.
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    data = write_jsonl(tmp_path / "ok.jsonl", [GROUNDED] * 50)
    proc = run_cli(data, "--json", "/dev/full")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("groundwatch check: error: ")
    assert "No space left on device" in proc.stderr


def test_a_file_of_only_bad_rows_names_them_without_zero_tables(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "bad.jsonl", [{"answer": None, "contexts": ["x"]}, "{"])
    proc = run_cli(data)
    assert proc.returncode == 2
    assert "no row could be checked: every row is invalid (2)" in proc.stdout
    assert "row 1: field 'answer': null" in proc.stdout
    assert "grounded " not in proc.stdout and "gate" not in proc.stdout
    assert proc.stdout.rstrip().endswith("result: FAIL (bad input), exit 2")


def _closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("rows", [1, 40])
def test_an_endpoint_that_cannot_be_reached_stops_with_its_cause_and_address(
    tmp_path: Path, rows: int
) -> None:
    data = write_jsonl(tmp_path / "rows.jsonl", [{**GROUNDED, "id": f"r{i}"} for i in range(rows)])
    url = _closed_port_url()
    proc = run_cli(data, "--judge", "openai", "--model", "m", "--base-url", url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""  # no summary of a run that judged nothing
    (line,) = proc.stderr.strip().splitlines()  # said once, whatever the file's length
    assert line.startswith("groundwatch check: error: the judge cannot reach its endpoint")
    assert f"connection failed to {url}: ConnectionRefusedError" in line
    assert "--base-url" in line


class _ReachedOnce:
    """A judge whose endpoint answers the first row and is gone for the rest."""

    name = "reached-once"

    def __init__(self) -> None:
        self.calls = 0

    async def judge(self, answer: str, contexts: list[Any], question: str | None) -> Judgement:
        self.calls += 1
        if self.calls == 1:
            return Judgement(claims=[])
        return Judgement(error="connection failed to http://x/v1: gone", error_type="connection")


def test_an_endpoint_lost_after_the_first_row_fails_the_rows_not_the_run(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "rows.jsonl", [{**GROUNDED, "id": f"r{i}"} for i in range(5)])
    gate = check_cli.GateOptions(max_flag_share=None)
    code, summary, _ = check_cli.run_check(data, _ReachedOnce(), gate, concurrency=1)
    assert code == 1 and len(summary.errors) == 4
