"""The README's example runs as documented and prints one evaluation per question."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langchain_rag.py"


def test_example_prints_an_evaluation_per_question() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120, check=True
    )
    verdict_lines = [line for line in done.stdout.splitlines() if "-> " in line]
    assert len(verdict_lines) == 2, done.stdout
    assert all("faithfulness=" in line and "groundedness=" in line for line in verdict_lines)
    assert "3 passages retrieved" in done.stdout
    assert "Traceback" not in done.stderr
