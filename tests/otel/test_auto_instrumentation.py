"""``opentelemetry-instrument python app.py`` turns groundwatch on with no code change.

The example app has no groundwatch or OpenTelemetry code. ``opentelemetry-instrument`` (from
``opentelemetry-distro``) configures the SDK with the console exporters and loads every registered
instrumentor; the evaluation spans and events must come out on stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "auto_instrumented_app.py"


def _console_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporters print one after another."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (start := text.find("{", at)) != -1:
        try:
            obj, at = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            at = start + 1
            continue
        found.append(obj)
    return found


def _run(**env: str) -> tuple[list[dict[str, Any]], subprocess.CompletedProcess[str]]:
    tool = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("opentelemetry-instrument is missing: requirements-dev.txt installs it")
        pytest.skip("needs opentelemetry-distro")
    base = {
        "OTEL_SERVICE_NAME": "faq-bot",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "console",
        # The exit hook scores what is queued within 5 s; a worker process that has to start
        # first on a loaded CI machine can miss that, and the executor is not under test here.
        "GROUNDWATCH_EXECUTOR": "thread",
    }
    done = subprocess.run(
        [tool, sys.executable, str(APP)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **base, **env},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return _console_objects(done.stdout), done


def test_opentelemetry_instrument_emits_the_evaluation_spans_and_events() -> None:
    objects, done = _run()
    spans = [o for o in objects if o.get("name") == "groundwatch.evaluation"]
    assert sorted(s["attributes"]["groundwatch.label"] for s in spans) == [
        "grounded",
        "hallucinated",
    ], done.stdout
    assert all(s["resource"]["attributes"]["service.name"] == "faq-bot" for s in spans)
    events = [o for o in objects if o.get("event_name") == "gen_ai.evaluation.result"]
    assert len(events) == 4  # faithfulness and groundedness for each answer
    # Each event is in its evaluation span's trace.
    assert {e["trace_id"] for e in events} == {s["context"]["trace_id"] for s in spans}


def test_groundwatch_variables_configure_the_instrumented_monitor() -> None:
    objects, done = _run(GROUNDWATCH_SAMPLE_RATE="0")
    assert not [o for o in objects if o.get("name") == "groundwatch.evaluation"], done.stdout
    assert "-> Refunds are accepted" in done.stdout  # the app itself ran
