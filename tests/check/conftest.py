"""Shared helpers for the ``groundwatch check`` tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from groundwatch.types import Claim, Evidence, Judgement, Passage

REPO = Path(__file__).resolve().parents[2]
GOLDEN_SET = REPO / "examples" / "golden_set.jsonl"


def write_jsonl(path: Path, rows: Sequence[dict[str, Any] | str]) -> Path:
    """Write rows (dicts, or raw lines for malformed input) as JSON Lines."""
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(row if isinstance(row, str) else json.dumps(row, ensure_ascii=False))
            f.write("\n")
    return path


def run_cli(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m groundwatch check ARGS`` in a subprocess, with this worktree's sources."""
    env = {**os.environ, **(env or {})}
    src = str(REPO / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "groundwatch", "check", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=120,
    )


CONTEXT = (
    "The Eiffel Tower, completed in 1889, stands 330 metres tall. "
    "It was designed by the engineering firm of Gustave Eiffel."
)
GROUNDED = {
    "id": "ok",
    "question": "How tall is the Eiffel Tower?",
    "contexts": [CONTEXT],
    "answer": "The Eiffel Tower was completed in 1889. It stands 330 metres tall.",
    "label": "faithful",
}
INVENTED = {
    "id": "invented",
    "question": "Who lived in the Eiffel Tower?",
    "contexts": [CONTEXT],
    "answer": "Napoleon lived at the top of the tower for ten years and painted it gold.",
    "label": "hallucinated",
}


class ScriptedJudge:
    """A judge that gives every claim of a known answer a fixed verdict with real evidence.

    The report tests need all four verdicts on known spans; the local judge only gives two.
    Scoring still runs for real (evidence is checked against the passages).
    """

    name = "scripted"

    def __init__(self, verdicts: dict[str, tuple[str, str | None]]) -> None:
        # claim text -> (verdict, evidence quote or None)
        self.verdicts = verdicts

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        claims = []
        for text, (verdict, quote) in self.verdicts.items():
            start = answer.find(text)
            if start < 0:
                continue
            evidence = []
            if quote is not None:
                for i, p in enumerate(contexts):
                    at = p.text.find(quote)
                    if at >= 0:
                        evidence.append(
                            Evidence(passage=i, start=at, end=at + len(quote), quote=quote)
                        )
                        break
            claims.append(
                Claim(
                    text=text,
                    start=start,
                    end=start + len(text),
                    verdict=verdict,  # type: ignore[arg-type]
                    evidence=evidence,
                    reason=f"scripted {verdict}",
                )
            )
        return Judgement(claims=claims, model="scripted-1")


@pytest.fixture
def golden_set() -> Path:
    return GOLDEN_SET
