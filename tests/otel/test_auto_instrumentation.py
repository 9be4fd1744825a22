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
import time
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


@pytest.mark.parametrize("executor", ["auto", "thread"])
def test_opentelemetry_instrument_emits_the_evaluation_spans_and_events(executor: str) -> None:
    # "auto": the judge's worker process starts while the app runs its two requests and exits;
    # with OpenInference's instrumentors installed too (requirements-dev.txt has them).
    objects, done = _run(GROUNDWATCH_EXECUTOR=executor)
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


def test_a_worker_process_does_not_run_opentelemetry_instrument_again() -> None:
    # opentelemetry-instrument's sitecustomize is on the app's path; in a worker process it
    # would set up the SDK and import every instrumented framework before the judge runs.
    tool = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip("needs opentelemetry-distro")
    code = (
        "import sys, json; from groundwatch.runtime.runners.worker_process import child_path; "
        "print(json.dumps([sys.path, child_path()]))"
    )
    done = subprocess.run(
        [tool, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
        },
    )
    path, child = json.loads(done.stdout.strip().splitlines()[-1])
    auto = [p for p in path if p.endswith("auto_instrumentation")]
    assert auto, path  # the app runs with it
    assert not [p for p in child.split(os.pathsep) if p.endswith("auto_instrumentation")]
    assert str(ROOT / "src") in child.split(os.pathsep)  # groundwatch stays importable


SLOW_START = """
import sys, time
# Only in groundwatch's worker process: an interpreter that takes a minute to start.
if "groundwatch.runtime.runners._child" in sys.orig_argv:
    time.sleep(60)
"""

APP_EXITING_AT_ONCE = """
import time
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
import groundwatch as gw

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
monitor = gw.Monitor(gw.LocalJudge(), executor="process", tracer_provider=provider)
for _ in range(2):
    monitor.record(question="q", contexts=["Paris is in France."], answer="Paris is in France.")
time.sleep(0.5)  # the worker process is starting now
"""


def test_records_queued_while_the_worker_process_starts_are_scored_at_exit(
    tmp_path: Path,
) -> None:
    # The timing of a loaded machine, forced: the worker process is still starting when the
    # app exits. The exit hook must not wait for it past its 5 s and drop the records.
    (tmp_path / "sitecustomize.py").write_text(SLOW_START)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GROUNDWATCH_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT / "src")])
    started = time.monotonic()
    # stderr to a file: the worker process inherits it, and would hold a pipe open for its
    # minute after the app is gone.
    with open(tmp_path / "stderr", "w") as stderr_file:
        done = subprocess.run(
            [sys.executable, "-c", APP_EXITING_AT_ONCE],
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
            timeout=120,
            env=env,
        )
    took = time.monotonic() - started
    stderr = (tmp_path / "stderr").read_text()
    assert done.returncode == 0, stderr
    spans = [o for o in _console_objects(done.stdout) if o.get("name") == "groundwatch.evaluation"]
    assert [s["attributes"]["groundwatch.label"] for s in spans] == ["grounded", "grounded"], stderr
    assert "dropped" not in stderr, stderr
    assert took < 30, f"exit took {took:.1f} s"  # not the minute the worker process needs
