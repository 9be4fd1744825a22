"""The examples run end to end: the embellished answer and the agent's changed number are
caught."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "llamaindex_rag.py"


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert out.count("groundwatch.label=") == 5
    assert "[hallucinated]" in out
    assert "unsupported: It is painted bright blue" in out
    assert out.count("[    grounded]") == 4


def test_agent_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / "llamaindex_agent.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.count("[    grounded]") == 2
    assert out.count("[hallucinated]") == 1
    assert "context: passage 1 (tool search_handbook)" in out
    assert "context: tool lookup_policy" in out
    assert "contradicted by tool get_order" in out
    assert "contradicted: 'Its total was 45.50 EUR.'" in out
    assert "gen_ai.conversation.id: customer-1042" in out
