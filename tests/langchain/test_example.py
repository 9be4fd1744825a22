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


AGENT_EXAMPLE = EXAMPLE.parent / "langgraph_agent.py"


def test_agent_example_scores_each_turn_against_the_tools() -> None:
    done = subprocess.run(
        [sys.executable, str(AGENT_EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = done.stdout
    assert "Traceback" not in done.stderr
    # Two turns of one conversation, each scored against that turn's tool outputs.
    assert out.count("[customer-42] Q:") == 2, out
    # The first turn's two tools ran in parallel: their outputs come in the order they ended.
    assert (
        "context: tool get_order, tool lookup_policy" in out
        or "context: tool lookup_policy, tool get_order" in out
    ), out
    assert "-> grounded:" in out
    assert "-> hallucinated:" in out and "contradicted by tool lookup_policy" in out
    assert "contradicted  'Refunds are accepted within 90 days" in out
