"""docs/serve.md "Try it on one machine", run as written: ``groundwatch serve --verbose`` in
one process, the OpenInference-instrumented LangChain example sending it OTLP/HTTP in another,
no Collector. serve prints what it scored; the ports are free ones instead of the defaults."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RECIPE_SERVE = "groundwatch serve --verbose --capture-content --quiet-period-ms 1000"
RECIPE_APP = "python examples/serve_openinference.py"


def test_the_try_it_recipe_of_the_docs_runs_as_written() -> None:
    pytest.importorskip("openinference.instrumentation.langchain")
    doc = (ROOT / "docs" / "serve.md").read_text()
    assert RECIPE_SERVE in doc and RECIPE_APP in doc
    assert (
        'pip install -e ".[serve,demo]" -e integrations/langchain '
        "openinference-instrumentation-langchain" in doc
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("GROUNDWATCH_RAISE_INTERNAL_ERRORS", None)
    serve = subprocess.Popen(
        [sys.executable, "-m", "groundwatch", *RECIPE_SERVE.split()[1:],
         "--port", "0", "--grpc-port", "off"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    lines: list[str] = []

    def read() -> None:
        assert serve.stdout is not None
        for line in serve.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait_for(pattern: str, timeout_s: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while True:
            for line in list(lines):
                if found := re.search(pattern, line):
                    return found
            if time.monotonic() > deadline or not reader.is_alive():
                raise AssertionError(f"no line matching {pattern!r} in:\n" + "".join(lines))
            time.sleep(0.02)

    try:
        url = wait_for(r"listening on (http://\S+)").group(1)
        wait_for(r"groundwatch serve: telemetry goes nowhere")
        app = subprocess.run(
            [sys.executable, *RECIPE_APP.split()[1:]],
            cwd=ROOT,
            env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": url},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert app.returncode == 0, app.stderr
        assert f"sent 2 traces to {url}" in app.stdout, app.stdout
        # The trace id, which a trace backend finds the answer by (not the random record id).
        scored = r"scored trace=[0-9a-f]{32}"
        wait_for(scored + r" grounded\b.*How long do I have to ask for a refund\?")
        wait_for(scored + r" (hallucinated|unsupported)\b.*How long does standard shipping take")
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0, "".join(lines)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
