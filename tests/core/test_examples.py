"""The examples print what a person can read: run as a user runs them."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_names_the_evidence_passage_and_says_when_there_is_none() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    claim_lines = [line for line in done.stdout.splitlines() if line.startswith("    ")]
    assert "<- ''" not in done.stdout
    unsupported = [line for line in claim_lines if line.split()[0] == "unsupported"]
    assert unsupported and all("no evidence: " in line for line in unsupported), done.stdout
    # The made-up claim says why: its year is nowhere in the context.
    reasons = [line.split("no evidence: ")[1] for line in unsupported]
    assert "1 number of the claim appears nowhere in the context" in reasons, reasons
    backed = [line for line in claim_lines if line.split()[0] in ("supported", "contradicted")]
    assert backed and all("<- passage " in line for line in backed), done.stdout
    assert not [line for line in backed if "<- passage 0:" in line]  # numbered from 1


def test_the_auto_instrumented_example_says_its_evaluation_spans_are_root_spans() -> None:
    source = (ROOT / "examples" / "auto_instrumented_app.py").read_text("utf-8")
    doc = " ".join((ast.get_docstring(ast.parse(source)) or "").split())
    assert "root span" in doc
    assert "openinference-instrumentation-langchain" in doc


def _evaluation_spans(**env: str) -> list[dict[str, Any]]:
    from tests.otel.test_auto_instrumentation import _run

    objects, done = _run(**env)
    spans = [o for o in objects if o.get("name") == "groundwatch.evaluation"]
    assert len(spans) == 2, done.stdout
    return spans


def test_what_the_auto_instrumented_example_says_of_its_spans_holds() -> None:
    """Without a LangChain instrumentor each evaluation span is a root span; with
    OpenInference's (``opentelemetry-instrument`` loads it when installed) it is a child in
    the request's trace."""
    spans = _evaluation_spans(OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="langchain")
    assert [s["parent_id"] for s in spans] == [None, None]
    if importlib.util.find_spec("openinference.instrumentation.langchain") is None:
        return
    spans = _evaluation_spans()
    assert all(s["parent_id"] is not None for s in spans)
