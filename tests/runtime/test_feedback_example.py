"""``examples/feedback_loop.py`` runs offline as a user runs it and shows the whole loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_feedback_loop_example_runs_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "feedback_loop.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "7 gen_ai.evaluation.result events with gen_ai.evaluation.evaluator.type=human" in out
    # The judge flags the Saturday answer the user liked: agreement shows it.
    assert "returns   4 of 4 labelled answers agree (100%)" in out
    assert "shipping  1 of 2 labelled answers agree (50%)" in out
    assert "flagged.jsonl: 3 flagged rows" in out
    # check read the labelled file and printed the judge-human table.
    assert "human label vs groundwatch label (3 labelled rows)" in out
    assert "check exited 1" in out
    flagged = (tmp_path / "flagged.jsonl").read_text()
    assert "support@shop.example" not in flagged and "<email>" in flagged
    assert all(json.loads(line)["label"] == "" for line in flagged.splitlines())
