"""The example runs end to end and shows the embellished answer as not grounded."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llamaindex_rag.py"


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert out.count("groundwatch.label=") == 5
    assert "[hallucinated]" in out
    assert "unsupported: It is painted bright blue" in out
    assert out.count("[    grounded]") == 4
