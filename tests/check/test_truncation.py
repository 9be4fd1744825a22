"""The gate never passes text it did not read: a cut answer or passage fails it by default."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from groundwatch._shared import inputs as _inputs

from .conftest import CONTEXT, GROUNDED, run_cli, write_jsonl

SUPPORTED = "The Eiffel Tower stands 330 metres tall. "
CONTRADICTED = "The Eiffel Tower was completed in 1925."


def _long_answer(read: int) -> str:
    """Supported sentences up to exactly ``read`` characters, then a contradiction."""
    assert read % len(SUPPORTED) == 0
    return SUPPORTED * (read // len(SUPPORTED)) + CONTRADICTED


def test_a_cut_answer_fails_the_gate_and_says_so_in_every_output(tmp_path: Path) -> None:
    # The contradiction sits after the answer cap: the judge never reads it.
    cap = _inputs.DEFAULT_MAX_ANSWER_CHARS
    cap -= cap % len(SUPPORTED)
    row = {"id": "long", "contexts": [CONTEXT], "answer": _long_answer(cap)}
    data = write_jsonl(tmp_path / "long.jsonl", [GROUNDED, row])
    junit, html, out = tmp_path / "junit.xml", tmp_path / "report.html", tmp_path / "out.json"
    proc = run_cli(
        data,
        "--max-answer-chars",
        str(cap),
        "--junit",
        junit,
        "--html",
        html,
        "--json",
        out,
        "--worst",
        "0",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # --json holds the answer the judge read (its claims' offsets point into it), and the length
    # of the whole answer.
    by_id = {r.get("id"): r for r in map(json.loads, out.read_text().splitlines())}
    assert by_id["long"]["answer"] == row["answer"][:cap]
    assert by_id["long"]["answer_chars"] == cap + len(CONTRADICTED)
    assert "answer_chars" not in by_id["ok"]
    # A named line in the summary, and the gate line that fails.
    assert f"long (row 2): answer: {cap + len(CONTRADICTED):,} characters, " in proc.stdout
    assert f"the judge read the first {cap:,} (--max-answer-chars)" in proc.stdout
    assert "FAIL  truncated inputs 1 > 0 allowed" in proc.stdout
    assert "result: FAIL (a threshold failed), exit 1" in proc.stdout
    # The JUnit case of that row fails, and so does the gate's case.
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    failure = cases["long"].find("failure")
    assert failure is not None and failure.get("type") == "truncated"
    assert "--max-answer-chars" in (failure.get("message") or "")
    assert cases["ok"].find("failure") is None
    assert cases["gate: truncated inputs"].find("failure") is not None
    # The HTML card carries a badge, and the gate card names the reason.
    page = html.read_text(encoding="utf-8")
    assert '<span class="badge truncated"' in page
    assert page.count('class="badge truncated"') == 1
    assert "truncated inputs 1 &gt; 0 allowed" in page


def test_allowing_or_raising_the_cap_decides_what_is_read(tmp_path: Path) -> None:
    cap = 4_000 - 4_000 % len(SUPPORTED)
    row = {"id": "long", "contexts": [CONTEXT], "answer": _long_answer(cap)}
    data = write_jsonl(tmp_path / "long.jsonl", [row])
    cap_option = ("--max-answer-chars", str(cap))
    # Allowed: the part that was read is grounded, so the gate passes, and still says what it cut.
    allowed = run_cli(data, *cap_option, "--allow-truncated")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "PASS  truncated inputs 1 (allowed by --allow-truncated)" in allowed.stdout
    # Raised: the judge reads the contradiction and the gate fails on it, not on the cut.
    raised = run_cli(data, "--max-answer-chars", str(cap + 1_000))
    assert raised.returncode == 1, raised.stdout + raised.stderr
    assert "PASS  truncated inputs 0" in raised.stdout
    assert "FAIL  flag share 100.0%" in raised.stdout


def test_a_passage_past_the_context_cap_fails_and_the_cap_can_be_raised(tmp_path: Path) -> None:
    # The only supporting sentence sits past the default passage cap.
    filler = "Paris has many bridges and museums. " * 1_500  # 54,000 characters
    assert len(filler) > _inputs.DEFAULT_MAX_PASSAGE_CHARS
    row = {"id": "deep", "contexts": ["x", filler + CONTEXT], "answer": GROUNDED["answer"]}
    data = write_jsonl(tmp_path / "deep.jsonl", [row])
    out = tmp_path / "out.jsonl"
    proc = run_cli(data, "--json", out, "--max-flag-share", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "deep (row 1): contexts[1]: " in proc.stdout
    assert "(--max-context-chars)" in proc.stdout
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert first["evaluation"]["truncated"] is True
    assert first["truncation"] and first["truncation"][0].startswith("contexts[1]: ")
    raised = run_cli(data, "--max-context-chars", "100000", "--max-flag-share", "0")
    assert raised.returncode == 0, raised.stdout + raised.stderr


def test_passages_past_the_count_cap_fail_the_gate(tmp_path: Path) -> None:
    contexts = [f"Passage number {i} is about bridges." for i in range(70)] + [CONTEXT]
    row = {"id": "many", "contexts": contexts, "answer": GROUNDED["answer"]}
    data = write_jsonl(tmp_path / "many.jsonl", [row])
    proc = run_cli(data, "--max-flag-share", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "many (row 1): contexts: 71 passages, the judge read the first 64" in proc.stdout
    assert run_cli(data, "--max-passages", "100").returncode == 0


def test_a_20_mb_single_row_file_does_not_pass_silently(tmp_path: Path) -> None:
    answer = SUPPORTED * (20_000_000 // len(SUPPORTED))
    data = write_jsonl(tmp_path / "huge.jsonl", [{"contexts": [CONTEXT], "answer": answer}])
    assert data.stat().st_size > 20_000_000
    html = tmp_path / "report.html"
    proc = run_cli(data, "--html", html)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"row 1: answer: {len(answer):,} characters, the judge read the first" in proc.stdout
    assert "FAIL  truncated inputs 1 > 0 allowed" in proc.stdout
    # The card shows what the judge read and says how much it did not: not a 20 MB page.
    page = html.read_text(encoding="utf-8")
    assert len(page) < 500_000
    assert f"… {len(answer) - 20_000:,} more characters the judge did not read" in page


def test_help_names_the_caps_and_the_environment_variables() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for words in (
        "--max-answer-chars N",
        "--max-context-chars N",
        "--max-passages N",
        "--allow-truncated",
        "GROUNDWATCH_MAX_ANSWER_CHARS",
        "GROUNDWATCH_MAX_PASSAGE_CHARS",
        "GROUNDWATCH_MAX_PASSAGES",
    ):
        assert words in text, words
